"""The declared parts of a run's record: its status, what limited its step, the host it measured on and the
facts it gathered.  A fact with no field here does not exist; each is written by name only where result.json
and MLflow are written (:meth:`HostFacts.to_dict`, :meth:`RunFacts.to_dict`) and read back by one constructor
(``from_dict``), which drops what it does not declare.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional, TypeVar


class _Named(str, Enum):
    """An enum that is its value wherever it is written: JSON, MLflow, an f-string."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Status(_Named):
    """Where a run ended; MLflow's own run statuses, and PREDICTED for a setting bench.predict did not measure."""

    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    PREDICTED = "PREDICTED"

    @property
    def measured(self) -> bool:
        return self is Status.FINISHED


class Bound(_Named):
    """What sets a step's pace (DS-Analyzer's split): the loader, the copy to the device, or the step itself."""

    LOADER = "loader-bound"
    TRANSFER = "transfer-bound"
    COMPUTE = "compute-bound"
    UNKNOWN = "unknown"
    NO_STEP = "no step (loader ceiling)"

    @property
    def stepped(self) -> bool:
        """A training step ran (the bound names a part of it)."""
        return self in (Bound.LOADER, Bound.TRANSFER, Bound.COMPUTE)


_Facts = TypeVar("_Facts", bound="_Record")


class _Record:
    """A record of facts: a fact is written when a writer stated it, None included (``rank_cores=None``:
    the ranks were not pinned); a field nobody set is left out.  Read back keeping only declared fields."""

    _given: set

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        given = self.__dict__.get("_given")
        if given is not None:
            given.add(name)

    def to_dict(self) -> dict[str, Any]:
        given = self.__dict__.get("_given", set())
        return {f.name: value for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if (value := getattr(self, f.name)) is not None or f.name in given}

    @classmethod
    def from_dict(cls: type[_Facts], data: Optional[dict[str, Any]]) -> _Facts:
        known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in (data or {}).items() if k in known})  # type: ignore[call-arg]

    def update(self, values: "_Record") -> None:
        """Take every fact ``values`` states."""
        for name, value in values.to_dict().items():
            setattr(self, name, value)

    def but(self: _Facts, **changes: Any) -> _Facts:
        """A copy with ``changes`` stated (dataclasses.replace would state every field)."""
        copy = type(self).from_dict(self.to_dict())
        for name, value in changes.items():
            setattr(copy, name, value)
        return copy


def record(cls: type) -> type:
    """``@dataclass`` for a :class:`_Record`: what the constructor is given by name is stated, None included."""
    cls = dataclass(cls)
    init, names = cls.__init__, [f.name for f in dataclasses.fields(cls)]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "_given", None)  # the dataclass's own assignments are not statements
        init(self, *args, **kwargs)
        stated = set(names[: len(args)]) | set(kwargs) | {n for n in names if getattr(self, n) is not None}
        object.__setattr__(self, "_given", stated)

    cls.__init__ = __init__
    return cls


@record
class HostFacts(_Record):
    """The host as the OS and torch see it, and the share of it this job may use."""

    hostname: Optional[str] = None
    cpu_model: Optional[str] = None
    cpu_count: Optional[int] = None  # the machine's logical CPUs
    cpus_usable: Optional[float] = None  # the affinity's CPUs, capped by a cgroup CPU quota
    platform: Optional[str] = None
    python: Optional[str] = None
    gil_enabled: Optional[bool] = None  # free-threaded builds (3.13t+) run the thread backends in parallel
    memory_gb: Optional[float] = None  # the machine's, capped by a cgroup memory limit
    shm_gb: Optional[float] = None
    cpu_quota_cores: Optional[float] = None  # a cgroup's CPU quota in cores (cpu.max, cfs_quota_us); None: none
    memory_limit_gb: Optional[float] = None  # a cgroup's memory limit (memory.max, limit_in_bytes); None: none
    torch: Optional[str] = None  # what torch sees: read where torch is loaded (execute.host)
    cuda_available: Optional[bool] = None
    cuda_version: Optional[str] = None
    gpu: Optional[str] = None
    gpu_count: Optional[int] = None

    @property
    def kind(self) -> str:
        """What makes two hosts comparable: CPU model and count, the share of them the job may use (an affinity or
        a CPU quota: a 2-CPU machine inside ``--cpus=1`` is a 1-core one), and the GPU (hostnames differ anyway)."""
        text = f"{self.cpu_model or '?'}, {self.cpu_count if self.cpu_count is not None else '?'} CPUs"
        if self.cpus_usable is not None and self.cpu_count is not None and self.cpus_usable < self.cpu_count:
            text += f" ({self.cpus_usable:g} usable)"
        return text + (f", {self.gpu}" if self.gpu else "")


def _bound(value: Any) -> Any:
    try:
        return Bound(value) if value is not None else None
    except ValueError:
        return value  # another tool's word: kept as written, never taken for one of ours


@record
class RunFacts(_Record):
    """What a run found besides its metrics: how it was measured, the data, the ranks, the ceiling, the host
    lock, and what went wrong.  Written as ``info`` in result.json and ``info.<name>`` tags in MLflow."""

    # How the measurement went (result.figures)
    h2d: Optional[str] = None  # "measured with CUDA events", or why not
    bound: Optional[Bound] = None
    noisy: Optional[bool] = None
    repeats_stopped: Optional[str] = None
    warmup_batches: Optional[int] = None
    round_size: Optional[int] = None
    repeat_rates: Optional[list] = None  # each window's samples/s
    backend: Optional[str] = None
    worker_start_method: Optional[str] = None
    datamodule_baseline: Optional[dict] = None  # a LightningDataModule's own loader settings
    gpu_metrics: Optional[str] = None
    memory_basis: Optional[str] = None
    cache: Optional[str] = None
    cache_stays_warm: Optional[bool] = None
    device: Optional[str] = None
    data_source: Optional[str] = None
    dataset_length: Optional[int] = None
    batches_per_epoch: Optional[int] = None
    delivery_ok: Optional[bool] = None
    delivery_problems: Optional[list] = None
    delivery_epochs_checked: Optional[int] = None
    # Several ranks on the node
    ranks: Optional[int] = None
    rank_start_method: Optional[str] = None
    rank_cores: Optional[list] = None
    rank_threads: Optional[int] = None  # torch's intra-op threads in a rank's own process (torchrun's OMP_NUM_THREADS)
    rank_devices: Optional[list] = None
    delivery_across_ranks: Optional[str] = None
    dist_padding_samples: Optional[int] = None
    # Against the ceiling model (result.ceiling)
    ceiling: Optional[str] = None
    ceiling_binding: Optional[str] = None
    ceiling_lift: Optional[str] = None
    model_failure: Optional[str] = None  # the run went faster than the model's bound allows: why the model is off
    predicted: Optional[str] = None  # bench.predict took the model's figure: how
    # The host held for the measurement (execute.host_lock)
    host_lock: Optional[str] = None
    measured_from: Optional[float] = None
    measured_until: Optional[float] = None
    waited_for_host_s: Optional[float] = None
    # The runner's own
    runner_rss_mb: Optional[float] = None
    config_sources: Optional[list] = None
    config_dirty: Optional[bool] = None
    not_applied: Optional[list] = None
    loader_changed: Optional[list] = None  # the loader knobs set away from the schema's defaults (the export's)
    not_written: Optional[list] = None
    traceback: Optional[str] = None
    fault: Optional[str] = None
    remedy: Optional[str] = None
    # A report's merge of runs that differ only in settings inert on their host (report.configurations)
    repeats_of_one_configuration: Optional[int] = None
    configuration_rates: Optional[list] = None
    configuration_cpu_spread: Optional[float] = None  # how far their CPU per sample read apart (max / min - 1)

    def __post_init__(self) -> None:
        self.bound = _bound(self.bound)

    @property
    def stepped(self) -> bool:
        return isinstance(self.bound, Bound) and self.bound.stepped


__all__ = ["Bound", "HostFacts", "RunFacts", "Status"]
