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
    per_worker_mb: float  # the line's slope: what each worker adds (at least 0)
    uncertainty: float  # relative, at ``workers``: how far the measured runs stray, grown with the distance from them
    measured_at: tuple[int, ...]
    fell_mb: float = 0.0  # the measured runs held this much less with more workers: their peaks move more than that
    first_worker: bool = False  # the line runs from 0 workers: its slope holds the first worker's own cost, at most
    loads_itself: bool = False  # 0 workers from runs with workers: the main process does a worker's loading


def forecast(measured: Mapping[int, float], workers: int) -> Optional[MemoryForecast]:
    """The least-squares line through ``measured`` (worker count -> MB) at ``workers``; None from fewer than two
    counts (a slope needs two).  For a count with workers, only the runs with workers make the line when two or
    more counts have them: the first worker brings what no later one adds again (shared memory for batches, the
    main process's receiving side), and a line through 0 workers read it as a slope (+34% at 4 workers from 0, 1,
    2 on a copy-on-access dataset; -0.1% without the 0).

    A worker adds no less than nothing: a line that falls (a resnet18 step's peaks, 1,164 MB at 1 worker and 1,094
    at 2) says the runs' peaks move more than a worker adds.  It is taken flat, and that movement, like the runs'
    distance from the line, is how far the forecast may be off at the runs, twice as much again for each span of the
    measured counts it reaches beyond their middle: the line's slope is known to no better than that.

    From 0 workers and one count with workers, past that count: the slope holds the first worker's own cost, so the
    line is the most the forecast can be, and the measured run's level (no worker adds less than nothing) the least;
    the forecast is the middle of the two, and half their distance its uncertainty.

    At 0 workers from runs with workers, the main process loads itself and holds a worker's loading memory without
    a worker's process: at least the line at 0 (nothing loading), at most the fewest workers' level (+5%).  The
    line alone put the JPEG folder's 0 workers at 575 MB +-24% from 754, 842 and 1,067 at 1..3; 0 workers held 767."""
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
    span = points[-1][0] - points[0][0]
    fell = max(0.0, -slope * span)
    slope = max(slope, 0.0)
    line = lambda w: mean_m + slope * (w - mean_w)  # noqa: E731
    top_w, top_m = points[-1]
    if workers == 0 and points[0][0] >= 1:  # [the line at 0, the fewest workers' level], as its middle +- half
        low, high = max(line(0), 0.0), points[0][1] * (1 + MIN_UNCERTAINTY)
        middle = (low + high) / 2
        return MemoryForecast(0, middle, slope, max(MIN_UNCERTAINTY, (high - low) / 2 / middle),
                              tuple(w for w, _ in points), fell, loads_itself=True)
    if points[0][0] == 0 and n == 2 and workers > top_w:  # [the run's level, the line], as its middle +- half
        middle = (top_m + line(workers)) / 2
        return MemoryForecast(workers, middle, slope, max(MIN_UNCERTAINTY, (line(workers) - top_m) / 2 / middle),
                              (0, top_w), fell, first_worker=True)
    stray = max([abs(m - line(w)) for w, m in points] + [fell]) if n > 2 or fell else 0.0
    off = stray * (1 + 2 * abs(workers - mean_w) / span) / line(workers) if line(workers) > 0 else 0.0
    return MemoryForecast(workers, line(workers), slope, max(MIN_UNCERTAINTY, off), tuple(w for w, _ in points), fell)
