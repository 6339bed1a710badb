"""Where a sample's time goes: the profiling pass's record, plain data (the model and the report read it
without torch).

Every figure is per sample, in seconds, measured in one process with one torch thread, as a DataLoader
worker runs: ``cpu_s`` is the process's CPU time, ``wall_s`` the clock's (a sleep, a disk read or a lock
shows as wall without CPU).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class Stage:
    name: str  # "read", "decode", "__getitem__", a transform's class name ("RandomCrop"), "collate"
    kind: str  # "fetch" | "transform" | "collate" | "loop" (the DataLoader's own work per sample)
    cpu_s: float  # CPU seconds per sample
    wall_s: float  # wall seconds per sample
    faults: float = 0.0  # minor page faults per sample: fresh memory the kernel handed over (zeroed) in the stage
    # A stage that wrote fresh memory, timed again (harness/heap_range.py): its CPU per sample on a heap that keeps
    # what a batch frees for the next, and on one that hands every large block back; cpu_s is what the pass met
    settled_cpu_s: Optional[float] = None
    fresh_cpu_s: Optional[float] = None

    @property
    def low_cpu_s(self) -> float:
        """The range's low end: the least of the pass's figure and the settled heap's (the pass's alone without)."""
        return min(self.cpu_s, self.cpu_s if self.settled_cpu_s is None else self.settled_cpu_s)

    @property
    def high_cpu_s(self) -> float:
        """The range's high end: the most of the pass's figure and the fresh heap's (the pass's alone without)."""
        return max(self.cpu_s, self.cpu_s if self.fresh_cpu_s is None else self.fresh_cpu_s)


@dataclass
class Lighter:
    """The pipeline with one transform operation left out, measured in loops of its own (not the stage's cost
    subtracted): what the "operation removed" what-if rests on."""

    stage: str  # the operation left out
    single_wall_s: float  # per sample, a DataLoader(num_workers=0) loop without it
    worker_cpu_s: float  # per sample in one worker without it (every thread)
    worker_wall_s: float
    main_cpu_s_per_batch: float
    all_cores_rate: Optional[float] = None  # samples/s with one worker per usable core without it
    spread: float = 0.0  # how far its loop's own halves or thirds were apart (relative): its uncertainty


@dataclass
class StageProfile:
    """A short pass over a few samples, once per sweep for each dataset, transform and batch size."""

    split: str  # how the sample's life was split into stages, said in the report
    stages: list[Stage]
    samples: int  # samples timed stage by stage
    batch_size: int  # collate's (1 with batch_size=None: each item is a batch)
    sample_bytes: float  # one collated sample's tensors
    single_cpu_s: float  # per sample, a DataLoader(num_workers=0) loop over other samples: what the stages add up to
    single_wall_s: float
    worker_cpu_s: float  # per sample in one worker, all in (its stages, collating into shared memory, sending)
    worker_wall_s: float  # per sample in one worker: one worker's rate is its inverse
    main_cpu_s_per_batch: float  # the main process's CPU to receive one batch from a worker
    worker_basis: str  # how the worker's figures were had
    all_cores_rate: Optional[float] = None  # samples/s with one worker per usable core (None: not timed)
    pin_s_per_batch: Optional[float] = None  # pinning one batch; None without an accelerator
    cores: float = 1.0  # usable cores where it ran
    seconds: float = 0.0  # what the pass cost
    notes: list[str] = field(default_factory=list)
    all_cores_rates: list[float] = field(default_factory=list)  # samples/s over each third of the all-cores loop
    worker_cpu_spread: float = 0.0  # the one-worker loop's two halves' CPU per sample apart (relative)
    single_spread: float = 0.0  # the loop without workers: how far its halves' typical batches lie apart
    single_batch: Optional[int] = None  # ... its batch: the run's where a few fit its share of the budget, else smaller
    single_wall_one_thread_s: Optional[float] = None  # ... on one thread, as a rank's process runs (OMP_NUM_THREADS=1)
    lighter: list[Lighter] = field(default_factory=list)  # the costliest operations, each left out and measured
    reference_ms: Optional[float] = None  # the host's pace around the pass: its quicker reading (harness.host_pace)

    @property
    def cpu_s(self) -> float:
        """A sample's CPU, every stage (in one process)."""
        return sum(stage.cpu_s for stage in self.stages)

    @property
    def wall_s(self) -> float:
        return sum(stage.wall_s for stage in self.stages)

    def sample_cost(self, attribute: str, left_out: frozenset = frozenset()) -> float:
        """A sample's fetch and transform (collate apart), with the named stages left out."""
        return sum(getattr(s, attribute) for s in self.stages if s.kind != "collate" and s.name not in left_out)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StageProfile":
        return _typed(cls, data)

    def without(self, stage: str) -> Optional[Lighter]:
        return next((each for each in self.lighter if each.stage == stage), None)


def _typed(cls: type, data: dict[str, Any]) -> Any:
    """A record read back by its declared fields (a list of records as those records); keys a later
    version wrote and this one does not know are left out, fields an older one did not write take
    their defaults."""
    hints = typing.get_type_hints(cls)
    values = {}
    for each in dataclasses.fields(cls):
        if each.name not in data:
            continue
        value, item = data[each.name], typing.get_args(hints[each.name])
        nested = item[0] if typing.get_origin(hints[each.name]) is list and dataclasses.is_dataclass(item[0]) else None
        values[each.name] = [_typed(nested, v) for v in value] if nested else value
    return cls(**values)
