"""The host a run measured on, as the OS sees it (what torch sees is added where torch is loaded:
``loaderexp.execute.host``), and the share of it a cgroup lets this job use."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import sys
from typing import Optional

from loaderexp.harness.cgroup import cpu_quota_cores, memory_limit_bytes
from loaderexp.result.facts import HostFacts


def machine_facts() -> HostFacts:
    """The machine as the OS sees it (no torch import: the Hydra app never loads torch)."""
    quota, limit = cpu_quota_cores(), memory_limit_bytes()
    facts = HostFacts(
        hostname=socket.gethostname(),
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count(),
        cpus_usable=usable_cpus(quota),
        platform=platform.platform(),
        python=platform.python_version(),
        # Free-threaded builds (3.13t+) can run the thread backends' work in parallel.
        gil_enabled=sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True,
    )
    if quota is not None:  # stated only inside a cgroup that sets one
        facts.cpu_quota_cores = round(quota, 3)
    if limit is not None:
        facts.memory_limit_gb = round(limit / 2**30, 2)
    try:
        import psutil

        total = psutil.virtual_memory().total
        facts.memory_gb = round(min(total, limit or total) / 2**30, 1)
    except ImportError:  # pragma: no cover - psutil is a dependency
        pass
    if os.path.isdir("/dev/shm"):
        facts.shm_gb = round(shutil.disk_usage("/dev/shm").total / 2**30, 1)
    return facts


def usable_cpus(quota: Optional[float] = None) -> float:
    """The CPUs this process may run on (its affinity: a scheduler's cgroup or taskset), capped by a cgroup's
    CPU quota (a container's ``--cpus=1.5``): whole when the affinity binds, else the quota itself."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota_cores() if quota is None else quota
    return affinity if quota is None or quota >= affinity else round(quota, 3)


def cpu_model() -> str:
    """The CPU's marketing name (/proc/cpuinfo on Linux), so runs on different node types stay apart."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
