"""The statistics that turn a job's repeats into its figures: medians, spread, percentiles, the bound.

Pure functions of the recorded timings (no clock, no loader): the fake-clock tests and the
benchmark call them directly.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from loaderexp.measure.loop import RepeatTiming
from loaderexp.measure.steps import Consumer
from loaderexp.measure.transfer import TransferStats


@dataclass
class Spread:
    median: float
    iqr: float
    values: list[float]

    @property
    def relative(self) -> float:
        return self.iqr / self.median if self.median else 0.0

    def noisy(self, threshold: float) -> bool:
        return len(self.values) >= 2 and self.relative > threshold


def spread(values: list[float]) -> Spread:
    if not values:
        return Spread(float("nan"), float("nan"), [])
    low, high = np.percentile(values, [25, 75])
    return Spread(statistics.median(values), float(high - low), list(values))


def classify(wait_s: float, transfer_s: float, compute_s: float, stall_threshold: float = 0.10) -> str:
    """Which part limits a step: the loader (waiting for data), the copy, or the compute.

    A step whose data wait is at least ``stall_threshold`` of its time is loader-bound, as in
    DS-Analyzer's fetch/prep stalls; otherwise the larger of copy and compute bounds it.
    """
    total = wait_s + transfer_s + compute_s
    if total <= 0:
        return "unknown"
    if wait_s / total >= stall_threshold:
        return "loader-bound"
    return "transfer-bound" if transfer_s > compute_s else "compute-bound"


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
        "wait_p50_ms": 1000 * _percentile(waits, 50),
        "wait_p95_ms": 1000 * _percentile(waits, 95),
        "measured_batches": float(len(waits)),
        "measured_rounds": float(sum(r.rounds for r in repeats)),
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
        # On CUDA the step's own device time: its host time also holds the wait for the copy.
        device_step = consumer.device_step_s()
        compute_s = consumer.step_s if device_step is None else device_step
        info["bound"] = classify(wait_total, copy_s, compute_s)
        metrics["step_ms_mean"] = 1000 * compute_s / len(waits) if waits else float("nan")
    else:
        info["bound"] = "no step (loader ceiling)"
    info["noisy"] = bool(metrics["noisy"])
    return metrics, info


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")
