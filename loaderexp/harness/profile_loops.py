"""The profiling pass's loops that are not split into stages: one process alone, one worker feeding the main
process, and as many workers as there are usable cores (:mod:`.profile` runs them).

CPU time of another process is read from /proc/<pid>/schedstat (nanoseconds), psutil's clock ticks
(10 ms) where there is none.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from torch.utils.data import DataLoader

WORKER_BATCHES = 400  # batches a worker loop times, at most (its budget ends it sooner)


class Clock:
    """CPU (this process's) and wall seconds spent inside ``with`` blocks, added up."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0

    def __enter__(self) -> "Clock":
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cpu += time.process_time() - self._cpu
        self.wall += time.perf_counter() - self._wall


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        import psutil

        times = psutil.Process(pid).cpu_times()
        return times.user + times.system


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

    main_cpu_s: float  # the main process's CPU to receive a batch
    worker_cpu_s: float  # the workers' CPU to make and send it
    wall_s: float  # between two batches arriving
    batches: int


def workers_loop(dataset: Any, sampler: Any, batch_size: Optional[int], collate: Optional[Callable],
                 workers: int, budget_s: float) -> Optional[WorkerLoop]:
    """A DataLoader with ``workers`` workers, timed from the round after their first batches (their start)
    to short of the epoch's end (where they exit, and their CPU time with them).  With one worker the
    main process, faster than its worker, waits for every batch: the clock between two is the worker's
    time for one."""
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collate, num_workers=workers,
                        multiprocessing_context=_fork())
    main, counted, worker_start, clock_start = 0.0, 0, 0.0, 0.0
    deadline = time.perf_counter() + budget_s
    batches = min(WORKER_BATCHES + workers, len(loader) - 1)
    iterator = iter(loader)
    try:
        for seen in range(batches):
            before = time.thread_time()
            if next(iterator, None) is None:
                break
            if seen < workers:  # each worker's first batch carries its start
                if seen == workers - 1:
                    worker_start, clock_start = _workers_cpu(iterator), time.perf_counter()
                continue
            main += time.thread_time() - before
            counted += 1
            if counted >= 3 * workers and time.perf_counter() > deadline:
                break
        worker, wall = _workers_cpu(iterator) - worker_start, time.perf_counter() - clock_start
    finally:
        del iterator
    return WorkerLoop(main / counted, worker / counted, wall / counted, counted) if counted else None


def single_process(dataset: Any, indices: list[int], batch_size: Optional[int], collate: Optional[Callable],
                   per_sample_s: float, budget_s: float) -> tuple[float, float]:
    """CPU and wall per sample of a DataLoader(num_workers=0) loop, its batch small enough for the budget."""
    if batch_size is not None:
        batch_size = max(1, min(batch_size, int(budget_s / max(per_sample_s, 1e-9)), len(indices)))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=indices, collate_fn=collate, num_workers=0)
    clock, samples = Clock(), 0
    deadline = time.perf_counter() + budget_s
    iterator = iter(loader)
    while True:
        with clock:
            batch = next(iterator, None)
        if batch is None:
            break
        samples += batch_size or 1
        if time.perf_counter() > deadline:
            break
    return clock.cpu / max(samples, 1), clock.wall / max(samples, 1)
