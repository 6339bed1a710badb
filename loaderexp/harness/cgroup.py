"""What the kernel's control groups let this process use: a CPU quota, a memory limit, and how often the
quota throttled it.  cgroup v2 (``cpu.max``, ``memory.max``, ``cpu.stat``'s ``nr_throttled`` and
``throttled_usec``) and v1 (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, ``memory.limit_in_bytes``,
``cpu.stat``'s ``throttled_time`` in ns).  A limit set on any ancestor binds too, so the tightest along
the path up to the root counts.  Torch-free: the app and the measuring process both read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Optional

ROOT = "/sys/fs/cgroup"
UNLIMITED_BYTES = 2**60  # v1 writes "no limit" as a huge page-rounded number


def _own_paths(proc_file: str = "/proc/self/cgroup") -> dict[str, tuple[str, str]]:
    """controller -> (its hierarchy's name as v1 mounts it, e.g. "cpu,cpuacct"; this process's cgroup path);
    "" stands for v2's unified hierarchy."""
    found: dict[str, tuple[str, str]] = {}
    try:
        with open(proc_file) as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    found[name] = (controllers, path)
    except (OSError, ValueError):
        pass
    return found


def _folders(controller: str, root: str = ROOT, proc_file: str = "/proc/self/cgroup") -> Iterator[str]:
    """This process's cgroup folder for ``controller`` and each ancestor's, innermost first."""
    paths = _own_paths(proc_file)
    v1 = [os.path.join(root, name) for name in (controller, paths.get(controller, ("", ""))[0]) if name]
    mounted = [folder for folder in v1 if controller in paths and os.path.isdir(folder)]
    if mounted:  # v1: /sys/fs/cgroup/cpu (often a link to cpu,cpuacct)
        base, path = mounted[0], paths[controller][1]
    elif "" in paths:  # v2
        base, path = root, paths[""][1]
    else:
        return
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        folder = os.path.join(base, *parts[:depth])
        if os.path.isdir(folder):  # inside a cgroup namespace the path may not exist: its root is ours
            yield folder


def _read(folder: str, name: str) -> Optional[str]:
    try:
        with open(os.path.join(folder, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_quota_cores(root: str = ROOT, proc_file: str = "/proc/self/cgroup") -> Optional[float]:
    """The CPU quota as cores (1.5: one and a half cores' time per period); None where none is set."""
    quotas = []
    for folder in _folders("cpu", root, proc_file):
        v2 = _read(folder, "cpu.max")
        if v2 is not None:
            quota, _, period = v2.partition(" ")
            if quota != "max" and period:
                quotas.append(int(quota) / int(period))
            continue
        quota, period = _read(folder, "cpu.cfs_quota_us"), _read(folder, "cpu.cfs_period_us")
        if quota and period and int(quota) > 0:
            quotas.append(int(quota) / int(period))
    return min(quotas) if quotas else None


def memory_limit_bytes(root: str = ROOT, proc_file: str = "/proc/self/cgroup") -> Optional[int]:
    """The tightest memory limit on this process's cgroups; None where none is set."""
    limits = []
    for folder in _folders("memory", root, proc_file):
        value = _read(folder, "memory.max") or _read(folder, "memory.limit_in_bytes")
        if value and value != "max" and int(value) < UNLIMITED_BYTES:
            limits.append(int(value))
    return min(limits) if limits else None


def memory_headroom_bytes(root: str = ROOT, proc_file: str = "/proc/self/cgroup") -> Optional[int]:
    """What this process's cgroups still let it allocate (limit less usage, the tightest level); None
    where no limit is set.  The OOM killer acts on it before the machine runs out."""
    left = []
    for folder in _folders("memory", root, proc_file):
        limit = _read(folder, "memory.max") or _read(folder, "memory.limit_in_bytes")
        usage = _read(folder, "memory.current") or _read(folder, "memory.usage_in_bytes")
        if limit and usage and limit != "max" and int(limit) < UNLIMITED_BYTES:
            left.append(max(int(limit) - int(usage), 0))
    return min(left) if left else None


def usable_memory_mb() -> float:
    """Memory a new allocation can still get: the machine's available, capped by the cgroup's headroom."""
    import psutil

    headroom, available = memory_headroom_bytes(), psutil.virtual_memory().available
    return min(available, headroom if headroom is not None else available) / 2**20


@dataclass(frozen=True)
class Throttling:
    periods: int  # quota periods in which the group was throttled
    seconds: float  # time its tasks were held back


def throttling(root: str = ROOT, proc_file: str = "/proc/self/cgroup") -> Optional[Throttling]:
    """The innermost CPU cgroup's throttling counters so far; None where the kernel keeps none."""
    for folder in _folders("cpu", root, proc_file):
        text = _read(folder, "cpu.stat")
        if not text:
            continue
        stat = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
        if "nr_throttled" not in stat:
            continue
        seconds = int(stat["throttled_usec"]) / 1e6 if "throttled_usec" in stat else \
            int(stat.get("throttled_time", 0)) / 1e9
        return Throttling(int(stat["nr_throttled"]), seconds)
    return None
