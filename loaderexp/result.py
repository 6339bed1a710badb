"""A run's result: a plain value that becomes result.json, MLflow params/metrics, and a report row."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit, urlunsplit

RESULT_FILE = "result.json"


@dataclass
class RunResult:
    status: str  # "FINISHED" | "FAILED" | "KILLED"
    params: dict[str, Any]  # resolved, flattened config: "loader.num_workers" -> 4
    metrics: dict[str, float] = field(default_factory=dict)  # unit-bearing names
    info: dict[str, Any] = field(default_factory=dict)  # non-numeric facts: data source, bound, h2d reason
    warnings: list[str] = field(default_factory=list)
    error: Optional[str] = None
    host: dict[str, Any] = field(default_factory=dict)
    config_hash: str = ""
    run_id: Optional[str] = None  # MLflow run id once created
    logged: bool = False  # everything reached MLflow (else `python -m loaderexp.sync` imports it)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True, default=str)

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / RESULT_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)  # a reader never sees half a file
        return path

    @classmethod
    def read(cls, path: Path) -> "RunResult":
        data = json.loads(Path(path).read_text())
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def param_text(value: Any) -> str:
    """A param as Hydra's override syntax writes it (true, null), so it can be pasted back."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


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
        import shutil

        facts["shm_gb"] = round(shutil.disk_usage("/dev/shm").total / 2**30, 1)
    return facts


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a scheduler's cgroup or taskset), not the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def host_facts() -> dict[str, Any]:
    """The machine plus what torch sees on it (CUDA, the GPU): call it where torch is loaded anyway."""
    import torch

    facts = machine_facts()
    facts.update(
        torch=torch.__version__,
        cuda_available=torch.cuda.is_available(),
        cuda_version=torch.version.cuda,
        gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        gpu_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
    )
    return facts


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


def redact_uri(uri: str) -> str:
    """``uri`` with its password replaced by ``***`` (``http://user:***@host``): for messages."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
