"""The host a run measured on, as the OS sees it (what torch sees is added where torch is loaded:
``loaderexp.execute.host``)."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import sys
from typing import Any


def machine_facts() -> dict[str, Any]:
    """The machine as the OS sees it (no torch import: the Hydra app never loads torch)."""
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable_cpus(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        # Free-threaded builds (3.13t+) can run the thread backends' work in parallel.
        "gil_enabled": sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True,
    }
    try:
        import psutil

        facts["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover - psutil is a dependency
        pass
    if os.path.isdir("/dev/shm"):
        facts["shm_gb"] = round(shutil.disk_usage("/dev/shm").total / 2**30, 1)
    return facts


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a scheduler's cgroup or taskset), not the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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
