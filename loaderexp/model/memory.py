"""Memory at a worker count nobody measured: each DataLoader worker adds about the same to what a training
script holds (its own pages, and its copy of what it reads), so the runs that were measured at two or more
counts give a line, and the line gives a forecast, with how far the measured runs stray from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

MIN_UNCERTAINTY = 0.05  # a line through measured peaks is known to about this much at best


@dataclass(frozen=True)
class MemoryForecast:
    workers: int
    mb: float  # forecast peak over an epoch
    per_worker_mb: float  # the line's slope: what each worker adds
    uncertainty: float  # relative: the measured runs' largest distance from the line, at least MIN_UNCERTAINTY
    measured_at: tuple[int, ...]


def forecast(measured: Mapping[int, float], workers: int) -> Optional[MemoryForecast]:
    """The least-squares line through ``measured`` (worker count -> MB) at ``workers``; None from fewer than two
    counts (a slope needs two).  For a count with workers, only the runs with workers make the line when two or
    more counts have them: the first worker brings what no later one adds again (shared memory for batches, the
    main process's receiving side), and a line through 0 workers read it as a slope (+34% at 4 workers from 0, 1,
    2 on a copy-on-access dataset; -0.1% without the 0)."""
    points = sorted(measured.items())
    with_workers = [(w, m) for w, m in points if w >= 1]
    if workers >= 1 and len({w for w, _ in with_workers}) >= 2:
        points = with_workers
    if len({w for w, _ in points}) < 2:
        return None
    n = len(points)
    mean_w = sum(w for w, _ in points) / n
    mean_m = sum(m for _, m in points) / n
    slope = sum((w - mean_w) * (m - mean_m) for w, m in points) / sum((w - mean_w) ** 2 for w, _ in points)
    line = lambda w: mean_m + slope * (w - mean_w)  # noqa: E731
    stray = max(abs(m / line(w) - 1) for w, m in points if line(w) > 0) if n > 2 else 0.0
    return MemoryForecast(workers, line(workers), slope, max(MIN_UNCERTAINTY, stray), tuple(w for w, _ in points))
