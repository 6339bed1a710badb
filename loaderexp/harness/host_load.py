"""The rest of the host while a run measures: the CPU that processes outside loaderexp used, the
hypervisor's steal, and the cgroup's throttling.

A run on a shared host reads what the host's moment gives it.  /proc/stat has the host's busy time
(every CPU's user, nice, system, irq and softirq; idle and iowait are not busy, steal is counted
apart); less what loaderexp's own processes used in the same interval (the measured tree, the
processes it descends from: the dataset holder and the app), the rest is the other processes'.  Per
interval, in cores: 1.0 is one core's worth of another job; a run's figures are over the intervals that
overlapped its measured windows, where its throughput is (all of them where it marked none).  Throttling is the
cgroup's ``nr_throttled`` and throttled time over the run (:mod:`.cgroup`).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import Optional

import psutil

from loaderexp.harness.cgroup import throttling

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class HostLoadRecord:
    """What the rest of the host used while the run measured (harness.host_load): in cores, per interval."""

    others_cores_mean: Optional[float] = None  # CPU of processes outside loaderexp's, 1.0 = one core
    others_cores_max: Optional[float] = None
    steal_cores_mean: Optional[float] = None  # the hypervisor's steal
    throttled_periods: Optional[int] = None  # the cgroup's CPU quota held this run back this many periods
    throttled_s: Optional[float] = None


def host_cpu_seconds(stat_file: str = "/proc/stat") -> Optional[tuple[float, float]]:
    """(busy, steal) CPU seconds of the whole host since boot; None where there is no /proc/stat."""
    try:
        with open(stat_file) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:]] + [0] * 8
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]  # guest time is inside user already
    return (user + nice + system + irq + softirq) / TICK, steal / TICK


class CpuAccount:
    """CPU seconds a changing set of processes used between two readings: a process first seen now was
    started since the last reading, so all its time counts (its baseline is zero), except at the first
    reading, which only takes everyone's baseline.

    A process that ended is no longer read, but its time is not lost: once its parent reaps it, the kernel
    adds its whole life's CPU to the parent's ``children`` times.  So each process's reaped children count
    too, less what was already read of them while they lived (a DataLoader's workers that end with each
    epoch would otherwise leave their last moments' CPU to "the other processes").  What was read of them is
    taken off the reaped time when that arrives, not when they are first missed: a worker reaped between the
    reading of its parent and its own is missed a reading before its parent's reaped time shows it, which made
    that interval short of its life's CPU and the next one over by it (a tree on 2 cores read 343% at its peak,
    and the interval short of it lent "the other processes" its workers' CPU)."""

    def __init__(self) -> None:
        self._known: dict[int, psutil.Process] = {}
        self._seconds: dict[int, float] = {}  # each process's own CPU at the last reading
        self._reaped: dict[int, float] = {}  # the CPU of the children it had reaped by then
        self._owed = 0.0  # what was read of processes gone since, until their reaped time arrives

    def used(self, processes: list[psutil.Process], first: bool = False) -> float:
        used, arrived, seconds, reaped = 0.0, 0.0, {}, {}
        for process in processes:
            process = self._known.setdefault(process.pid, process)
            try:
                times = process.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            seconds[process.pid] = times.user + times.system
            reaped[process.pid] = times.children_user + times.children_system
            if not first:
                used += seconds[process.pid] - self._seconds.get(process.pid, 0.0)
                arrived += reaped[process.pid] - self._reaped.get(process.pid, 0.0)
        if not first:  # those gone since: their time reaches a parent's children times, read above or later
            self._owed += sum(total for pid, total in self._seconds.items() if pid not in seconds)
            paid = min(max(arrived, 0.0), self._owed)
            self._owed -= paid
            used += arrived - paid
        self._seconds, self._reaped = seconds, reaped
        self._known = {pid: p for pid, p in self._known.items() if pid in seconds}
        return used


class HostLoad:
    """Samples of what the rest of the host used, taken with the resource monitor's, each interval."""

    def __init__(self, root: psutil.Process) -> None:
        self._ancestors = _ancestors(root)
        self._account = CpuAccount()
        self._last: Optional[tuple[float, float, float]] = None  # (monotonic, busy, steal)
        self._throttled = throttling()
        self.others: list[float] = []
        self.steal: list[float] = []
        self.in_windows: list[bool] = []  # each interval: did it overlap the measured windows?

    def sample(self, tree_used: float, more: list[psutil.Process], first: bool = False, windows: bool = True) -> None:
        """One interval's reading: ``tree_used`` is the CPU the monitor already counted for the measured tree,
        ``more`` the other processes of loaderexp's own to count here (a rank's launcher tree); ``windows``:
        whether the interval overlapped the measured windows."""
        host, now = host_cpu_seconds(), time.monotonic()
        ours = tree_used + self._account.used([*more, *self._ancestors], first)
        if host is None:
            return
        if self._last is not None and not first and now > self._last[0]:
            wall = now - self._last[0]
            self.others.append(max(host[0] - self._last[1] - ours, 0.0) / wall)
            self.steal.append(max(host[1] - self._last[2], 0.0) / wall)
            self.in_windows.append(windows)
        self._last = (now, *host)

    def _over_windows(self, values: list[float]) -> list[float]:
        """The intervals that overlapped the windows, where the throughput is measured; a run that marked none (a
        loop without the memory probe), all of them."""
        return [v for v, inside in zip(values, self.in_windows) if inside] or values

    def record(self) -> HostLoadRecord:
        after = throttling()
        periods = seconds = None
        if after is not None and self._throttled is not None:
            periods, seconds = after.periods - self._throttled.periods, after.seconds - self._throttled.seconds
        others, steal = self._over_windows(self.others), self._over_windows(self.steal)
        return HostLoadRecord(
            others_cores_mean=round(statistics.fmean(others), 3) if others else None,
            others_cores_max=round(max(others), 3) if others else None,
            steal_cores_mean=round(statistics.fmean(steal), 3) if steal else None,
            throttled_periods=periods, throttled_s=round(seconds, 3) if seconds is not None else None)


def _ancestors(root: psutil.Process) -> list[psutil.Process]:
    """The processes the measured one descends from, up to (not including) init: the holder, the app;
    a rank's launcher and its sibling ranks are found through the launcher's tree by the caller."""
    try:
        return [p for p in root.parents() if p.pid > 1]
    except psutil.Error:
        return []
