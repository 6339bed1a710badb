"""A typed measurement as a run records it: metrics by their declared names, facts, warnings, batches.csv.

This is the one place a measurement becomes names: everything it derives is in the records
(:mod:`loaderexp.harness.records`), and a node's ranks combine by each metric's declaration
(:mod:`.metrics`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Optional, Union

from loaderexp.harness.batches import batches_table, with_rank
from loaderexp.harness.records import MemoryRecord, Measurement, NodeMeasurement, StepTimes, percentile
from loaderexp.result import metrics as M
from loaderexp.result.facts import Bound, RunFacts

STALL_THRESHOLD = 0.10  # a step waiting for data this share of its time is loader-bound


@dataclass
class Figures:
    metrics: dict[str, float]
    info: RunFacts
    warnings: list[str] = field(default_factory=list)
    batches_csv: str = ""  # per-batch timings, one row per measured batch


def figures(measured: Union[Measurement, NodeMeasurement]) -> Figures:
    """What result.json and MLflow record of a process's or a node's measurement."""
    if isinstance(measured, NodeMeasurement):
        return node_figures(measured)
    metrics = metrics_of(measured)
    warnings = [*measured.warnings, *memory_warnings(measured.memory, metrics), *start_warnings(measured, metrics)]
    return Figures(metrics, info_of(measured), warnings, batches_table(measured.windows))


def classify(wait_s: float, transfer_s: float, compute_s: float, stall_threshold: float = STALL_THRESHOLD) -> Bound:
    """Which part limits a step: the loader (waiting for data), the copy, or the compute.
    A step whose data wait is at least ``stall_threshold`` of its time is loader-bound, as in
    DS-Analyzer's fetch/prep stalls; otherwise the larger of copy and compute bounds it.
    """
    total = wait_s + transfer_s + compute_s
    if total <= 0:
        return Bound.UNKNOWN
    if wait_s / total >= stall_threshold:
        return Bound.LOADER
    return Bound.TRANSFER if transfer_s > compute_s else Bound.COMPUTE


def _compute_s(step: StepTimes) -> float:
    """The step's own time: on CUDA its device time (its host time also holds the wait for the copy)."""
    return step.step_s if step.device_step_s is None else step.device_step_s


def metrics_of(m: Measurement) -> dict[str, float]:
    throughput, waits, window = m.throughput, m.waits, m.window_s
    metrics: dict[str, float] = {
        M.THROUGHPUT: throughput.median,
        M.THROUGHPUT_IQR: throughput.relative,
        M.MEGABYTES: m.megabytes.median,
        # The first iterator always starts its workers; later ones reuse them if persistent.
        M.FIRST_BATCH: m.startups[0] if m.startups else float("nan"),
        M.WAIT_MEAN: 1000 * sum(waits) / len(waits) if waits else float("nan"),
        M.WAIT_P50: 1000 * percentile(waits, 50),
        M.WAIT_P95: 1000 * percentile(waits, 95),
        M.BATCHES: float(len(waits)),
        M.ROUNDS: float(sum(w.rounds for w in m.windows)),
        M.SAMPLES: float(sum(w.samples for w in m.windows)),
        M.SECONDS: window,
        M.WARMUP: sum(w.warmup_s for w in m.windows),
        M.REPEATS: float(len(m.windows)),
        M.NOISY: float(m.noisy),
    }
    metrics.update(_epoch_metrics(m))
    metrics.update(_transfer_metrics(m))
    if m.step.has_step:
        # Without a step the loop only waits for data: a stall fraction would be 100% by definition.
        metrics[M.STALL] = sum(waits) / window if window > 0 else float("nan")
        metrics[M.STEP_MS] = 1000 * _compute_s(m.step) / len(waits) if waits else float("nan")
        metrics[M.STEP_CPU_MS] = 1000 * m.step.step_cpu_s / len(waits) if waits else float("nan")
    if m.pruned:
        metrics[M.PRUNED] = 1.0
    metrics.update(_resource_metrics(m))
    if m.delivery.ok is not None:
        metrics[M.DELIVERY] = float(m.delivery.ok)
    if m.facts.mean_sample_bytes:
        # Files read per second: the steady sample rate times the mean file size on disk.
        metrics[M.READ_RATE] = metrics[M.THROUGHPUT] * m.facts.mean_sample_bytes / 1e6
    metrics.update(_cold_metrics(m))
    if m.facts.dataset_pickle_mb is not None:
        metrics[M.DATASET_PICKLE] = round(m.facts.dataset_pickle_mb, 2)
    return metrics


def _cold_metrics(m: Measurement) -> dict[str, float]:
    cold = m.cold
    if cold is None:
        return {}
    found = {M.AVAILABLE: round(cold.available_mb or 0.0, 1)}
    if cold.file_bytes:
        found[M.FILE_MB] = round(cold.file_bytes / 2**20, 1)
    if not cold.measured:
        return found
    found.update({M.COLD: cold.samples_per_s or 0.0, M.COLD_EPOCH: cold.epoch_s or 0.0,
                  M.COLD_READ: cold.read_mb_per_s or 0.0})
    if cold.storage_mb_per_s is not None:
        found[M.STORAGE_READ] = cold.storage_mb_per_s
    if cold.resident_after_evict is not None:
        found[M.RESIDENT] = cold.resident_after_evict
    return found


def _epoch_metrics(m: Measurement) -> dict[str, float]:
    found: dict[str, float] = {}
    if m.epochs:
        found[M.EPOCH] = float(statistics.median(m.epochs))
    elif m.facts.batches_per_epoch and m.throughput.median > 0:
        # Batches mode: start-up plus a full epoch at the measured steady-state rate.
        batches_per_s = len(m.waits) / m.window_s
        first = m.startups[0] if m.startups else float("nan")
        found[M.EPOCH_ESTIMATE] = first + m.facts.batches_per_epoch / batches_per_s
    if len(m.windows) > 1:
        # The first repeat may read from a cold page cache; later ones from a warm one.
        found[M.FIRST_REPEAT] = m.windows[0].samples_per_s
        found[M.LATER_REPEATS] = float(statistics.median([w.samples_per_s for w in m.windows[1:]]))
    if len(m.startups) > 1:
        found[M.FIRST_BATCH_LATER] = float(statistics.median(m.startups[1:]))
    return found


def _transfer_metrics(m: Measurement) -> dict[str, float]:
    transfer = m.transfer
    found = {M.PINNED: transfer.pinned_fraction, M.H2D_MEASURED: float(transfer.measured)}
    if transfer.measured:
        found[M.H2D_MS] = transfer.ms_per_batch or 0.0
        found[M.H2D_GBPS] = transfer.gbps or 0.0
    return found


def _resource_metrics(m: Measurement) -> dict[str, float]:
    resources = m.resources
    found: dict[str, float] = {}
    if resources.gpu_util_percent_mean is not None:
        found[M.GPU_UTIL] = resources.gpu_util_percent_mean
    if resources.gpu_memory_used_peak_mb is not None:
        found[M.GPU_MEMORY] = resources.gpu_memory_used_peak_mb
    if m.facts.cuda_allocated_peak_mb is not None:
        found[M.CUDA_ALLOCATED] = m.facts.cuda_allocated_peak_mb
    found.update({M.CPU_MEAN: resources.cpu_percent_mean, M.CPU_PEAK: resources.cpu_percent_peak,
                  M.PSS: resources.pss_peak_mb, M.USS: resources.uss_peak_mb, M.PROCESSES: resources.processes_peak})
    if resources.cpu_s_per_sample is not None:
        found[M.CPU_PER_SAMPLE] = round(1000 * resources.cpu_s_per_sample, 5)
    memory = m.memory
    if memory is not None and memory.trace:
        found.update({M.PSS: round(memory.epoch_peak_mb, 1), M.PSS_MEASURED: round(memory.measured_peak_mb, 1),
                      M.MEMORY_GROWTH: round(1000 * memory.growth_mb_per_sample, 2)})
        if memory.per_worker_mb is not None:
            found[M.WORKER_MEMORY] = round(memory.per_worker_mb, 1)
        if memory.dataset_mb is not None:
            found[M.DATASET_MEMORY] = round(memory.dataset_mb, 1)
    if resources.shm_peak_mb is not None:
        found[M.SHM] = resources.shm_peak_mb
    load = resources.host_load
    for name, value in ((M.OTHERS_CPU, load.others_cores_mean), (M.OTHERS_CPU_MAX, load.others_cores_max),
                        (M.STEAL, load.steal_cores_mean), (M.THROTTLED, load.throttled_s),
                        (M.PACE_BEFORE, m.pace.before_ms), (M.PACE_AFTER, m.pace.after_ms)):
        if value is not None:
            found[name] = value
    return found


def bound_of(m: Measurement) -> Bound:
    if not m.step.has_step:
        return Bound.NO_STEP
    copy_s = m.transfer.total_ms / 1000 if m.transfer.measured else m.step.copy_s
    return classify(sum(m.waits), copy_s, _compute_s(m.step))


def info_of(m: Measurement) -> RunFacts:
    facts, memory, cold = m.facts, m.memory, m.cold
    info = RunFacts(
        h2d="measured with CUDA events" if m.transfer.measured else m.transfer.reason,
        bound=bound_of(m),
        noisy=m.noisy,
        repeats_stopped=m.stopped,
        warmup_batches=max((w.warmup_batches for w in m.windows), default=m.budget.warmup_batches),
        round_size=m.budget.round_size,
        repeat_rates=[round(w.samples_per_s, 1) for w in m.windows],
        backend=facts.backend,
        device=facts.device,
        data_source=facts.data_source,
        dataset_length=facts.dataset_length,
        batches_per_epoch=facts.batches_per_epoch,
        delivery_ok=m.delivery.ok,
        delivery_problems=list(m.delivery.problems),
        delivery_epochs_checked=m.delivery.epochs_checked,
    )
    # Stated only where there is something to say.
    if facts.worker_start_method is not None:
        info.worker_start_method = facts.worker_start_method
    if facts.datamodule_baseline is not None:
        info.datamodule_baseline = facts.datamodule_baseline
    if m.resources.gpu_note:
        info.gpu_metrics = m.resources.gpu_note
    if memory is not None and memory.trace:
        info.memory_basis = memory.basis
    if cold is not None:
        info.cache, info.cache_stays_warm = cold.note, cold.stays_warm
    return info


COPYING_MB = 32.0  # a worker that copies more of the dataset than this over an epoch is said to copy it


PICKLE_MB = 32.0  # a dataset that pickles to more than this makes spawned workers slow to start


def start_warnings(m: Measurement, metrics: dict[str, float]) -> list[str]:
    """Workers that each unpickle a big dataset: the classic "one worker takes 11 s to start"."""
    size = m.facts.dataset_pickle_mb
    if size is None or size < PICKLE_MB:
        return []
    return [f"the dataset pickles to {size:,.0f} MB: each worker started with {m.facts.worker_start_method} "
            f"unpickles its own copy (time to first batch {metrics.get(M.FIRST_BATCH, float('nan')):.1f} s, and a "
            "copy in memory per worker); keep large arrays in a file (memory-mapped, or opened in worker_init_fn), "
            "or start workers with fork where that is safe"]


def memory_warnings(memory: Optional[MemoryRecord], metrics: dict[str, float]) -> list[str]:
    """What the memory figures mean for the user: workers that copy the dataset, a node that would run out."""
    if memory is None or not memory.trace:
        return []
    found = []
    copied = memory.growth_per_worker_mb
    if memory.workers and memory.forked and copied > COPYING_MB:
        found.append(f"each worker copies ~{copied:,.0f} MB of the dataset as it reads it "
                     f"({1000 * memory.growth_mb_per_sample:.1f} MB per 1,000 samples read): keep samples in numpy "
                     "arrays, Arrow or a memory-mapped file instead of Python lists/dicts (every read of a Python "
                     "object writes its refcount, and a forked worker then copies the page)")
    found += oom_warnings(metrics.get(M.PSS), memory.available_mb)
    return found


def oom_warnings(total_mb: Optional[float], available_mb: Optional[float]) -> list[str]:
    if not total_mb or not available_mb or total_mb <= 0.9 * available_mb:
        return []
    return [f"this setting holds ~{total_mb:,.0f} MB over an epoch, against {available_mb:,.0f} MB available when "
            "it started: the kernel's OOM killer would end it (or the largest process); use fewer workers or ranks, "
            "or keep the dataset where workers do not copy it"]


def node_figures(node: NodeMeasurement) -> Figures:
    """One run's figures from its ranks': each metric combined as declared, a few of the node's own."""
    per_rank = [metrics_of(m) for m in node.ranks]
    metrics: dict[str, float] = {}
    for key in per_rank[0]:
        combined = M.combine([r[key] for r in per_rank if key in r], M.declared(key).combine)
        if combined is not None:
            metrics[key] = combined
    metrics.update(_node_rates([r[M.THROUGHPUT] for r in per_rank]))
    for rank, result in enumerate(per_rank):
        metrics.update({M.declared(key).of_rank(rank): value for key, value in result.items()
                        if M.declared(key).per_rank})
    info = info_of(node.ranks[0])
    problems = [f"rank {r}: {p}" for r, m in enumerate(node.ranks) for p in m.delivery.problems]
    delivered = all(m.delivery.ok is not False for m in node.ranks) and not node.share_problems
    world, length = len(node.ranks), info.dataset_length
    info.update(RunFacts(
        ranks=world,
        rank_start_method=node.start_method,
        rank_cores=node.cores,
        rank_threads=max(node.threads) if node.threads else None,
        rank_devices=[m.facts.device for m in node.ranks],
        delivery_ok=delivered,
        delivery_problems=problems + list(node.share_problems),
        delivery_across_ranks=(f"the {world} ranks' shares cover the {length} samples"
                               + (f"; DistributedSampler repeats {node.padding} to give every rank as many"
                                  if node.padding else " exactly once")),
        dist_padding_samples=node.padding,
    ))
    metrics[M.DELIVERY] = float(delivered)
    warnings = sorted({w for m in node.ranks for w in [*m.warnings, *memory_warnings(m.memory, {})]})
    available = min((m.memory.available_mb for m in node.ranks if m.memory and m.memory.available_mb), default=None)
    warnings += oom_warnings(metrics.get(M.PSS), available)  # the ranks together, on one node
    warnings += [f"delivery check failed: {p}" for p in node.share_problems]
    csv = "".join(with_rank(batches_table(m.windows), rank, first=rank == 0) for rank, m in enumerate(node.ranks))
    return Figures(metrics=metrics, info=info, warnings=warnings, batches_csv=csv)


def _node_rates(rates: list[float]) -> dict[str, float]:
    slowest = min(rates)
    return {
        M.SLOWEST_RANK: slowest,
        M.SYNCHRONOUS: len(rates) * slowest,
        M.RANK_SPREAD: (max(rates) - slowest) / statistics.median(rates) if slowest > 0 else float("nan"),
        M.RANK_COUNT: float(len(rates)),
    }

