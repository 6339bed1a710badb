"""What a run's processes held as the loader read, and the figure a training script would see over an epoch.

Pure Python, like :mod:`.records` (which a measurement is made of): the app reads it without torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

# An epoch's reads are read on to measure them when what they would add is at least this much.
READ_ON_MB, READ_ON_SHARE = 20.0, 0.02
EVIDENCE_SHARE = 0.05  # readings this far apart in an epoch tell whether the tree grows
CHEAP_SHARE = 0.1  # reading on costs at most this share of the time measured: measure rather than project
# Reading on only until one more reading can show the rest of the epoch flat pays when that point comes well before
# the epoch's end; the reading is taken a margin past the least span that could show it.
READ_ON_PART, READ_ON_MARGIN = 0.7, 1.25
NOISE_MB = 3.0  # a rise this small between readings is the allocator's jitter, not a growth to project


@dataclass
class MemorySample:
    """The process tree's memory at one moment, with how far the loader had read."""

    samples: int  # samples delivered when it was taken
    time: float  # time.monotonic() then
    total_mb: float  # as a training script would hold it: the tree's PSS and its share of what it was forked from
    workers_mb: dict[int, float]  # each worker process's PSS, by pid


@dataclass
class MemoryRecord:
    """What the loader held as it read, and what that means for a whole epoch.

    A worker forked from a process whose dataset is a list of Python objects copies every page it reads
    (each read writes a refcount), so the tree grows with what its workers have read in their epoch: the
    peak of a short measurement is not an epoch's.  Each reading with workers sits at some point of its
    workers' epoch (workers start with each epoch unless persistent); the readings together give the
    tree at that point's start and its growth per sample read, and so at the epoch's end.  A reading taken
    at the very end (the run read on to it) makes the figure measured; otherwise it is projected, and each
    worker's growth is capped at what it could copy at most, the dataset's own memory.
    """

    trace: list[MemorySample] = field(default_factory=list)
    dataset_mb: Optional[float] = None  # what building the dataset added to its process (a worker copies at most this)
    epoch_samples: Optional[int] = None  # samples in an epoch
    drained: bool = False  # the run read on, unmeasured, to its epoch's end for this figure
    available_mb: Optional[float] = None  # MemAvailable when the run started
    persistent: bool = False  # workers live across epochs (their copies add up)
    forked: bool = True  # workers are forked (they share the dataset's pages until they write them)

    @property
    def measured_peak_mb(self) -> float:
        return max((s.total_mb for s in self.trace), default=0.0)

    @property
    def with_workers(self) -> list[MemorySample]:
        return [s for s in self.trace if s.workers_mb]

    @property
    def workers(self) -> int:
        readings = self.with_workers
        return len(readings[-1].workers_mb) if readings else 0

    def position(self, sample: MemorySample, first: MemorySample) -> int:
        """Samples its workers had read when it was taken: from their epoch's start (from their own
        start, when persistent)."""
        if self.persistent or not self.epoch_samples:
            return sample.samples - first.samples
        return sample.samples - self.epoch_samples * (first.samples // self.epoch_samples)

    def points(self) -> list[tuple[int, float]]:
        """(position, tree) for each reading with workers (each reading without, when there are none),
        in the workers' first epoch: what later epochs add is the harness's own bookkeeping, or (with
        persistent workers) more than one epoch's copies."""
        readings = self.with_workers or self.trace
        firsts: dict[frozenset, MemorySample] = {}
        found = []
        for sample in readings:
            first = firsts.setdefault(frozenset(sample.workers_mb), sample)
            if not self.forked and sample.workers_mb and sample.samples == first.samples:
                continue  # its spawned workers had delivered nothing yet: still importing, unpickling
            found.append((self.position(sample, first), sample.total_mb))
        limit = 1.02 * self.epoch_samples if self.epoch_samples else None
        return [(p, t) for p, t in found if limit is None or p <= limit]

    @property
    def epoch_readings_peak_mb(self) -> float:
        return max((t for _, t in self.points()), default=self.measured_peak_mb)

    @property
    def span(self) -> int:
        """Samples between the readings furthest apart in an epoch."""
        positions = [p for p, _ in self.points()]
        return max(positions) - min(positions) if positions else 0

    def fit(self) -> tuple[float, float]:
        """(the tree at its workers' start, MB per sample read): least squares over the readings; no growth
        when they are too close together to tell one, or rise by no more than their jitter."""
        points = self.points()
        if not points:
            return 0.0, 0.0
        xs, ys = [p for p, _ in points], [t for _, t in points]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        spread = sum((x - mean_x) ** 2 for x in xs)
        if spread <= 0 or self.span < 0.02 * (self.epoch_samples or 1):
            return max(ys), 0.0
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
        if slope * self.span < NOISE_MB:
            return max(ys), 0.0
        return mean_y - slope * mean_x, slope

    @property
    def growth_mb_per_sample(self) -> float:
        return self.fit()[1]

    @property
    def whole_epoch(self) -> bool:
        """A reading was taken at (near) the end of an epoch its workers read whole."""
        if not self.epoch_samples:
            return False
        return any(p >= 0.98 * self.epoch_samples for p, _ in self.points())

    @property
    def epoch_peak_mb(self) -> float:
        """The tree's peak over one whole epoch: measured, or projected from the growth measured."""
        if not self.trace:
            return 0.0
        if not self.with_workers:
            return self.measured_peak_mb  # no worker copies pages as it reads: the process holds what it held
        if self.whole_epoch or not self.epoch_samples:
            return self.epoch_readings_peak_mb
        start, slope = self.fit()
        growth = slope * self.epoch_samples
        if self.dataset_mb:
            growth = min(growth, self.dataset_mb * max(self.workers, 1))
        return max(self.epoch_readings_peak_mb, start + growth)

    @property
    def growth_per_worker_mb(self) -> float:
        """What a worker adds over the epoch by copying what it reads."""
        if not self.workers or not self.trace:
            return 0.0
        return max(self.epoch_peak_mb - self.fit()[0], 0.0) / self.workers

    @property
    def per_worker_mb(self) -> Optional[float]:
        """What a worker adds to the tree at the epoch's end (its own pages: copies, buffers)."""
        readings = self.with_workers
        if not readings:
            return None
        last = readings[-1]
        held = sum(last.workers_mb.values()) / len(last.workers_mb)
        return max(held, held + (self.epoch_peak_mb - last.total_mb) / len(last.workers_mb))

    @property
    def basis(self) -> str:
        read = max((p for p, _ in self.points()), default=0)
        if not self.with_workers:
            delivered = max((s.samples for s in self.trace), default=0)
            return f"measured over {delivered:,} samples read without workers (none copies pages as it reads)"
        if self.whole_epoch:
            how = "read on to the epoch's end for this figure" if self.drained else "the run read a whole epoch"
            return f"measured over a whole epoch ({how})"
        if not self.epoch_samples:
            return f"measured over {read:,} samples (the epoch's length is not known)"
        if self.growth_mb_per_sample * self.epoch_samples < 1.0:
            return (f"measured over {read:,} of the epoch's {self.epoch_samples:,} samples; the tree did not grow as "
                    "its workers read, so an epoch holds the same")
        return (f"projected to one epoch of {self.epoch_samples:,} samples from the growth measured over {read:,} "
                f"({1000 * self.growth_mb_per_sample:.2f} MB per 1,000 samples read)")


class EpochMemory:
    """The measured loop's probe: a memory reading where an epoch stands, and the call whether to read on,
    unmeasured, to the epoch's end.  It does when that costs at most ``budget_s`` (``bench.memory_epoch_s``)
    and either what is still to come could move the figure or it is cheap (a tenth of the time measured);
    otherwise the figure is projected (:class:`MemoryRecord`)."""

    def __init__(self, monitor: Any, dataset_mb: Optional[float], epoch_samples: Optional[int],
                 available_mb: Optional[float], budget_s: float, persistent: bool = False, forked: bool = True):
        self.monitor, self.budget_s = monitor, budget_s
        self.base = MemoryRecord(dataset_mb=dataset_mb, epoch_samples=epoch_samples, available_mb=available_mb,
                                 persistent=persistent, forked=forked)
        self.readings = 0  # the trace's length at the last reading taken with workers alive
        self.drained = False
        self.until: Optional[int] = None  # reading on: the samples read at which one more reading may end it

    def record(self) -> MemoryRecord:
        trace = list(self.monitor.trace)
        return dataclasses.replace(self.base, trace=trace[: self.readings or len(trace)], drained=self.drained)

    def warmed_up(self) -> None:
        self.monitor.sample_now()

    def windows_open(self) -> None:
        self.monitor.window_edge(opening=True)

    def windows_done(self) -> bool:
        """Read on when that is cheap and the readings do not already show the tree flat over a good part of an
        epoch (too few, or too close together, to tell is not flat): to the point where one more reading can show
        what the rest of the epoch holds (:meth:`read_enough`), or to the epoch's end."""
        self.monitor.window_edge(opening=False)
        self.monitor.sample_now()
        self.readings = len(self.monitor.trace)
        record = self.record()
        readings = record.with_workers
        if record.whole_epoch or not record.epoch_samples or not readings:
            return False
        left = self.left(record)
        trace = self.monitor.trace
        rate = self.rate(trace)
        if rate <= 0 or left / rate > self.budget_s:
            return False
        if self.shown_flat(record) and left / rate > CHEAP_SHARE * (trace[-1].time - trace[0].time):
            return False  # flat, and shown so: an epoch holds what was measured
        self.drained = True
        # Reading on x more samples, the span grows by x and what is left shrinks by x: the least x for which
        # the readings' jitter spread over the span no longer hides the threshold in what is left, nor (where
        # the readings rise) the growth they show.
        threshold, growth = self.threshold_mb(record), record.growth_mb_per_sample
        extra = (NOISE_MB * left - threshold * record.span) / (NOISE_MB + threshold)
        if growth > 0:
            extra = max(extra, left - threshold / growth)
        self.until = None
        if extra < READ_ON_PART * left:
            self.until = readings[-1].samples + max(int(READ_ON_MARGIN * extra), 1)
        return True

    def read_enough(self) -> bool:
        """Reading on: at the point :meth:`windows_done` set, one more reading; True (stop reading on) when the
        readings now show the tree flat enough that the rest of the epoch cannot move the figure past the
        threshold, else on to the epoch's end."""
        if self.until is None or self.monitor.samples_read() < self.until:
            return False
        self.until = None
        self.epoch_done()
        return self.shown_flat(self.record())

    def left(self, record: MemoryRecord) -> int:
        """Samples still to come in the epoch of the last reading's workers."""
        readings = record.with_workers
        first = next(s for s in readings if set(s.workers_mb) == set(readings[-1].workers_mb))
        return max(record.epoch_samples - record.position(readings[-1], first), 0)

    def shown_flat(self, record: MemoryRecord) -> bool:
        """The readings span a good part of the epoch, and the rest of it cannot add the threshold unseen."""
        return record.span >= EVIDENCE_SHARE * record.epoch_samples and \
            self.hidden_mb(record) < self.threshold_mb(record)

    @staticmethod
    def threshold_mb(record: MemoryRecord) -> float:
        """What the rest of an epoch may add unseen: the figure's stated precision."""
        return max(READ_ON_MB, READ_ON_SHARE * record.measured_peak_mb)

    def hidden_mb(self, record: MemoryRecord) -> float:
        """The most the rest of the epoch could add that the readings allow: a rise within their jitter could be
        real."""
        steepest = max(record.growth_mb_per_sample, NOISE_MB / max(record.span, 1))
        return steepest * self.left(record)

    @staticmethod
    def rate(readings: list[MemorySample]) -> float:
        """Samples per second the loader delivered between the first and the last reading."""
        spent = readings[-1].time - readings[0].time
        return (readings[-1].samples - readings[0].samples) / spent if spent > 0 else 0.0

    def epoch_done(self) -> None:
        self.monitor.sample_now()
        self.readings = len(self.monitor.trace)

    def epoch_ending(self) -> None:
        """The epoch's last batch is next: a reading while its workers (gone at its end) still live."""
        self.epoch_done()
