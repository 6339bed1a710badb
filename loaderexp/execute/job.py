"""One job's measurement, from a plain config to metrics: dataset -> sampler -> loader -> loop.

Takes plain values only (no DictConfig, no Hydra app, no MLflow): the runner calls it, and so
can a script or a test.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Optional
from warnings import catch_warnings, filterwarnings

import numpy as np
import torch
from torch.utils.data import IterableDataset, default_collate

from loaderexp.config import ConfigError, check_targets
from loaderexp.data.build import build_dataset, build_loader, build_sampler, build_transform, callable_at
from loaderexp.measure.batches import batches_table
from loaderexp.measure.delivery import DeliveryTracker, RecordingBatchSampler, instrumented
from loaderexp.measure.loop import BudgetSpec, RepeatTiming, run_windows, whole_rounds
from loaderexp.measure.resources import ResourceMonitor
from loaderexp.measure.shm import shm_preflight
from loaderexp.measure.stats import spread, summarize
from loaderexp.measure.steps import Consumer, make_step
from loaderexp.measure.transfer import HostToDevice


@dataclass
class JobMeasurement:
    metrics: dict[str, float]
    info: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    batches_csv: str = ""  # per-batch timings, one row per measured batch


def resolve_device(kind: str) -> torch.device:
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def configured_dataset(cfg: Mapping[str, Any]) -> Any:
    """The dataset and transform the config names, built after seeding (a dataset may draw from the
    global generators as it is made): the dataset holder and an in-process job build it this one way."""
    seed_everything(cfg["bench"]["seed"])
    return build_dataset(cfg["dataset"], build_transform(cfg["transform"]))


def budget_from(bench: Mapping[str, Any], loader: Mapping[str, Any]) -> BudgetSpec:
    """The measured budget of one repeat; with workers, warm-up and windows follow the rounds.

    The warm-up lasts at least the pipeline's depth (``num_workers x prefetch_factor`` batches are
    in flight when the first arrives), and a window holds whole rounds of ``num_workers`` batches.
    Whole epochs are timed whole: there the warm-up stays as configured.
    """
    workers = loader["num_workers"]
    warmup = bench["warmup_batches"]
    if bench["budget"] != "epochs":
        warmup = max(warmup, workers * (loader["prefetch_factor"] or 2))
    return BudgetSpec(
        mode=bench["budget"],
        warmup_batches=warmup,
        batches=bench["batches"],
        epochs=bench["epochs"],
        seconds=bench["seconds"],
        max_seconds=bench["max_run_seconds"],
        round_size=max(workers, 1),
        min_seconds=bench["min_window_s"],
    )


def repeat_range(bench: Mapping[str, Any]) -> tuple[int, int]:
    """(fewest, most) repeats: fixed by ``bench.repeats``, else adaptive."""
    fixed = bench["repeats"]
    return (fixed, fixed) if fixed else (bench["min_repeats"], bench["max_repeats"])


def planned_batches(budget: BudgetSpec, repeats: int, batches_per_epoch: Optional[int]) -> Optional[int]:
    """Measured batches the fewest repeats will take, when known up front (for progress bars)."""
    if budget.mode == "batches":
        return whole_rounds(budget.batches, budget.round_size) * repeats
    if budget.mode == "epochs" and batches_per_epoch:
        return max(batches_per_epoch * budget.epochs - budget.warmup_batches, 0) * repeats
    return None


def measured_loader(
    dataset: Any, sampler_cfg: Mapping[str, Any], loader_cfg: Mapping[str, Any], sampler: Optional[Any] = None,
    backend: Optional[Mapping[str, Any]] = None,
) -> tuple[Any, Optional[RecordingBatchSampler]]:
    """The configured loader as loaderexp measures it: for a map-style dataset, the sampler's
    indices recorded and, with workers, each batch tagged with its indices (the delivery check).
    ``backend`` other than dataloader: the same batches through another stack (execute/backends.py)."""
    other = backend is not None and backend["name"] != "dataloader"
    if isinstance(dataset, IterableDataset):
        if other:
            raise ConfigError([f"backend={backend['name']}: the dataset is an IterableDataset, which orders and "
                               "batches itself; the backends map batches of indices: use backend=dataloader"])
        return build_loader(dataset, None, loader_cfg), None
    sampler = sampler if sampler is not None else build_sampler(sampler_cfg, dataset)
    sampler = sampler if sampler is not None else torch.utils.data.SequentialSampler(dataset)
    recorder = RecordingBatchSampler(sampler, loader_cfg["batch_size"], loader_cfg["drop_last"])
    if other:
        from loaderexp.execute.backends import backend_loader

        collate = callable_at(loader_cfg["collate_fn"]) or default_collate
        return backend_loader(backend, dataset, recorder, loader_cfg, collate), recorder
    dataset, extra = instrumented(dataset, recorder, loader_cfg["num_workers"], callable_at(loader_cfg["collate_fn"]))
    loader = build_loader(dataset, extra.pop("sampler", None), loader_cfg, **extra)
    return loader, recorder


def repeat_until_precise(
    loader: Any,
    budget: BudgetSpec,
    bench: Mapping[str, Any],
    delivery: DeliveryTracker,
    consumer: Optional[Consumer],
    on_batch: Optional[Callable[[int], None]],
) -> tuple[list[RepeatTiming], str]:
    """Repeats until they agree to ``bench.precision`` (IQR/median, from ``min_repeats`` up to
    ``max_repeats``), or ``bench.repeats`` of them; and why it stopped.

    A repeat is one window of a single warmed-up stream (the next starts where the last ended,
    as torch.utils.benchmark's blocks do); with ``bench.budget=epochs`` each repeat is its own
    stream of whole epochs from a fresh iterator.
    """
    fewest, most = repeat_range(bench)

    floor = bench.get("stop_below")
    pruned = False

    def another(repeats: list[RepeatTiming]) -> bool:
        nonlocal pruned
        if len(repeats) >= most:
            return False
        if floor is not None and len(repeats) == 1 and repeats[0].samples_per_s < floor:
            # Clearly behind after its first window (which starts an epoch and so never pays a
            # restart of the workers): no more windows can bring it within reach of the best.
            pruned = True
            return False
        if bench["repeats"] or len(repeats) < fewest:
            return True
        return spread([r.samples_per_s for r in repeats]).relative > bench["precision"]

    if budget.mode != "epochs":
        repeats = run_windows(loader, budget, delivery, consumer, time.perf_counter, on_batch, another)
    else:
        repeats = []
        while not repeats or another(repeats):
            done_before = sum(r.batches for r in repeats)

            def counted(done: int) -> None:
                on_batch(done_before + done)  # type: ignore[misc]

            repeats += run_windows(loader, budget, delivery, consumer, time.perf_counter,
                                   counted if on_batch is not None else None)
            if consumer is not None:
                consumer.flush()  # a prefetched batch still pending is stepped outside the window
    if consumer is not None:
        consumer.flush()
    if pruned:
        return repeats, "pruned"
    if bench["repeats"]:
        return repeats, "fixed"
    precise = spread([r.samples_per_s for r in repeats]).relative <= bench["precision"]
    return repeats, "precise" if precise else "max_repeats"


# torch's warnings for what a run records itself (more workers than CPUs, pin_memory without an
# accelerator): a sweep prints one line per job, not the same advice twice per job.
RECORDED_WARNINGS = (r"This DataLoader will create \d+ worker processes in total",
                     r".*'pin_memory' argument is set as true but no accelerator is found")


def measure_job(
    cfg: Mapping[str, Any],
    on_batch: Optional[Callable[[int, Optional[int]], None]] = None,
    dataset: Optional[Any] = None,
    forked_from: tuple[int, ...] = (),
) -> JobMeasurement:
    """:func:`measure` in this one process, with torch's warnings for what the run records itself
    left out (several ranks: :func:`loaderexp.execute.ranks.measure_on_node`)."""
    with quiet_torch_warnings():
        return measure(cfg, on_batch, dataset, forked_from)


@contextmanager
def quiet_torch_warnings() -> Iterator[None]:
    with catch_warnings():
        for message in RECORDED_WARNINGS:
            filterwarnings("ignore", message=message, category=UserWarning)
        yield


def measure(
    cfg: Mapping[str, Any],
    on_batch: Optional[Callable[[int, Optional[int]], None]] = None,
    dataset: Optional[Any] = None,
    forked_from: tuple[int, ...] = (),
    sampler: Optional[Any] = None,
    after_windows: Optional[Callable[[Any], None]] = None,
) -> JobMeasurement:
    """Build the configured loader and measure it: repeats until they agree to ``bench.precision``
    (IQR/median, at least ``bench.min_repeats``, at most ``bench.max_repeats``), or exactly
    ``bench.repeats`` times when that is set.

    ``dataset`` replaces the configured one (the benchmark measures both loops on one instance).
    ``forked_from`` are the processes this one was forked from with torch loaded or the dataset
    built (execute/holder.py): the memory figures count their share of the pages in common.
    A rank passes its ``sampler`` (DistributedSampler) and ``after_windows(loader)``, which keeps
    it loading while the other ranks still measure.
    """
    check_targets(cfg)  # the imports it needs are this process's anyway: first, before any dataset
    loader_cfg, bench = cfg["loader"], cfg["bench"]
    device = resolve_device(cfg["device"]["type"])
    if dataset is None:
        dataset = configured_dataset(cfg)
    seed_everything(bench["seed"])  # the loop starts from the seed, wherever the dataset was built
    iterable = isinstance(dataset, IterableDataset)
    warnings: list[str] = []
    if iterable and cfg["sampler"].get("name") not in (None, "sequential"):
        warnings.append(f"sampler={cfg['sampler'].get('name')} ignored: an IterableDataset orders its own samples")
    backend = cfg["backend"]
    loader, recorder = measured_loader(dataset, cfg["sampler"], loader_cfg, sampler, backend)
    try:
        dataset_length: Optional[int] = len(dataset)  # type: ignore[arg-type]
    except TypeError:
        dataset_length = None
    try:
        batches_per_epoch: Optional[int] = len(loader)
    except TypeError:
        batches_per_epoch = None
    delivery = DeliveryTracker(
        recorder=recorder,
        dataset_length=dataset_length,
        batch_size=loader_cfg["batch_size"],
        drop_last=loader_cfg["drop_last"],
        in_order=loader_cfg["in_order"],
        num_workers=loader_cfg["num_workers"],
        tagged=None if backend["name"] == "dataloader" else recorder is not None,  # the backends tag every batch
    )
    warnings += shm_preflight(dataset, iterable, loader_cfg)
    to_device = HostToDevice(device, cfg["device"]["non_blocking"])
    step_cfg = cfg["step"]
    step = make_step(step_cfg, device, callable_at(step_cfg.get("_target_")))
    consumer = Consumer(to_device, step, prefetch=cfg["device"]["prefetch"])
    # Nothing to copy, pin-check or compute: leave the per-batch hook out of the hot loop.
    idle = step is None and device.type == "cpu" and not torch.cuda.is_available()
    budget = budget_from(bench, loader_cfg)
    total = planned_batches(budget, repeat_range(bench)[0], batches_per_epoch)

    def progress(done: int) -> None:
        on_batch(done, total)  # type: ignore[misc]

    gpu_index = (device.index or 0) if device.type == "cuda" else None
    with ResourceMonitor(bench["resource_interval_s"], gpu_index=gpu_index, forked_from=forked_from) as monitor:
        repeats, stopped = repeat_until_precise(loader, budget, bench, delivery, None if idle else consumer,
                                                progress if on_batch is not None else None)
        if after_windows is not None:
            after_windows(loader)
    resources = monitor.stats()  # stopped, with a last sample, on leaving the block
    del loader  # persistent workers end here, not at interpreter exit

    transfer = to_device.stats()
    metrics, info = summarize(repeats, consumer, transfer, bench, batches_per_epoch, step_cfg["kind"] != "none")
    info.update(repeats_stopped=stopped, warmup_batches=budget.warmup_batches, round_size=budget.round_size,
                repeat_rates=[round(r.samples_per_s, 1) for r in repeats])
    if stopped == "pruned":
        metrics["pruned"] = 1.0
    info["backend"] = backend["name"]
    if loader_cfg["num_workers"] > 0 and backend["name"] in ("dataloader", "nodes_process"):
        info["worker_start_method"] = loader_cfg["multiprocessing_context"] or multiprocessing.get_start_method()
    metrics.update(resources.gpu_metrics())
    if resources.gpu_note:
        info["gpu_metrics"] = resources.gpu_note
    if device.type == "cuda":
        metrics["cuda_allocated_peak_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    metrics.update(
        cpu_percent_mean=resources.cpu_percent_mean,
        cpu_percent_peak=resources.cpu_percent_peak,
        pss_peak_mb=resources.pss_peak_mb,
        uss_peak_mb=resources.uss_peak_mb,
        processes_peak=resources.processes_peak,
    )
    if resources.shm_peak_mb is not None:
        metrics["shm_peak_mb"] = resources.shm_peak_mb
    info.update(
        device=str(device),
        data_source=getattr(dataset, "data_source", "user"),
        dataset_length=dataset_length,
        batches_per_epoch=batches_per_epoch,
        delivery_ok=delivery.ok,
        delivery_problems=delivery.problems,
        delivery_epochs_checked=len(delivery.epochs),
    )
    if delivery.ok is not None:
        metrics["delivery_ok"] = float(delivery.ok)
    warnings += [f"delivery check failed: {p}" for p in delivery.problems]
    mean_bytes = getattr(dataset, "mean_sample_bytes", None)
    if mean_bytes:
        # Files read per second: the steady sample rate times the mean file size on disk.
        metrics["read_mb_per_s"] = metrics["throughput_samples_per_s"] * mean_bytes / 1e6
    return JobMeasurement(metrics=metrics, info=info, warnings=warnings, batches_csv=batches_table(repeats))
