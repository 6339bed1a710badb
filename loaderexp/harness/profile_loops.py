"""The profiling pass's loops that are not split into stages: one process alone, one worker feeding the main
process, as many workers as there are usable cores, and the DataLoader's own work (:mod:`.profile` runs them).

CPU time of another process is the sum of its threads' /proc/<pid>/task/<tid>/schedstat (nanoseconds),
psutil's clock ticks (10 ms) where there is none.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Optional

from torch.utils.data import DataLoader

try:
    import resource
except ImportError:  # Windows: no page faults counted
    resource = None  # type: ignore[assignment]
_THREAD = getattr(resource, "RUSAGE_THREAD", getattr(resource, "RUSAGE_SELF", 0))  # Linux's; elsewhere the process's

WORKER_BATCHES = 400  # batches a worker loop times, at most (its budget ends it sooner)
MIN_TIMED = 12  # ... and at least, past the workers' start (their batches are sized for that: timed_batch)
# A loop without workers at the run's batch when this many fit its cap: the JPEG folder's 128 (77 MB) come fresh from
# the system each time, 8 (5 MB) stay on the heap: 1.08 ms CPU a sample at 8, the run and a bare loop 1.52-1.64 at 128
FULL_BATCHES = 3


def _page_faults() -> int:
    """This thread's minor page faults so far: pages the kernel handed it fresh (zeroed) or copied after a fork."""
    return resource.getrusage(_THREAD).ru_minflt if resource is not None else 0


class Clock:
    """CPU (this thread's: the profiling pass runs one torch thread, as a worker does, and a thread's clock costs
    a fraction of the whole process's), wall seconds and minor page faults inside ``with`` blocks, added up."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0
        self.faults = 0

    def __enter__(self) -> "Clock":
        self._faults, self._cpu, self._wall = _page_faults(), time.thread_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cpu += time.thread_time() - self._cpu
        self.wall += time.perf_counter() - self._wall
        self.faults += _page_faults() - self._faults


def clock_overhead(uses: int = 2000) -> Clock:
    """What one use of a :class:`Clock` adds to its own figures (its readings' cost), per use."""
    clock = Clock()
    for _ in range(uses):
        with clock:
            pass
    clock.cpu, clock.wall = clock.cpu / uses, clock.wall / uses
    return clock


def cpu_seconds(pid: int) -> float:
    """Every thread's CPU (a DataLoader worker runs three: its main thread missed 17% of a tensor pipeline's)."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):  # no schedstat: psutil's clock ticks, user and system
        from psutil import Process
        return sum(Process(pid).cpu_times()[:2])


def _workers_cpu(iterator: Any) -> float:
    total = 0.0
    for worker in getattr(iterator, "_workers", []):
        try:
            total += cpu_seconds(worker.pid)
        except Exception:  # noqa: BLE001 - a worker gone: its share is unknown, the others still count
            pass
    return total


def _fork() -> Optional[str]:
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else None


@dataclass
class WorkerLoop:
    """Workers feeding the main process, in steady state (their start left out), per batch."""

    main_cpu_s: float  # the main process's CPU to receive a batch (:func:`typical`)
    worker_cpu_s: float  # the workers' CPU to make and send it (every thread of theirs)
    wall_s: float  # between two batches arriving (with one worker the typical gap: a stray late wake-up is not it)
    batches: int
    worker_cpu_halves: tuple[float, float] = (0.0, 0.0)  # worker_cpu_s over each half: how steady it is
    segment_rates: tuple[float, ...] = ()  # batches/s over each third of the loop: how steady the rate is

    @property
    def cpu_spread(self) -> float:
        """How far the two halves' CPU per batch are apart, relative to their mean."""
        a, b = self.worker_cpu_halves
        return abs(a - b) / ((a + b) / 2) if a + b > 0 else 0.0


def workers_loop(dataset: Any, sampler: Any, batch_size: Optional[int], collate: Optional[Callable],
                 workers: int, budget_s: float) -> Optional[WorkerLoop]:
    """A DataLoader with ``workers`` workers, timed from the round after their first batches (their start)
    to short of the epoch's end (where they exit, and their CPU time with them).  With one worker the
    main process, faster than its worker, waits for every batch: the gap between two is the worker's
    time for one."""
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collate, num_workers=workers,
                        multiprocessing_context=_fork())
    mains: list[float] = []
    arrivals: list[float] = []
    cpu_marks: list[float] = []
    middle = 0
    deadline = time.perf_counter() + budget_s
    batches = min(WORKER_BATCHES + 2 * workers, len(loader) - 1)
    iterator = iter(loader)
    try:
        for seen in range(batches):
            before = time.thread_time()
            if next(iterator, None) is None:
                break
            now = time.perf_counter()
            if seen < 2 * workers:  # each worker's first batch carries its start, its second its first page faults
                if seen == 2 * workers - 1:
                    cpu_marks.append(_workers_cpu(iterator))
                    arrivals.append(now)
                continue
            mains.append(time.thread_time() - before)
            arrivals.append(now)
            if len(mains) >= max(3 * workers, MIN_TIMED) and now > deadline:
                break
            if len(cpu_marks) == 1 and now > deadline - budget_s / 2:  # the middle of the budget
                cpu_marks.append(_workers_cpu(iterator))
                middle = len(mains)
        cpu_marks.append(_workers_cpu(iterator))
    finally:
        del iterator
    counted = len(mains)
    if not counted or len(arrivals) < 2:
        return None
    worker = (cpu_marks[-1] - cpu_marks[0]) / counted
    halves = (worker, worker)
    if len(cpu_marks) == 3 and 0 < middle < counted:
        halves = ((cpu_marks[1] - cpu_marks[0]) / middle, (cpu_marks[2] - cpu_marks[1]) / (counted - middle))
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    wall = typical(gaps) if workers == 1 else (arrivals[-1] - arrivals[0]) / counted
    return WorkerLoop(typical(mains), worker, wall, counted, halves, _segment_rates(arrivals, 3, workers))


def typical(values: list[float], trimmed: float = 0.1) -> float:
    """The mean without the slowest tenth: a short loop's throughput is its mean (slow batches are part of it),
    but one batch the host's other work delayed would move a short loop's mean by itself."""
    ordered = sorted(values)
    kept = ordered[:max(1, len(ordered) - int(trimmed * len(ordered)))]
    return sum(kept) / len(kept)


def _segment_rates(arrivals: list[float], parts: int, round_size: int = 1) -> tuple[float, ...]:
    """Batches/s over each of ``parts`` consecutive stretches of the arrivals, each of whole rounds of ``round_size``
    batches (the workers finish theirs at about the same time: a stretch that cuts a round counts a batch made
    in the round before it, or leaves one out, and 2 workers' thirds read low, high, low: 3,195, 4,727, 3,104
    samples/s where a bare loop did 3,677, and their median put the pipeline without its costliest operation
    at 5.7x its rate, against 4.6x in bare loops)."""
    per = (len(arrivals) - 1) // parts // round_size * round_size
    if per < 1:
        return ()
    return tuple(per / (arrivals[(i + 1) * per] - arrivals[i * per]) for i in range(parts)
                 if arrivals[(i + 1) * per] > arrivals[i * per])


class SingleLoop(NamedTuple):
    cpu_s: float  # per sample: the typical batch's
    wall_s: float
    spread: float  # how far its halves' typical batches lie apart (relative)
    batch: Optional[int]
    samples: int  # how many of the indices it went through, from the first


def single_process(dataset: Any, indices: list[int], batch_size: Optional[int], collate: Optional[Callable],
                   per_sample_s: float, budget_s: float, full_batch_s: float = 0.0) -> SingleLoop:
    """CPU and wall per sample of a DataLoader(num_workers=0) loop at the run's batch where :data:`FULL_BATCHES` of
    it fit in ``full_batch_s``, else one small enough for the budget: the typical batch's (:func:`typical`: the host's
    other work lands in a few batches); how far its halves' typical batches lie apart (the host moving under the
    loop: a batch's own jitter is not the loop's, and read 114% IQR / median on a list-backed dataset's 0.4 ms batches,
    which put the one-process limit at +-228%); and its batch."""
    fewest, full = MIN_TIMED, FULL_BATCHES * (batch_size or 0)  # samples in FULL_BATCHES of the run's batch
    if batch_size is not None and full * per_sample_s <= full_batch_s and full <= len(indices):
        fewest, budget_s = FULL_BATCHES, max(budget_s, full * per_sample_s)
    elif batch_size is not None:  # MIN_TIMED batches in the budget (slow samples: their per-batch costs are small)
        batch_size = max(1, min(batch_size, int(budget_s / max(per_sample_s, 1e-9)) // MIN_TIMED, len(indices)))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=indices, collate_fn=collate, num_workers=0)
    cpus, walls = [], []  # per batch
    deadline = time.perf_counter() + budget_s
    iterator = iter(loader)
    while True:
        clock = Clock()
        with clock:
            batch = next(iterator, None)
        if batch is None:
            break
        cpus.append(clock.cpu)
        walls.append(clock.wall)
        if len(cpus) >= fewest and time.perf_counter() > deadline:
            break
    if not cpus:
        return SingleLoop(0.0, 0.0, 0.0, batch_size, 0)
    size, half = batch_size or 1, len(walls) // 2
    halves = sorted((typical(walls[:half]), typical(walls[half:]))) if half >= 2 else None
    spread = halves[1] / halves[0] - 1 if halves and halves[0] > 0 else 0.0
    return SingleLoop(typical(cpus) / size, typical(walls) / size, spread, batch_size, min(len(cpus) * size,
                                                                                           len(indices)))


def timed_batch(batch_size: Optional[int], per_sample_s: float, budget_s: float,
                batches: int = MIN_TIMED) -> Optional[int]:
    """A batch a worker loop can time ``batches`` of within the budget: the run's own, or a smaller one."""
    if batch_size is None:
        return None
    return max(1, min(batch_size, int(budget_s / (batches * max(per_sample_s, 1e-9)))))


@dataclass
class WorkerFigures:
    """One worker over the dataset, per sample: what the model's worker costs are."""

    cpu_s: float
    wall_s: float
    main_cpu_s_per_batch: float
    basis: str  # how they were had, said in the report
    spread: float  # its two halves' CPU apart (relative)


def worker_figures(dataset: Any, indices: list[int], per_sample_s: float, batch_size: Optional[int],
                   collate: Optional[Callable], budget_s: float) -> Optional[WorkerFigures]:
    """One worker over the dataset, in batches small enough for a few to fit the budget; None when no batch came."""
    batch = timed_batch(batch_size, per_sample_s, budget_s)
    loop = workers_loop(dataset, indices, batch, collate, 1, budget_s)
    if loop is None:
        return None
    basis = f"one worker over the dataset, {loop.batches} batches"
    if batch != batch_size:
        basis += (f" of {batch} samples (a batch of {batch_size} takes too long to time within the budget: the "
                  "main process's cost per batch is taken at that size)")
    size = batch or 1
    return WorkerFigures(loop.worker_cpu_s / size, loop.wall_s / size, loop.main_cpu_s, basis, loop.cpu_spread)


def one_per_core(cores: float) -> int:
    """Workers for the usable cores: one each, a CPU quota's part core counted as one."""
    return max(1, math.ceil(cores - 1e-9))


def all_cores_rates(dataset: Any, indices: list[int], batch_size: Optional[int], collate: Optional[Callable],
                    cores: float, worker_wall_s: float, budget_s: float, own_batch: bool = False) -> list[float]:
    """Samples/s over each third of a loop with one worker per usable core, when a few rounds of them fit the
    budget: what the cores really do together (a shared host, hyperthreads, the main process waiting for a
    core), which the stage costs alone cannot tell; the thirds say how steady it was.

    ``own_batch``: at the run's batch, however long its fewest batches take, where the rate itself is the
    figure (not only the cores' efficiency): a smaller batch spreads the per-batch costs (collate, the
    hand-over) over fewer samples, and read 10-19% slow at 24 samples against 64."""
    workers = one_per_core(cores)
    batch = batch_size if own_batch else timed_batch(batch_size, worker_wall_s / workers, budget_s,
                                                     batches=MIN_TIMED + workers)
    if workers < 2 or len(indices) < 4 * workers * (batch or 1):
        return []
    loop = workers_loop(dataset, indices, batch, collate, workers, budget_s)
    if loop is None:
        return []
    return [rate * (batch or 1) for rate in loop.segment_rates] or ([(batch or 1) / loop.wall_s] if loop.wall_s else [])
