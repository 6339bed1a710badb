"""What a measurement is made of: typed records, kept raw, with what follows from them as properties.

Like torch.utils.benchmark's ``Measurement``, a run keeps its windows' raw timings and derives the median and
spread from them; the device copy, the step, the process tree's resources and the delivery check each leave a
record of their own.  Pure Python (no torch, no numpy): the app, which never imports torch, unpickles these from
the measuring process and names them as metrics (:mod:`loaderexp.result.figures`), and nothing else does.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Optional

from loaderexp.harness.host_load import HostLoadRecord
from loaderexp.harness.host_pace import PaceRecord
from loaderexp.harness.memory import MemoryRecord, MemorySample
from loaderexp.harness.stages import StageProfile


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile with linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


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
    return Spread(statistics.median(values), percentile(values, 75) - percentile(values, 25), list(values))


class Budget(str, Enum):
    """What one repeat of the measured loop is (``bench.budget``)."""

    batches = "batches"  # warm-up, then a fixed number of batches
    epochs = "epochs"  # whole epochs (epoch time is exact, sweeps are slower)
    seconds = "seconds"  # warm-up, then batches until the time is spent


@dataclass(frozen=True)
class BudgetSpec:
    mode: Budget
    warmup_batches: int = 5
    batches: int = 100
    epochs: int = 1
    seconds: float = 5.0
    max_seconds: float = 900.0  # wall-clock limit of one repeat (one window, its warm-up included)
    round_size: int = 1  # batches per round (one per worker): windows hold whole rounds
    min_seconds: float = 0.0  # budget=batches: a window lasts at least this long (more rounds if need be)
    depth: int = 0  # batches the pipeline holds in flight (num_workers x prefetch_factor): what a pause banks

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Budget(self.mode))  # "epochs" from a caller is the enum from here on


@dataclass
class RepeatTiming:
    """One measured window: what each batch waited and took, and what the window delivered."""

    startup_s: list[float] = field(default_factory=list)  # iterator creation -> first batch, per epoch
    epoch_s: list[float] = field(default_factory=list)  # wall time of each complete epoch
    wait_s: list[float] = field(default_factory=list)  # end of the previous batch's work -> arrival
    busy_s: list[float] = field(default_factory=list)  # copy + step per measured batch
    samples: int = 0
    sample_bytes: float = 0.0  # of one sample, from the first measured batch
    window_s: float = 0.0  # end of warm-up -> last measured batch processed
    warmup_s: float = 0.0  # repeat start -> end of warm-up (start-up and warm-up batches)
    warmup_batches: int = 0  # batches left out before this window's stream opened its first window
    round_size: int = 1

    @property
    def rounds(self) -> float:
        return self.batches / self.round_size

    @property
    def batches(self) -> int:
        return len(self.wait_s)

    @property
    def bytes(self) -> int:
        return round(self.samples * self.sample_bytes)

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.window_s if self.window_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.window_s / 1e6 if self.window_s > 0 else 0.0


@dataclass
class TransferStats:
    """The host-to-device copies of the measured batches (CUDA events), or why they were not timed."""

    measured: bool
    reason: str  # why not measured ("" when measured)
    batches: int = 0
    pinned_batches: int = 0
    bytes: int = 0
    total_ms: float = 0.0

    @property
    def pinned_fraction(self) -> float:
        return self.pinned_batches / self.batches if self.batches else 0.0

    @property
    def ms_per_batch(self) -> Optional[float]:
        return self.total_ms / self.batches if self.measured and self.batches else None

    @property
    def gbps(self) -> Optional[float]:
        if not self.measured or self.total_ms <= 0:
            return None
        return self.bytes / (self.total_ms / 1000.0) / 1e9


@dataclass
class ResourceStats:
    """The process tree (the measuring process and its workers), sampled while it loaded."""

    samples: int
    cpu_percent_mean: float  # summed over the tree: 100 = one core busy
    cpu_percent_peak: float
    pss_peak_mb: float
    uss_peak_mb: float
    processes_peak: int
    shm_peak_mb: Optional[float]  # None where /dev/shm does not exist
    memory: list[MemorySample] = field(default_factory=list)  # each memory reading, in order
    gpu_util_percent_mean: Optional[float] = None  # None without a GPU or without NVML
    gpu_memory_used_peak_mb: Optional[float] = None
    gpu_note: str = ""  # why the GPU was not sampled, when it exists
    host_load: HostLoadRecord = field(default_factory=HostLoadRecord)
    cpu_s_per_sample: Optional[float] = None  # the tree's CPU a sample delivered in the measured windows


@dataclass
class StepTimes:
    """What the consumer spent on the measured batches besides waiting for them."""

    has_step: bool  # a training step ran (else the loop only loaded, and copied)
    copy_s: float  # host time of the copies
    step_s: float  # host time of the steps (on CUDA it holds the wait for the copy too)
    device_step_s: Optional[float] = None  # CUDA: the steps' own device time, without the copies
    step_cpu_s: float = 0.0  # the main process's CPU while its steps ran, all its threads (torch's intra-op too)


@dataclass
class DeliveryRecord:
    """Did every sample the sampler promised arrive exactly once?"""

    ok: Optional[bool]  # None: nothing could be checked
    problems: list[str]
    epochs_checked: int


@dataclass
class LoaderFacts:
    """What was loaded, how, and where to."""

    backend: str
    device: str
    data_source: str  # "generated", "real" or "user"
    dataset_length: Optional[int]
    batches_per_epoch: Optional[int]
    worker_start_method: Optional[str] = None  # worker processes only
    mean_sample_bytes: Optional[float] = None  # file-backed datasets: bytes read per sample
    cuda_allocated_peak_mb: Optional[float] = None
    dataset_pickle_mb: Optional[float] = None  # workers started with spawn or forkserver unpickle this each
    datamodule_baseline: Optional[dict] = None  # dataset=lightning: the DataModule's own DataLoader knobs


@dataclass
class ColdRecord:
    """The first epoch with the dataset's files evicted from the page cache, or why there is none."""

    measured: bool
    note: str  # how it was measured, or why it was not
    files: int = 0
    file_bytes: int = 0
    resident_after_evict: Optional[float] = None  # the files' share still cached after the eviction (mincore)
    storage_mb_per_s: Optional[float] = None  # the files read one after the other, cold (the storage's rate)
    epoch: Optional[RepeatTiming] = None  # the cold epoch, timed whole (its start-up included)
    available_mb: Optional[float] = None  # MemAvailable when the run started

    @property
    def epoch_s(self) -> Optional[float]:
        return self.epoch.epoch_s[0] if self.epoch is not None and self.epoch.epoch_s else None

    @property
    def samples_per_s(self) -> Optional[float]:
        return self.epoch.samples / self.epoch_s if self.epoch_s else None

    @property
    def read_mb_per_s(self) -> Optional[float]:
        """The files' bytes the loader read per second in the cold epoch (each file once)."""
        return self.file_bytes / self.epoch_s / 1e6 if self.epoch_s else None

    @property
    def stays_warm(self) -> Optional[bool]:
        """Whether the files fit in the memory available (with room to spare): later epochs then read them
        from the page cache; else every epoch reads from storage."""
        if not self.file_bytes or not self.available_mb:
            return None
        return self.file_bytes / 2**20 < 0.8 * self.available_mb


@dataclass
class Measurement:
    """One process's measurement: its windows, why it stopped, and the records of what it touched."""

    windows: list[RepeatTiming]
    stopped: str  # "precise" | "max_repeats" | "fixed" | "pruned"
    budget: BudgetSpec
    noise_threshold: float
    transfer: TransferStats
    step: StepTimes
    resources: ResourceStats
    delivery: DeliveryRecord
    facts: LoaderFacts
    warnings: list[str] = field(default_factory=list)
    memory: Optional[MemoryRecord] = None
    cold: Optional[ColdRecord] = None
    profile: Optional[StageProfile] = None  # the stage costs (this job's pass, or the sweep's earlier one)
    pace: PaceRecord = field(default_factory=PaceRecord)  # a fixed piece of CPU work timed around it (one process)

    @property
    def throughput(self) -> Spread:
        return spread([w.samples_per_s for w in self.windows])

    @property
    def megabytes(self) -> Spread:
        return spread([w.mb_per_s for w in self.windows])

    @property
    def startups(self) -> list[float]:
        return [s for w in self.windows for s in w.startup_s]

    @property
    def waits(self) -> list[float]:
        return [x for w in self.windows for x in w.wait_s]

    @property
    def epochs(self) -> list[float]:
        return [e for w in self.windows for e in w.epoch_s]

    @property
    def window_s(self) -> float:
        return sum(w.window_s for w in self.windows)

    @property
    def noisy(self) -> bool:
        return self.throughput.noisy(self.noise_threshold)

    @property
    def pruned(self) -> bool:
        return self.stopped == "pruned"


@dataclass
class NodeMeasurement:
    """Several ranks of one node measured at once (``dist.nproc_per_node``), in rank order."""

    ranks: list[Measurement]
    start_method: str
    cores: Optional[list[Optional[list[int]]]]  # each rank's cores with dist.cpu_affinity, else None
    share_problems: list[str]  # the ranks' epoch-0 shares against the dataset
    padding: int  # samples DistributedSampler repeats so every rank gets as many
    profile: Optional[StageProfile] = None
    threads: Optional[list[int]] = None  # torch's intra-op threads in each rank's own process


@dataclass
class PairedRates:
    """Settings measured side by side (:mod:`.paired`): each one's samples/s, window by window."""
    rates: list[list[float]]
    window_s: float
    rounds: int
    seconds: float = 0.0  # what comparing them took
    whole_epochs: bool = False  # each window was a whole epoch (an epoch short against a window)
