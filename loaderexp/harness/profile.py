"""The profiling pass: each stage of a sample's life timed on its own, in this process, before the measured
windows (which stay as they are, uninstrumented).

A sample is split where its dataset lets it be split: an ImageFolder's file read and JPEG decode apart, a
dataset with a ``transform`` attribute into its fetch (the transform set aside) and each operation of the
transform (each element of a ``Compose``, v1 or v2, by its class name), a dataset that fetches batches
(``__getitems__``) a batch at a time, as DataLoader's fetcher does; any other dataset's ``__getitem__`` is one
stage, and the split says so (:mod:`.stage_split`).  Each sample goes through its stages in turn, and a batch's samples
are held until the batch is whole, as in a worker; a stage that writes fresh memory is timed again on two heaps,
for its range (:mod:`.heap_range`).  Then collate, per batch.  Beside the stages, the loops
that are not split (:mod:`.profile_loops`): a ``DataLoader(num_workers=0)`` over other samples (what the
stages must add up to); one worker feeding the main process, for a worker's own cost per sample (its
stages, collating into shared memory, sending) and the main process's CPU to receive a batch (shared-memory
handles, rebuilding the tensors: the limit no number of workers lifts); and what the usable cores get done
together.

One torch thread throughout, as a DataLoader worker runs; the global random generators are restored after.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import random
import statistics
import time
from typing import Any, Callable, Iterator, Optional

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from loaderexp.harness.heap_range import with_heap_range
from loaderexp.harness.profile_lighter import Whole, lighter_pipelines
from loaderexp.harness.profile_loops import (Clock, SingleLoop, WorkerFigures, all_cores_rates, clock_overhead,
                                            single_process, worker_figures)
from loaderexp.harness.stage_split import Split, apply_op, transform_ops  # noqa: F401 (tests, benchmarks)
from loaderexp.harness.stages import Stage, StageProfile

MIN_SAMPLES = 3
MAX_SAMPLES = 2_000
WARM_SHARE = 0.03  # of the budget: the untimed pass before the stages' (it ends with a whole batch)
TIMED_SHARE = 0.15  # ... and the stages' pass
FULL_BATCH_SHARE = 0.5  # of the budget: the most each loop without workers may take at the run's own batch


def _stage_pass(split: Split, indices: list[int], budget_s: float, batch_size: Optional[int],
                batch_within_s: Optional[float] = None) -> tuple[dict[str, Clock], list[Any], int]:
    """Each sample through its stages in turn, as in a worker (each stage's input still warm in the cache: chunks
    of samples stage by stage read their input from memory, +25-80% for a cheap op), each stage timed on its own,
    the clocks' own cost (calibrated here) taken off.  Returns the clocks, the last batch's samples (for collate)
    and the samples timed.

    A batch's samples are held until the batch is whole and then let go, as a worker holds them until it collates
    and sends them: an op whose cost is mostly allocating its output (ToTensor, Normalize on a 224x224 image) then
    pays what it pays there.  Freeing each sample before the next read those two 8-18% under a DataLoader loop's;
    holding one more batch (the first, or the last while the next is made) read them 20-60% over.  The pass ends
    with a whole batch, unless its samples are so slow that finishing it would take longer than ``batch_within_s``
    (twice the budget unless given)."""
    if split.batched:
        return _batched_pass(split, indices, budget_s, batch_size or 1)
    clocks = {name: Clock() for name, _ in split.fetch + split.ops}
    overhead = clock_overhead()
    size, within_s = batch_size or 1, batch_within_s or 2 * budget_s
    batch: list[Any] = []
    done, started = 0, time.perf_counter()
    for index in indices:
        if len(batch) >= size:
            batch = []
        value: Any = index
        for name, fn in split.fetch:
            with clocks[name]:
                value = fn(value)
        value = split.finish(value, index)
        for name, op in split.ops:
            with clocks[name]:
                value = apply_op(op, value)
        batch.append(value)
        done += 1
        elapsed = time.perf_counter() - started
        if done >= MIN_SAMPLES and elapsed > budget_s and (len(batch) >= size or elapsed > within_s):
            break
    for clock in clocks.values():
        clock.cpu, clock.wall = max(clock.cpu - done * overhead.cpu, 0.0), max(clock.wall - done * overhead.wall, 0.0)
    return clocks, batch, done


def _batched_pass(split: Split, indices: list[int], budget_s: float,
                  size: int) -> tuple[dict[str, Clock], list[Any], int]:
    """A dataset with ``__getitems__`` fetched a batch's samples at a time, as DataLoader's fetcher calls it: a Hugging
    Face dataset's one call for 128 samples cost 0.061 ms a sample in a DataLoader loop, its ``__getitem__`` 0.204."""
    (name, fetch), = split.fetch
    clock, overhead = Clock(), clock_overhead()
    batch: list[Any] = []
    done, calls, started = 0, 0, time.perf_counter()
    for start in range(0, len(indices), size):
        chunk = indices[start:start + size]
        with clock:
            batch = list(fetch(chunk))
        done, calls = done + len(chunk), calls + 1
        if done >= MIN_SAMPLES and time.perf_counter() - started > budget_s:
            break
    clock.cpu, clock.wall = max(clock.cpu - calls * overhead.cpu, 0.0), max(clock.wall - calls * overhead.wall, 0.0)
    return {name: clock}, batch, done


def _timed_pass(split: Split, staged: list[int], checked: list[int], budget_s: float,
                batch_size: Optional[int]) -> tuple[dict[str, Clock], list[Any], int]:
    # Untimed first, on other samples: a pass's first samples pay what a process pays once (its heap growing to
    # a batch; in a fork, its first writes to pages its parent shares), which a worker spreads over an epoch.  A
    # whole batch of them, within the timed pass's budget: cut at twice its own (52 of the JPEG folder's 64), it
    # left the timed pass's first batch to grow a kept heap, 56-77 faults a sample in those samples against 0-9
    _stage_pass(split, checked, WARM_SHARE * budget_s, batch_size, batch_within_s=TIMED_SHARE * budget_s)
    return _stage_pass(split, staged, TIMED_SHARE * budget_s, batch_size)


def _stage_costs(split: Split, staged: list[int], checked: list[int], budget_s: float,
                 batch_size: Optional[int]) -> dict[str, float]:
    """The stage pass again: each stage's CPU per sample (run on other heaps: :mod:`.heap_range`)."""
    clocks, _, timed = _timed_pass(split, staged, checked, budget_s, batch_size)
    return {name: clock.cpu / timed for name, clock in clocks.items()}


def _collate_pass(made: list[Any], batch_size: Optional[int], collate: Callable) -> tuple[Clock, Any, int]:
    """Collate timed over a few batches of the samples made (the median batch's clock: the first call also
    pays for warming the allocator)."""
    size = min(batch_size or 1, len(made))
    timed, batch = [], None
    for _ in range(max(3, MIN_SAMPLES * 2 // size)):
        clock = Clock()
        with clock:
            batch = collate(made[:size]) if batch_size is not None else made[0]
        timed.append(clock)
    middle = sorted(timed, key=lambda c: c.cpu)[len(timed) // 2]
    return middle, batch, size


def _tensor_bytes(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return batch.element_size() * batch.nelement()
    if isinstance(batch, (list, tuple)):
        return sum(_tensor_bytes(item) for item in batch)
    if isinstance(batch, dict):
        return sum(_tensor_bytes(item) for item in batch.values())
    return 0


def _pin_cost(batch: Any) -> Optional[float]:
    if not torch.cuda.is_available():
        return None
    from torch.utils.data._utils.pin_memory import pin_memory

    pin_memory(batch)  # the first pin starts CUDA and its pinned-memory allocator: a one-off, not a batch's cost
    times = []
    for _ in range(5):
        started = time.perf_counter()
        pin_memory(batch)
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


class _Indices(Dataset):
    """Each sample its own index: a loop over it costs only the DataLoader's own work per sample."""

    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> int:
        return index


def loop_stage(indices: list[int], batch_size: Optional[int], budget_s: float) -> Stage:
    """The DataLoader's own work per sample (the sampler, a __getitem__ call, batching), which a worker pays
    too, without the dataset's or collate's."""
    loader = DataLoader(_Indices(max(indices) + 1), batch_size=batch_size, sampler=indices, num_workers=0,
                        collate_fn=lambda items: items)
    clock, samples = Clock(), 0
    deadline = time.perf_counter() + budget_s
    with clock:
        for items in loader:
            samples += len(items) if batch_size is not None else 1
            if time.perf_counter() > deadline:
                break
    return Stage("DataLoader loop", "loop", clock.cpu / max(samples, 1), clock.wall / max(samples, 1))


@contextlib.contextmanager
def _inherited_out_of_collection() -> Iterator[None]:
    """The objects this process has now kept out of the garbage collector's full passes while the in-process loops
    are timed.  In the fork that profiles (:mod:`loaderexp.execute.profiling`) the first full pass writes to every
    page of the parent's objects (copy-on-write): a cost the pass of tenths of a second would put on whichever stage
    met it (CIFAR-10's ops read 17% high on average, up to 40%), where a worker spreads it over an epoch.  The
    worker loops after run as they always have (their workers collect as a real loader's do)."""
    already = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not already:  # what someone froze before stays frozen
            gc.unfreeze()


def _loops_without_workers(dataset: Any, checked: list[int], batch_size: Optional[int], collate_fn: Optional[Callable],
                           per_sample: float, budget_s: float, threads: int) -> tuple[SingleLoop, SingleLoop]:
    """The stages' check, on one thread as they were timed; then the wall of a loop without workers as it runs, on
    the process's own ``threads`` (CPU there also counts the threads' spinning), over the samples the first went
    through: warm, as a run's later epochs are.  Past them its tail met samples this fork had not touched (a list of
    Python objects copies each page it reads; Arrow maps its pages in): a list-backed dataset's halves read 76-107%
    apart, its one-process limit +-214%."""
    first = single_process(dataset, checked, batch_size, collate_fn, per_sample, 0.075 * budget_s,
                           FULL_BATCH_SHARE * budget_s)
    torch.set_num_threads(threads)
    try:
        warm = single_process(dataset, checked[:first.samples] or checked, batch_size, collate_fn, per_sample,
                              0.075 * budget_s, FULL_BATCH_SHARE * budget_s)
    finally:
        torch.set_num_threads(1)
    return first, warm


def profile_stages(dataset: Any, batch_size: Optional[int], collate_fn: Optional[Callable], cores: float,
                   budget_s: float, seed: int = 0) -> Optional[StageProfile]:
    """Time each stage of ``dataset``'s samples, and the loops around them, within about ``budget_s``; None
    for an iterable dataset (its samples cannot be fetched one by one).  ``cores``: the usable cores (a
    CPU quota's share counts, not the affinity's)."""
    if isinstance(dataset, IterableDataset) or budget_s <= 0:
        return None
    from torch.utils.data import default_collate

    started = time.perf_counter()
    states = (random.getstate(), torch.get_rng_state(), torch.get_num_threads())
    torch.set_num_threads(1)  # as in a DataLoader worker
    try:
        order = list(range(len(dataset)))
        random.Random(seed).shuffle(order)
        staged, checked = order[:MAX_SAMPLES], order[MAX_SAMPLES:] or order
        split = Split(dataset)
        with _inherited_out_of_collection():
            clocks, made, timed = _timed_pass(split, staged, checked, budget_s, batch_size)
            collated, batch, collated_samples = _collate_pass(made, batch_size, collate_fn or default_collate)
            stages = [Stage(name, "fetch" if (name, fn) in split.fetch else "transform", c.cpu / timed,
                            c.wall / timed, c.faults / timed)
                      for (name, fn), c in zip(split.fetch + split.ops, clocks.values())]
            stages = with_heap_range(stages, functools.partial(_stage_costs, split, staged, checked, budget_s,
                                                               batch_size))
            if batch_size is not None:
                stages.append(Stage("collate", "collate", collated.cpu / collated_samples,
                                    collated.wall / collated_samples, collated.faults / collated_samples))
            stages.append(loop_stage(checked, batch_size, 0.03 * budget_s))
            per_sample = sum(s.wall_s for s in stages)
            first, warm = _loops_without_workers(dataset, checked, batch_size, collate_fn, per_sample, budget_s,
                                                 states[2])
            single_cpu, one_thread_wall, single_batch = first.cpu_s, first.wall_s, first.batch
            single_wall, single_spread = warm.wall_s, warm.spread
        worker = worker_figures(dataset, checked, per_sample, batch_size, collate_fn, 0.15 * budget_s) or \
            WorkerFigures(sum(s.cpu_s for s in stages), per_sample, 0.0, "the stages alone (no batch came from a "
                          "worker)", 0.0)
        rates = all_cores_rates(dataset, checked, batch_size, collate_fn, cores, worker.wall_s, 0.2 * budget_s)
        whole = Whole(single_wall, worker, statistics.median(rates) if rates else None)
        lighter = lighter_pipelines(dataset, stages, checked, batch_size, collate_fn, cores, 0.45 * budget_s, whole)
        pin = _pin_cost(batch)
    finally:
        random.setstate(states[0])
        torch.set_rng_state(states[1])
        torch.set_num_threads(states[2])
    return StageProfile(split=split.text, stages=stages, samples=timed, batch_size=batch_size or 1,
                        sample_bytes=_tensor_bytes(batch) / max(min(batch_size or 1, len(made)), 1),
                        single_cpu_s=single_cpu, single_wall_s=single_wall, worker_cpu_s=worker.cpu_s,
                        worker_wall_s=worker.wall_s, main_cpu_s_per_batch=worker.main_cpu_s_per_batch,
                        worker_basis=worker.basis, all_cores_rate=statistics.median(rates) if rates else None,
                        pin_s_per_batch=pin, cores=cores, seconds=time.perf_counter() - started,
                        all_cores_rates=rates, worker_cpu_spread=worker.spread, single_spread=single_spread,
                        single_batch=single_batch, single_wall_one_thread_s=one_thread_wall,
                        lighter=lighter)
