"""One job's measurement, from a plain config to metrics: dataset -> sampler -> loader -> loop.

Takes plain values only (no DictConfig, no Hydra app, no MLflow): the runner calls it, and so
can a script or a test.
"""

from __future__ import annotations

import csv
import io
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np
import torch
from torch.utils.data import IterableDataset

from loaderexp.data.build import build_dataset, build_loader, build_sampler, build_transform
from loaderexp.delivery import DeliveryTracker, RecordingBatchSampler, instrumented
from loaderexp.measure import BudgetSpec, RepeatTiming, classify, percentile, run_repeat, spread
from loaderexp.resources import ResourceMonitor
from loaderexp.steps import Consumer, make_step
from loaderexp.transfer import HostToDevice, TransferStats


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


def budget_from(bench: Mapping[str, Any]) -> BudgetSpec:
    return BudgetSpec(
        mode=bench["budget"],
        warmup_batches=bench["warmup_batches"],
        batches=bench["batches"],
        epochs=bench["epochs"],
        seconds=bench["seconds"],
        max_seconds=bench["max_run_seconds"],
    )


def planned_batches(bench: Mapping[str, Any], batches_per_epoch: Optional[int]) -> Optional[int]:
    """Measured batches the whole job will take, when known up front (for progress bars)."""
    if bench["budget"] == "batches":
        return bench["batches"] * bench["repeats"]
    if bench["budget"] == "epochs" and batches_per_epoch:
        per_repeat = max(batches_per_epoch * bench["epochs"] - bench["warmup_batches"], 0)
        return per_repeat * bench["repeats"]
    return None


def measured_loader(
    dataset: Any, sampler_cfg: Mapping[str, Any], loader_cfg: Mapping[str, Any]
) -> tuple[torch.utils.data.DataLoader, Optional[RecordingBatchSampler]]:
    """The configured DataLoader as loaderexp measures it: for a map-style dataset, the sampler's
    indices recorded and, with workers, each batch tagged with its indices (the delivery check)."""
    if isinstance(dataset, IterableDataset):
        return build_loader(dataset, None, loader_cfg), None
    sampler = build_sampler(sampler_cfg, dataset)
    sampler = sampler if sampler is not None else torch.utils.data.SequentialSampler(dataset)
    recorder = RecordingBatchSampler(sampler, loader_cfg["batch_size"], loader_cfg["drop_last"])
    dataset, extra = instrumented(dataset, recorder, loader_cfg["num_workers"])
    loader = build_loader(dataset, None, loader_cfg, **extra)
    return loader, recorder


def measure_job(
    cfg: Mapping[str, Any],
    on_batch: Optional[Callable[[int, Optional[int]], None]] = None,
    dataset: Optional[Any] = None,
) -> JobMeasurement:
    """Build the configured loader and measure it ``bench.repeats`` times.

    ``dataset`` replaces the configured one (the benchmark measures both loops on one instance).
    """
    loader_cfg, bench = cfg["loader"], cfg["bench"]
    seed_everything(bench["seed"])
    device = resolve_device(cfg["device"]["type"])
    if dataset is None:
        dataset = build_dataset(cfg["dataset"], build_transform(cfg["transform"]))
    iterable = isinstance(dataset, IterableDataset)
    warnings: list[str] = []
    if iterable and cfg["sampler"].get("name") not in (None, "sequential"):
        warnings.append(f"sampler={cfg['sampler'].get('name')} ignored: an IterableDataset orders its own samples")
    loader, recorder = measured_loader(dataset, cfg["sampler"], loader_cfg)
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
    )
    warnings += shm_preflight(dataset, iterable, loader_cfg)
    to_device = HostToDevice(device, cfg["device"]["non_blocking"])
    step_cfg = cfg["step"]
    step = make_step(step_cfg["kind"], step_cfg["ms"], step_cfg["size"], step_cfg["repeat"], device)
    consumer = Consumer(to_device, step)
    # Nothing to copy, pin-check or compute: leave the per-batch hook out of the hot loop.
    idle = step is None and device.type == "cpu" and not torch.cuda.is_available()
    budget = budget_from(bench)
    total = planned_batches(bench, batches_per_epoch)
    repeats: list[RepeatTiming] = []
    done_before = 0

    def progress(done_in_repeat: int) -> None:
        on_batch(done_before + done_in_repeat, total)  # type: ignore[misc]

    with ResourceMonitor(bench["resource_interval_s"]) as monitor:
        for _ in range(bench["repeats"]):
            repeats.append(run_repeat(loader, budget, delivery, None if idle else consumer, time.perf_counter,
                                      progress if on_batch is not None else None))
            done_before += repeats[-1].batches
    resources = monitor.stats()  # stopped, with a last sample, on leaving the block
    del loader  # persistent workers end here, not at interpreter exit

    transfer = to_device.stats()
    metrics, info = summarize(repeats, consumer, transfer, bench, batches_per_epoch, step_cfg["kind"] != "none")
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


class SharedMemoryTooSmall(RuntimeError):
    """The batches in flight would not fit in /dev/shm: refuse before any worker starts."""


def shm_needed(sample_bytes: int, batch_size: int, num_workers: int, prefetch_factor: Optional[int]) -> int:
    """Bytes of batches in flight between workers and the main process (each a shared-memory segment)."""
    if num_workers == 0:
        return 0
    return num_workers * (prefetch_factor or 2) * batch_size * sample_bytes


def shm_verdict(needed: int, free: Optional[int]) -> Optional[str]:
    """None when it fits comfortably, a warning when it is tight; raises when it cannot fit."""
    if free is None or needed == 0:
        return None
    text = (f"about {needed / 2**20:,.0f} MiB of batches in flight (num_workers x prefetch_factor x batch) "
            f"against {free / 2**20:,.0f} MiB free in /dev/shm")
    if needed > free:
        raise SharedMemoryTooSmall(
            f"{text}: workers would die with a bus error; lower loader.num_workers, loader.prefetch_factor or "
            "loader.batch_size, or enlarge /dev/shm (docker run --shm-size=...)"
        )
    return f"{text}: tight, other processes share it" if needed > free / 2 else None


def shm_preflight(dataset: Any, iterable: bool, loader_cfg: Mapping[str, Any]) -> list[str]:
    """Check, from one sample's size, that the batches in flight fit in /dev/shm."""
    if loader_cfg["num_workers"] == 0:
        return []
    from loaderexp.resources import shm_free_bytes
    from loaderexp.transfer import batch_size_and_bytes

    sample = next(iter(dataset)) if iterable else dataset[0]
    sample_bytes = batch_size_and_bytes(sample)[1]
    needed = shm_needed(sample_bytes, loader_cfg["batch_size"], loader_cfg["num_workers"], loader_cfg["prefetch_factor"])
    verdict = shm_verdict(needed, shm_free_bytes())
    return [verdict] if verdict else []


def summarize(
    repeats: list[RepeatTiming],
    consumer: Consumer,
    transfer: TransferStats,
    bench: Mapping[str, Any],
    batches_per_epoch: Optional[int],
    has_step: bool,
) -> tuple[dict[str, float], dict[str, Any]]:
    """Steady-state figures across repeats: medians, spread and percentiles."""
    throughput = spread([r.samples_per_s for r in repeats])
    megabytes = spread([r.bytes / r.window_s / 1e6 if r.window_s > 0 else 0.0 for r in repeats])
    startups = [s for r in repeats for s in r.startup_s]
    waits = [w for r in repeats for w in r.wait_s]
    window = sum(r.window_s for r in repeats)
    wait_total = sum(waits)
    metrics: dict[str, float] = {
        "throughput_samples_per_s": throughput.median,
        "throughput_iqr_rel": throughput.relative,
        "throughput_mb_per_s": megabytes.median,
        # The first iterator always starts its workers; later ones reuse them if persistent.
        "time_to_first_batch_s": startups[0] if startups else float("nan"),
        "wait_mean_ms": 1000 * wait_total / len(waits) if waits else float("nan"),
        "wait_p50_ms": 1000 * percentile(waits, 50),
        "wait_p95_ms": 1000 * percentile(waits, 95),
        "measured_batches": float(len(waits)),
        "measured_samples": float(sum(r.samples for r in repeats)),
        "measured_seconds": window,
        "warmup_seconds": sum(r.warmup_s for r in repeats),
        "repeats": float(len(repeats)),
        "noisy": float(throughput.noisy(bench["noise_threshold"])),
    }
    epochs = [e for r in repeats for e in r.epoch_s]
    if epochs:
        metrics["epoch_time_s"] = float(np.median(epochs))
    elif batches_per_epoch and throughput.median > 0:
        # Batches mode: start-up plus a full epoch at the measured steady-state rate.
        batches_per_s = len(waits) / window
        metrics["epoch_time_est_s"] = metrics["time_to_first_batch_s"] + batches_per_epoch / batches_per_s
    if len(repeats) > 1:
        # The first repeat may read from a cold page cache; later ones from a warm one.
        metrics["throughput_first_repeat_samples_per_s"] = repeats[0].samples_per_s
        metrics["throughput_later_repeats_samples_per_s"] = float(np.median([r.samples_per_s for r in repeats[1:]]))
    if len(startups) > 1:
        metrics["time_to_first_batch_later_epochs_s"] = float(np.median(startups[1:]))
    metrics["pinned_fraction"] = transfer.pinned_fraction
    metrics["h2d_measured"] = float(transfer.measured)
    if transfer.measured:
        metrics["h2d_ms_per_batch"] = transfer.ms_per_batch or 0.0
        metrics["h2d_gbps"] = transfer.gbps or 0.0
    info: dict[str, Any] = {"h2d": "measured with CUDA events" if transfer.measured else transfer.reason}
    copy_s = transfer.total_ms / 1000 if transfer.measured else consumer.copy_s
    if has_step:
        # Without a step the loop only waits for data: a stall fraction would be 100% by definition.
        metrics["stall_fraction"] = wait_total / window if window > 0 else float("nan")
        info["bound"] = classify(wait_total, copy_s, consumer.step_s)
        metrics["step_ms_mean"] = 1000 * consumer.step_s / len(waits) if waits else float("nan")
    else:
        info["bound"] = "no step (loader ceiling)"
    info["noisy"] = bool(metrics["noisy"])
    return metrics, info


def batches_table(repeats: list[RepeatTiming]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["repeat", "batch", "wait_ms", "busy_ms"])
    for r, timing in enumerate(repeats):
        for b, (wait, busy) in enumerate(zip(timing.wait_s, timing.busy_s)):
            writer.writerow([r, b, f"{wait * 1000:.4f}", f"{busy * 1000:.4f}"])
    return out.getvalue()
