"""A stage that writes fresh memory gets a range: timed again in forks whose glibc allocator either keeps what it
frees (a batch reuses the pages the last one let go) or hands every large block back (each is faulted in fresh),
beside the pass's own figure."""

from __future__ import annotations

import ctypes
import mmap
import os
import resource

import pytest
import torch

from loaderexp.harness import heap_range
from loaderexp.harness.profile import profile_stages
from loaderexp.harness.profile_loops import Clock
from loaderexp.harness.heap_range import FRESH_HEAP, SETTLED, with_heap_range, writes_fresh_memory
from loaderexp.harness.stages import Stage, StageProfile
from loaderexp.report.ceiling import stage_metrics, stage_table
from loaderexp.result import NUM_WORKERS, RunResult, Status
from loaderexp.result import metrics as M

needs_glibc = pytest.mark.skipif(heap_range._glibc() is None, reason="glibc's allocator only (its mallopt)")
BLOCK, BLOCKS = 602_112, 64  # a 224x224x3 float image, a batch of them
PAGES = BLOCK * BLOCKS // 4096


def _batch_refaults() -> int:
    """Page faults in making a batch of image-sized blocks again after the last batch's were all freed."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]

    def batch() -> list[int]:
        blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
        for block in blocks:
            ctypes.memset(block, 1, BLOCK)  # written, as an op writes its output
        return blocks

    for block in batch():
        libc.free(block)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    again = batch()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    for block in again:
        libc.free(block)
    return faults


@needs_glibc
def test_a_batch_reuses_the_last_ones_pages_on_the_settled_heap_and_faults_them_all_on_the_fresh_one():
    libc = heap_range._glibc()
    assert heap_range._on_heap(libc, SETTLED, _batch_refaults) < PAGES // 10
    assert heap_range._on_heap(libc, FRESH_HEAP, _batch_refaults) > PAGES * 9 // 10


def _stages() -> list[Stage]:
    return [Stage("decode", "fetch", 0.0005, 0.0005, 0.5), Stage("ToTensor", "transform", 0.0004, 0.0004, 146.0),
            Stage("Normalize", "transform", 0.0002, 0.0002, 30.0), Stage("collate", "collate", 0.0004, 0.0004, 147.0)]


@needs_glibc
def test_stages_that_wrote_fresh_memory_are_timed_again_on_each_heap():
    def costs() -> dict[str, float]:  # what the heap made of a batch after a batch, for every stage
        refaults = float(_batch_refaults())
        return {"decode": refaults, "ToTensor": refaults, "Normalize": refaults, "collate": refaults}

    stages = with_heap_range(_stages(), costs)
    assert [s.name for s in stages if s.settled_cpu_s is not None] == ["ToTensor", "Normalize"]  # not collate's
    to_tensor = stages[1]
    assert to_tensor.settled_cpu_s < PAGES // 10 and to_tensor.fresh_cpu_s > PAGES * 9 // 10
    assert [s.cpu_s for s in stages] == [s.cpu_s for s in _stages()]  # the pass's own figures stand


@needs_glibc
def test_the_passes_run_in_other_processes():
    answers = []
    with_heap_range(_stages(), lambda: answers.append(os.getpid()) or {})
    assert answers == []  # appended in the forks' copies, not here


@needs_glibc
@pytest.mark.parametrize("failing", [lambda: 1 / 0, lambda: os._exit(3)], ids=["raises", "crashes"])
def test_a_pass_that_fails_leaves_the_first_ones_figures(failing):
    assert with_heap_range(_stages(), failing) == _stages()


def test_a_stage_writes_fresh_memory_where_its_faults_could_be_a_tenth_of_its_cpu():
    assert writes_fresh_memory(Stage("Normalize", "transform", 0.000165, 0.000165, 30.0))  # 30 us of 165
    assert not writes_fresh_memory(Stage("Crop", "transform", 0.0006, 0.0006, 9.0))  # 9 of 600
    assert not writes_fresh_memory(Stage("Flip", "transform", 0.00002, 0.00002, 7.0))  # under 8 a sample


def test_no_pass_where_no_stage_wrote_fresh_memory_or_there_is_no_glibc(monkeypatch):
    def never():
        raise AssertionError("timed again")

    quiet = [Stage("Crop", "transform", 0.0003, 0.0003, 20.0), Stage("Flip", "transform", 0.00002, 0.00002, 7.0)]
    assert with_heap_range(quiet, never) == quiet
    monkeypatch.setattr(heap_range, "_glibc", lambda: None)
    assert with_heap_range(_stages(), never) == _stages()


def test_a_clock_counts_the_page_faults_inside_it():
    region, clock = mmap.mmap(-1, 64 * 4096), Clock()
    with clock:
        for page in range(64):
            region[page * 4096] = 1
    region.close()
    assert clock.faults >= 64


class FreshPages:
    """An op whose output is 1 MB on pages the kernel hands over fresh on every call (its own mapping)."""

    def __call__(self, _value):
        region = mmap.mmap(-1, 1 << 20)
        torch.frombuffer(region, dtype=torch.uint8).fill_(1)
        return torch.frombuffer(region, dtype=torch.uint8)[:16].clone()


class Pages:
    def __init__(self, op):
        self.transform = op

    def __len__(self) -> int:
        return 200

    def __getitem__(self, index: int):
        return index if self.transform is None else self.transform(index)


@needs_glibc
def test_the_profile_gives_a_fresh_memory_op_its_range_and_the_report_says_so():
    profile = profile_stages(Pages(FreshPages()), 8, None, 1, 0.3)
    fresh = next(s for s in profile.stages if s.name == "FreshPages")
    assert fresh.faults >= 256  # its own mapping faults on any heap
    assert fresh.settled_cpu_s is not None and fresh.fresh_cpu_s is not None
    table = "\n".join(stage_table([RunResult(Status.FINISHED, {NUM_WORKERS: 0}, {M.THROUGHPUT: 1000.0},
                                             profile=StageProfile.from_dict(profile.to_dict()))]))
    low, high = min(fresh.settled_cpu_s, fresh.cpu_s), max(fresh.fresh_cpu_s, fresh.cpu_s)
    assert f"FreshPages writes fresh memory ({fresh.faults:,.0f} page faults a sample in the pass): " \
           f"{1000 * low:.4f}-{1000 * high:.4f} ms CPU a sample" in table


def test_the_stages_sum_is_a_range_and_the_loop_is_held_against_its_nearer_end():
    def table(single_cpu_s: float) -> str:
        profile = StageProfile(split="test", samples=100, batch_size=10, sample_bytes=1000.0, single_cpu_s=single_cpu_s,
                               single_wall_s=single_cpu_s, worker_cpu_s=0.001, worker_wall_s=0.001,
                               main_cpu_s_per_batch=0.0005, worker_basis="test", cores=2,
                               stages=[Stage("decode", "fetch", 0.0005, 0.0005),
                                       Stage("ToTensor", "transform", 0.0004, 0.0004, 146.0, 0.00025, 0.00062)])
        run = RunResult(Status.FINISHED, {NUM_WORKERS: 0}, {M.THROUGHPUT: 1000.0}, profile=profile)
        return "\n".join(stage_table([run]))

    inside = table(0.0008)  # the stages: 0.75 to 1.12 ms
    assert "(the stages add up to 94-140% of it)" in inside and "part by" not in inside
    assert "ToTensor writes fresh memory (146 page faults a sample in the pass): 0.2500-0.6200 ms CPU a sample" \
        in inside
    assert "part by 25%" in table(0.0006)  # its low end, 0.75 ms, is 25% over the loop's


def test_the_parent_run_logs_a_stages_range_beside_what_the_pass_met():
    profile = StageProfile(split="test", samples=100, batch_size=10, sample_bytes=1000.0, single_cpu_s=0.001,
                           single_wall_s=0.001, worker_cpu_s=0.001, worker_wall_s=0.001, main_cpu_s_per_batch=0.0005,
                           worker_basis="test", cores=2, stages=[Stage("decode", "fetch", 0.0005, 0.0005),
                                                                 Stage("ToTensor", "transform", 0.0004, 0.0004, 146.0,
                                                                       0.00025, 0.0006)])
    logged = stage_metrics([RunResult(Status.FINISHED, {NUM_WORKERS: 0}, {M.THROUGHPUT: 1000.0}, profile=profile)])
    assert logged[f"{M.STAGE_CPU}.ToTensor"] == 0.4 and logged[f"{M.STAGE_CPU_SETTLED}.ToTensor"] == 0.25
    assert logged[f"{M.STAGE_CPU_FRESH}.ToTensor"] == 0.6
    assert f"{M.STAGE_CPU_SETTLED}.decode" not in logged


class _Images(torch.utils.data.Dataset):
    """Image-sized float samples, each written fresh, as ToTensor makes them."""

    def __len__(self) -> int:
        return 256

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.ones(3, 224, 224)


def test_the_loop_without_workers_runs_at_the_runs_batch_when_a_few_fit_and_pays_its_fresh_pages():
    """A batch of 64 image-sized samples (38 MB) is mapped fresh each time; the small batch the budget alone would
    allow (here 1) stays on the heap.  With room for FULL_BATCHES of the run's batch the loop takes the run's, and
    meets the page faults a run meets (about a page per 4 KB a sample: 146 against 22 when measured); without the
    room, the small one."""
    from loaderexp.harness.profile_loops import FULL_BATCHES, single_process

    def loop(**room) -> tuple[list[int], float]:
        sizes: list[int] = []

        def collate(items):
            sizes.append(len(items))
            return torch.stack(items)

        with Clock() as clock:
            single_process(_Images(), list(range(256)), 64, collate, 1e-4, budget_s=0.001, **room)
        return sizes, clock.faults / sum(sizes)

    full, full_faults = loop(full_batch_s=1.0)
    assert set(full) == {64} and len(full) >= FULL_BATCHES
    small, small_faults = loop()
    assert set(small) == {1}  # the budget's batch: 0.001 s over 12 batches of 0.1 ms samples
    if heap_range._glibc() is not None:
        assert full_faults > 3 * small_faults


def test_the_loop_without_workers_spreads_by_its_halves_not_by_a_batchs_jitter():
    """A list-backed dataset's 0.4 ms batches read 114% IQR / median in the loop without workers, which put the
    one-process limit at +-228%. Batches that alternate 0.5 and 3 ms are each jittery; the loop's halves agree."""
    import time as clock

    from loaderexp.harness.profile_loops import single_process

    class Alternating(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 24

        def __getitem__(self, index: int):
            clock.sleep(0.003 if index % 2 else 0.0005)
            return torch.zeros(1)

    _, wall, spread, batch, _ = single_process(Alternating(), list(range(24)), 1, None, 0.002, budget_s=0.01)
    assert batch == 1 and spread < 0.5  # IQR / median here: about 1.4
