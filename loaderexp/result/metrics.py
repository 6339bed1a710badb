"""Every metric a run records, declared once: its name, its unit, and how a node's ranks combine it.

A :class:`Metric` is its name (a ``str``, so ``result.metrics[THROUGHPUT]`` reads the recorded value)
with its unit and its rule for several ranks: their sum (rates, what their processes hold), the
slowest rank's (times, spreads, flags: the largest value), the worst rank's (how much was pinned,
delivered, copied: the smallest value), or a figure of the node made from the ranks at once.
``per_rank`` ones are also kept per rank (``rank1.pss_peak_mb``).  A metric that is not declared
here cannot be combined: :func:`declared` raises, so a new figure says how it adds up.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional


class Combine(Enum):
    SUM = "sum"  # the node's total
    SLOWEST = "slowest"  # the largest rank's
    WORST = "worst"  # the smallest rank's
    NODE = "node"  # made once from all the ranks (only with ranks)
    NONE = "none"  # not a rank's figure (a sweep's)


class Metric(str):
    """A metric's name, with its unit, its rule across ranks and what it says."""

    unit: str
    combine: Combine
    per_rank: bool
    doc: str

    def __new__(cls, name: str, unit: str, combine: Combine, doc: str, per_rank: bool = False) -> "Metric":
        metric = super().__new__(cls, name)
        metric.unit, metric.combine, metric.per_rank, metric.doc = unit, combine, per_rank, doc
        return metric

    def __reduce__(self):  # pickled (and written) as its name
        return (str, (str(self),))

    def of_rank(self, rank: int) -> str:
        return f"rank{rank}.{self}"


CATALOGUE: dict[str, Metric] = {}


def metric(name: str, unit: str, combine: Combine, doc: str, per_rank: bool = False) -> Metric:
    declared_metric = Metric(name, unit, combine, doc, per_rank)
    CATALOGUE[name] = declared_metric
    return declared_metric


def declared(name: str) -> Metric:
    found = CATALOGUE.get(name)
    if found is None:
        raise KeyError(f"metric {name!r} is not declared in loaderexp/result/metrics.py: say how ranks combine it")
    return found


S, SUM, SLOWEST, WORST, NODE = "s", Combine.SUM, Combine.SLOWEST, Combine.WORST, Combine.NODE

# The rate and its spread.
THROUGHPUT = metric("throughput_samples_per_s", "samples/s", SUM, "median over the windows", per_rank=True)
THROUGHPUT_IQR = metric("throughput_iqr_rel", "ratio", SLOWEST, "IQR/median of the windows' rates")
MEGABYTES = metric("throughput_mb_per_s", "MB/s", SUM, "collated batch bytes per second, median")
READ_RATE = metric("read_mb_per_s", "MB/s", SUM, "file bytes read per second (file-backed datasets)")
FIRST_REPEAT = metric("throughput_first_repeat_samples_per_s", "samples/s", SUM, "the first window's rate")
LATER_REPEATS = metric("throughput_later_repeats_samples_per_s", "samples/s", SUM, "median of the later windows")
NOISY = metric("noisy", "flag", SLOWEST, "1: IQR/median above bench.noise_threshold")
PRUNED = metric("pruned", "flag", SLOWEST, "1: stopped after its first window, below bench.stop_below")
# Start-up, waits and epochs.
FIRST_BATCH = metric("time_to_first_batch_s", S, SLOWEST, "iterator creation to the first batch", per_rank=True)
FIRST_BATCH_LATER = metric("time_to_first_batch_later_epochs_s", S, SLOWEST, "median over the later epochs")
WAIT_MEAN = metric("wait_mean_ms", "ms", SLOWEST, "a batch's wait for data, mean")
WAIT_P50 = metric("wait_p50_ms", "ms", SLOWEST, "a batch's wait for data, median")
WAIT_P95 = metric("wait_p95_ms", "ms", SLOWEST, "a batch's wait for data, 95th percentile", per_rank=True)
EPOCH = metric("epoch_time_s", S, SLOWEST, "a whole epoch, measured (budget=epochs)")
EPOCH_ESTIMATE = metric("epoch_time_est_s", S, SLOWEST, "start-up plus an epoch at the steady rate")
# How much was measured.
BATCHES = metric("measured_batches", "batches", SUM, "in the windows")
ROUNDS = metric("measured_rounds", "rounds", SLOWEST, "whole rounds of the workers in the windows")
SAMPLES = metric("measured_samples", "samples", SUM, "in the windows")
SECONDS = metric("measured_seconds", S, SLOWEST, "the windows' wall time")
WARMUP = metric("warmup_seconds", S, SLOWEST, "start-up and warm-up batches before the windows")
REPEATS = metric("repeats", "windows", SLOWEST, "windows measured")
# A cold page cache (bench.cache=cold|both).
COLD = metric("throughput_cold_samples_per_s", "samples/s", SUM, "the first epoch with the files evicted, timed whole",
              per_rank=True)
COLD_EPOCH = metric("epoch_time_cold_s", S, SLOWEST, "that epoch's wall time, its start-up included")
COLD_READ = metric("read_mb_per_s_cold", "MB/s", SUM, "the files' bytes the loader read per second in it")
STORAGE_READ = metric("storage_read_mb_per_s", "MB/s", WORST, "the files read one after the other, cold")
FILE_MB = metric("dataset_file_mb", "MB", SLOWEST, "the dataset's files on storage")
RESIDENT = metric("cache_resident_after_evict", "ratio", SLOWEST, "the files' share still cached after eviction")
AVAILABLE = metric("memory_available_mb", "MB", WORST, "MemAvailable when the run started")
# The device copy and the step.
PINNED = metric("pinned_fraction", "ratio", WORST, "batches that arrived in pinned memory")
H2D_MEASURED = metric("h2d_measured", "flag", WORST, "1: the copy was timed with CUDA events")
H2D_MS = metric("h2d_ms_per_batch", "ms", SLOWEST, "host-to-device copy per batch")
H2D_GBPS = metric("h2d_gbps", "GB/s", WORST, "host-to-device bandwidth")
STALL = metric("stall_fraction", "ratio", SLOWEST, "with a step: the share of the time spent waiting for data")
STEP_MS = metric("step_ms_mean", "ms", SLOWEST, "with a step: its time per batch")
STEP_CPU_MS = metric("step_cpu_ms_mean", "ms", SLOWEST, "with a step: the main process's CPU per step, all its "
                     "threads (a step on the CPU takes it from the cores that load)")
# Resources of the process tree.
CPU_MEAN = metric("cpu_percent_mean", "%", SUM, "CPU of the tree, 100 = one core", per_rank=True)
CPU_PEAK = metric("cpu_percent_peak", "%", SUM, "CPU of the tree, highest sample")
CPU_PER_SAMPLE = metric("cpu_ms_per_sample", "ms", SLOWEST,
                        "the tree's CPU per sample delivered in the measured windows (the ceiling's least cost)")
PSS = metric("pss_peak_mb", "MB", SUM, "what a training script and its workers would hold: peak over an epoch",
             per_rank=True)
PSS_FORECAST = metric("pss_forecast_mb", "MB", Combine.NONE,
                      "a predicted setting's PSS, forecast from the measured runs' per-worker growth")
PSS_MEASURED = metric("pss_measured_peak_mb", "MB", SUM, "the same, the highest reading the run took")
WORKER_MEMORY = metric("memory_per_worker_mb", "MB", SLOWEST, "a worker's PSS at the epoch's end")
MEMORY_GROWTH = metric("memory_growth_mb_per_1k_samples", "MB", SLOWEST,
                       "what the tree grows by per 1,000 samples its workers read (copies of the dataset)")
DATASET_PICKLE = metric("dataset_pickle_mb", "MB", SLOWEST, "what each worker started with spawn/forkserver unpickles")
DATASET_MEMORY = metric("dataset_memory_mb", "MB", SUM, "what building the dataset added to its process")
USS = metric("uss_peak_mb", "MB", SUM, "USS of the tree, peak")
PROCESSES = metric("processes_peak", "processes", SUM, "the tree's processes, peak")
# The rest of the host meanwhile (harness.host_load): a rank counts the node's ranks as its own.
OTHERS_CPU = metric("others_cpu_cores_mean", "cores", SLOWEST, "CPU other processes used on the host, mean")
OTHERS_CPU_MAX = metric("others_cpu_cores_max", "cores", SLOWEST, "CPU other processes used, highest interval")
STEAL = metric("steal_cores_mean", "cores", SLOWEST, "the hypervisor's steal, mean")
THROTTLED = metric("cpu_throttled_s", S, SLOWEST, "time the cgroup's CPU quota held the run back")
# The host's pace (harness.host_pace): what its own counters cannot see.  Not a rank's: the ranks load at once.
PACE_BEFORE = metric("reference_cpu_ms_before", "ms", Combine.NONE,
                     "a fixed piece of CPU work, its thread's CPU time before the loader started")
PACE_AFTER = metric("reference_cpu_ms_after", "ms", Combine.NONE,
                    "the same after the run's workers ended: hidden sharing (a neighbour below the VM, steal the "
                    "guest is not told of, a moving clock) makes it slower")
SHM = metric("shm_peak_mb", "MB", SLOWEST, "/dev/shm in use beyond the start, peak (the node's)")
GPU_UTIL = metric("gpu_util_percent_mean", "%", SLOWEST, "NVML utilisation of the run's GPU")
GPU_MEMORY = metric("gpu_memory_used_peak_mb", "MB", SLOWEST, "NVML memory in use on the run's GPU, peak")
CUDA_ALLOCATED = metric("cuda_allocated_peak_mb", "MB", SLOWEST, "torch's caching allocator, peak")
DELIVERY = metric("delivery_ok", "flag", WORST, "1: every promised sample arrived exactly once")
# The ceiling model (loaderexp.model), from the sweep's stage profile.
CEILING = metric("ceiling_samples_per_s", "samples/s", Combine.NONE,
                 "this machine's ceiling for the pipeline, at most: its binding limit with the costs' uncertainty")
CEILING_LOW = metric("ceiling_low_samples_per_s", "samples/s", Combine.NONE,
                     "the ceiling, at least: the best rate seen for the pipeline (the profile's loops, this run)")
CEILING_FRACTION = metric("ceiling_fraction", "ratio", Combine.NONE, "throughput / the ceiling (at most 1)")
PREDICTED = metric("predicted_samples_per_s", "samples/s", Combine.NONE, "the model's throughput at this setting")
MODEL_ERROR = metric("model_error_rel", "ratio", Combine.NONE, "predicted / measured - 1")
MODEL_REFIT = metric("model_refit_all_cores_samples_per_s", "samples/s", Combine.NONE,
                     "bench.predict: what the runs at or past the cores did together, the model refitted on it")
MODEL_SCALE = metric("model_refit_scale", "ratio", Combine.NONE,
                     "bench.predict: the runs' rates over the profile's model at every setting, the model scaled by it")
MODEL_WORKERS_SCALE = metric("model_refit_workers_scale", "ratio", Combine.NONE,
                             "bench.predict: the runs' rates over the profile's model at every setting with workers, "
                             "the model scaled by it there")
# A node's ranks together.
SLOWEST_RANK = metric("throughput_slowest_rank_samples_per_s", "samples/s", NODE, "the slowest rank's rate")
SYNCHRONOUS = metric("throughput_synchronous_samples_per_s", "samples/s", NODE,
                     "ranks x the slowest rank's rate: what a step that waits for every rank gets")
RANK_SPREAD = metric("rank_spread_rel", "ratio", NODE, "(fastest - slowest) / median of the ranks' rates")
RANK_COUNT = metric("ranks", "ranks", NODE, "ranks that loaded at once")
# A sweep's parent run.
STAGE_CPU = metric("stage_cpu_ms_per_sample", "ms", Combine.NONE, "a stage's CPU per sample (stage_cpu_ms_per_sample.<stage>)")
STAGE_CPU_SETTLED = metric("stage_cpu_settled_ms_per_sample", "ms", Combine.NONE,
                           "a stage that wrote fresh memory: its CPU per sample on a heap that keeps a batch's memory "
                           "for the next (.<stage>; stage_cpu_ms_per_sample is what the pass met)")
STAGE_CPU_FRESH = metric("stage_cpu_fresh_ms_per_sample", "ms", Combine.NONE,
                         "a stage that wrote fresh memory: its CPU per sample where every large block comes fresh from "
                         "the kernel (.<stage>)")
STAGE_SHARE = metric("stage_cpu_share", "ratio", Combine.NONE, "a stage's share of a sample's CPU (.<stage>)")
JOBS_RECORDED = metric("jobs_recorded", "jobs", Combine.NONE, "results in the sweep folder at its end")
SWEEP_SECONDS = metric("sweep_seconds", S, Combine.NONE, "the sweep's wall time")


def combine(values: list[float], rule: Combine) -> Optional[float]:
    """The ranks' values of one metric as the node's."""
    if rule is Combine.SUM:
        return sum(values)
    if rule is Combine.SLOWEST:
        return max(values)
    if rule is Combine.WORST:
        return min(values)
    return None
