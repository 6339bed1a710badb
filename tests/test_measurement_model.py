"""The measurement model: warm-up to the pipeline's depth, whole rounds, adaptive repeats, what a
step waits for, CPU from a worker's birth, the statistics of a job, and the defects found in review."""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import replace

import pytest
import torch

from loaderexp.config.schema import BenchConfig, Budget, LoaderConfig
from loaderexp.execute.child import StallWatch
from loaderexp.execute.job import budget_from, measure_job, repeat_range
from loaderexp.harness.delivery import DeliveryTracker
from loaderexp.harness.records import (
    BudgetSpec,
    DeliveryRecord,
    LoaderFacts,
    Measurement,
    RepeatTiming,
    ResourceStats,
    StepTimes,
    TransferStats,
)
from loaderexp.harness.resources import ResourceMonitor
from loaderexp.harness.shm import sample_bytes_in_probe
from loaderexp.harness.steps import Consumer, MatmulStep
from loaderexp.harness.transfer import batch_size_and_bytes
from loaderexp.result.figures import figures
from loaderexp.runner import JobContext, run
from tests.conftest import REPO, TINY

BENCH = BenchConfig(batches=40, noise_threshold=0.1)


def loader(workers, prefetch=None):
    return LoaderConfig(num_workers=workers, prefetch_factor=prefetch)


def test_warmup_covers_the_pipeline_depth_and_windows_hold_whole_rounds():
    assert budget_from(BENCH, loader(0)).warmup_batches == 5
    assert budget_from(BENCH, loader(0)).round_size == 1
    sixteen = budget_from(BENCH, loader(16))
    assert (sixteen.warmup_batches, sixteen.round_size) == (32, 16)  # 16 workers x prefetch_factor 2 in flight
    assert budget_from(BENCH, loader(3, prefetch=4)).warmup_batches == 12
    # Whole epochs are timed whole: the warm-up stays as configured.
    assert budget_from(replace(BENCH, budget=Budget.epochs, warmup_batches=0), loader(16)).warmup_batches == 0


def test_repeats_are_adaptive_unless_fixed():
    assert repeat_range(BENCH) == (3, 10)
    assert repeat_range(replace(BENCH, repeats=2)) == (2, 2)


def test_summarize_turns_fake_repeats_into_figures():
    """Two repeats of known timings: every derived figure by hand."""
    def repeat(rate_scale: float) -> RepeatTiming:
        timing = RepeatTiming(startup_s=[0.5], wait_s=[0.01] * 8, busy_s=[0.02] * 8, samples=64 * 8,
                              sample_bytes=1000.0, window_s=0.24 / rate_scale, warmup_s=0.6, round_size=4)
        return timing

    repeats = [repeat(1.0), repeat(1.3)]
    step = StepTimes(has_step=True, copy_s=0.0, step_s=0.32)
    transfer = TransferStats(False, "CUDA not available: host-to-device copy not measured", 16, 0)
    measured = Measurement(repeats, "precise", BudgetSpec("batches"), 0.1, transfer, step,
                           ResourceStats(1, 0.0, 0.0, 0.0, 0.0, 1, None), DeliveryRecord(None, [], 0),
                           LoaderFacts("dataloader", "cpu", "user", None, batches_per_epoch=100))
    named = figures(measured)
    metrics, info = named.metrics, named.info
    rates = [512 / 0.24, 512 * 1.3 / 0.24]
    window = 0.24 + 0.24 / 1.3
    assert metrics["throughput_samples_per_s"] == pytest.approx(sum(rates) / 2)
    assert metrics["throughput_iqr_rel"] == pytest.approx((rates[1] - rates[0]) / 2 / (sum(rates) / 2))
    assert metrics["throughput_mb_per_s"] == pytest.approx(sum(rates) / 2 * 1000 / 1e6)
    assert metrics["measured_batches"] == 16 and metrics["measured_rounds"] == 4
    assert metrics["wait_p50_ms"] == pytest.approx(10) and metrics["wait_p95_ms"] == pytest.approx(10)
    assert metrics["stall_fraction"] == pytest.approx(0.16 / window)
    # The epoch estimate: start-up plus 100 batches at the measured batch rate (16 batches in the windows).
    assert metrics["epoch_time_est_s"] == pytest.approx(0.5 + 100 / (16 / window))
    assert metrics["step_ms_mean"] == pytest.approx(20)
    assert info.bound == "loader-bound" and metrics["noisy"] == 1.0  # IQR/median 13% > 10%
    assert metrics["h2d_measured"] == 0.0 and "not measured" in info.h2d


def test_a_scalar_first_field_does_not_count_as_the_batch():
    batch = {"epoch": torch.tensor(3), "images": torch.zeros(32, 3, 8, 8), "labels": torch.zeros(32, dtype=torch.int64)}
    samples, size = batch_size_and_bytes(batch)
    assert samples == 32
    assert size == 8 + 32 * 3 * 8 * 8 * 4 + 32 * 8


class RecordingCopy:
    """A stand-in for the device copy: records the order of copies, waits and nothing else."""

    cuda = False

    def __init__(self, log):
        self.log = log
        self.ready = None

    def __call__(self, batch, measured=True):
        self.log.append(("copy", batch))
        self.ready = f"event {batch}"
        return batch

    def wait(self, ready, on_device):
        self.log.append(("wait", ready, on_device))


def test_each_step_waits_for_its_batch_copy_first():
    log = []
    consumer = Consumer(RecordingCopy(log), lambda batch: log.append(("step", batch)))
    for batch in (1, 2):
        consumer(batch, True)
    assert log == [("copy", 1), ("wait", "event 1", False), ("step", 1),
                   ("copy", 2), ("wait", "event 2", False), ("step", 2)]


def test_with_prefetch_the_next_copy_is_queued_before_the_step():
    log = []
    consumer = Consumer(RecordingCopy(log), lambda batch: log.append(("step", batch)), prefetch=True)
    for batch in (1, 2, 3):
        consumer(batch, True)
    consumer.flush()
    assert log == [("copy", 1), ("copy", 2), ("wait", "event 1", False), ("step", 1),
                   ("copy", 3), ("wait", "event 2", False), ("step", 2),
                   ("wait", "event 3", False), ("step", 3)]
    consumer.flush()  # nothing pending: nothing more
    assert log[-1] == ("step", 3)


def test_the_matmul_step_consumes_its_batch():
    step = MatmulStep(size=16, repeat=2, device=torch.device("cpu"))
    assert step.on_device
    images = torch.rand(8, 3, 4, 4)
    first = step((images, torch.zeros(8)))
    assert first.shape == (8, 16)
    assert not torch.equal(first, step((images * 2, torch.zeros(8))))  # the output follows the batch
    assert step((torch.zeros(8, 3, 4, 4, dtype=torch.uint8),)).abs().sum() == 0


def _burn(cpu_s: float, then_sleep: float) -> None:
    """Uses cpu_s of CPU (not of wall time: on a busy host a wall-time burn gets a fraction of a core)."""
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass
    time.sleep(then_sleep)


def test_a_new_worker_counts_the_cpu_it_used_since_birth():
    """psutil's first cpu_percent() of a process reads 0: a short-lived worker looked idle. Its CPU is
    counted from its birth, whatever share of a core the host gave it."""
    with ResourceMonitor(interval_s=0.4) as monitor:
        time.sleep(0.1)
        worker = multiprocessing.get_context("fork").Process(target=_burn, args=(0.3, 0.6))
        worker.start()
        worker.join()
    assert monitor.cpu_s >= 0.29
    assert monitor.stats().cpu_percent_peak > 0


class LazyHandle(torch.utils.data.Dataset):
    """Opens a 'handle' (remembers the pid) on first read, as an HDF5 or LMDB dataset does."""

    opened_in = None

    def __len__(self):
        return 10

    def __getitem__(self, index):
        if self.opened_in is None:
            self.opened_in = multiprocessing.current_process().pid
        return torch.zeros(3, 32, 32)


def test_the_shm_preflight_reads_its_sample_in_a_probe_process():
    dataset = LazyHandle()
    assert sample_bytes_in_probe(dataset) == 3 * 32 * 32 * 4
    assert dataset.opened_in is None  # nothing for the workers to inherit


class DiesLikeTorch:
    """An iterator whose worker died of a signal and which says only what torch says when the broken
    pipe wins the race with its SIGCHLD handler: "exited unexpectedly", or, when the worker is not yet
    reaped as it reads the pipe (a busy host), the reset connection itself."""

    class Worker:
        pid, exitcode = 4385, -11

    _workers = [Worker()]

    def __init__(self, error: Exception):
        self.error = error

    def __iter__(self):
        return self

    def __next__(self):
        raise self.error


@pytest.mark.parametrize("said", [RuntimeError("DataLoader worker (pid(s) 4385) exited unexpectedly"),
                                  ConnectionResetError(104, "Connection reset by peer")])
def test_a_worker_that_died_of_a_signal_is_named_with_it_whichever_way_torch_says_it(said):
    from loaderexp.harness.loop import BudgetSpec, run_repeat

    class Loader:
        def __iter__(self):
            return DiesLikeTorch(said)

    delivery = DeliveryTracker(recorder=None, dataset_length=None, batch_size=4, drop_last=False, in_order=True,
                               num_workers=1)
    with pytest.raises(RuntimeError) as raised:
        run_repeat(Loader(), BudgetSpec(mode="batches"), delivery)
    assert str(said) in str(raised.value)
    assert "DataLoader worker (pid 4385) is killed by signal: Segmentation fault." in str(raised.value)


def test_a_stall_is_no_batch_for_stall_s_or_twenty_times_the_longest_gap():
    watch = StallWatch(stall_s=60, now=0.0)
    for second in range(1, 11):
        watch.see(second * 10, float(second))  # 10 batches a second
    assert watch.limit == 60 and not watch.stalled(69.0) and watch.stalled(71.0)
    watch.see(101, 15.0)  # one batch after a 5 s gap: the limit grows with what the job has shown
    assert watch.limit == 100 and not watch.stalled(110.0)


def test_adaptive_repeats_stop_when_precise_or_at_the_cap(compose_cfg):
    def measured(*overrides):
        from loaderexp.config import to_spec

        cfg = to_spec(compose_cfg([*TINY, "tracking=none", "bench.repeats=null", *overrides]))
        return figures(measure_job(cfg))

    loose = measured("bench.min_repeats=2", "bench.max_repeats=5", "bench.precision=1.0")
    assert loose.metrics["repeats"] == 2 and loose.info.repeats_stopped == "precise"
    strict = measured("bench.min_repeats=2", "bench.max_repeats=3", "bench.precision=1e-12")
    assert strict.metrics["repeats"] == 3 and strict.info.repeats_stopped == "max_repeats"
    fixed = measured("bench.repeats=1")
    assert fixed.metrics["repeats"] == 1 and fixed.info.repeats_stopped == "fixed"


@pytest.mark.parametrize("workers", [0, 2])
def test_a_user_collate_fn_is_used_and_its_batch_counted_right(compose_cfg, workers):
    from loaderexp.config import apply_python_path, to_spec

    cfg = to_spec(compose_cfg([
        *TINY, "tracking=none", f"loader.num_workers={workers}", "loader.collate_fn=tests.faulty.dict_collate",
        f"+dataset.python_path={REPO}"]))
    apply_python_path(cfg)
    m = figures(measure_job(cfg))
    assert m.info.delivery_ok is True
    per_sample = 3 * 32 * 32 * 4 + 8  # an image and its label; the scalar field is a few bytes a batch
    assert m.metrics["throughput_mb_per_s"] * 1e6 / m.metrics["throughput_samples_per_s"] == pytest.approx(per_sample, rel=0.01)


def test_a_worker_init_fn_runs_in_each_worker(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", "loader.num_workers=1", "loader.worker_init_fn=tests.faulty.failing_worker_init",
                       f"+dataset.python_path={REPO}"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED" and "worker_init_fn ran in worker 0" in result.error


@pytest.mark.slow
def test_pil_images_without_a_transform_say_what_to_set(compose_cfg, tmp_path):
    cfg = compose_cfg(["dataset=cifar10", "transform=none", "tracking=none", "bench=quick"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert "likely cause: PIL images reach the collate function" in result.error and "transform=to_tensor" in result.error


def test_a_dataset_root_that_cannot_be_written_names_the_key_and_the_path(compose_cfg, tmp_path):
    cfg = compose_cfg(["dataset=cifar10", "dataset.root=/proc/loaderexp-nope", "tracking=none", "bench=quick"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert result.error.startswith("DatasetError: dataset.root=/proc/loaderexp-nope: ")
    assert "InstantiationException" not in result.error


@pytest.mark.slow
def test_a_stalled_worker_is_caught_in_seconds_with_its_state(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", "dataset._target_=tests.faulty.StallsAfter", f"+dataset.python_path={REPO}",
                       "loader.num_workers=1", "bench.batches=100", "bench.stall_s=3", "bench.job_timeout_s=300"])
    started = time.monotonic()
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert time.monotonic() - started < 60
    assert result.status == "FAILED"
    assert "Stalled: no batch for" in result.error and "bench.stall_s=3" in result.error
    assert "worker" in result.error and "likely cause: hang" in result.error


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_a_step_none_run_waits_for_every_copy(compose_cfg):
    from loaderexp.config import to_spec

    for pin in ("true", "false"):
        cfg = to_spec(compose_cfg([*TINY, "tracking=none", "device=cuda", f"loader.pin_memory={pin}",
                                   "loader.num_workers=1"]))
        m = figures(measure_job(cfg))
        assert m.metrics["h2d_measured"] == 1.0 and m.metrics["h2d_gbps"] > 0
        assert m.metrics["pinned_fraction"] == (1.0 if pin == "true" else 0.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_prefetch_runs_every_step_and_times_it_on_the_device(compose_cfg):
    from loaderexp.config import to_spec

    cfg = to_spec(compose_cfg([*TINY, "tracking=none", "device=cuda", "device.prefetch=true",
                               "loader.pin_memory=true", "step=matmul", "step.size=512"]))
    m = figures(measure_job(cfg))
    assert m.metrics["step_ms_mean"] > 0 and m.info.bound in ("loader-bound", "transfer-bound", "compute-bound")
