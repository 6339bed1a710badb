"""Result: a run's record, the plain value that becomes result.json, MLflow's params and metrics, and a report row.

Owns :class:`RunResult`, the names a result carries (the metrics, each declared once with its unit and
how ranks combine it, :mod:`.metrics`; the params the later stages read, below), turning a typed
measurement into those names (:mod:`.figures`, the one place that flattens), and the facts of the
host a run measured on (:mod:`.host`).  Every stage may import it; it imports only the torch-free
records of ``harness`` (``harness.records``, ``harness.batches``), never torch, Hydra or MLflow.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from loaderexp.result.host import cpu_model, machine_facts, usable_cpus

RESULT_FILE = "result.json"
PREDICTED = "PREDICTED"  # a job's status when bench.predict took the model's figure instead of measuring it

# The params (flattened settings) that the report, the tracker and the search read back from a
# result: spelled here once, each a real schema path (tests/test_layout.py checks).
NUM_WORKERS = "loader.num_workers"
BATCH_SIZE = "loader.batch_size"
PIN_MEMORY = "loader.pin_memory"
BACKEND = "backend.name"
NON_BLOCKING = "device.non_blocking"
DEVICE_PREFETCH = "device.prefetch"
RANKS = "dist.nproc_per_node"
STOP_BELOW = "bench.stop_below"
TRACKING_URI = "tracking.uri"
TRACKING_EXPERIMENT = "tracking.experiment"
DATASET_NAME = "dataset.name"
SAMPLER_NAME = "sampler.name"
DATASET_ROOT = "dataset.root"
DATASET_TARGET = "dataset._target_"
DATA_ROOT = "data_root"
RESUME = "resume"
# Params that identify a run but never explain a speed difference (resume says how a sweep was run).
IGNORED_PARAMS = ("tracking.", DATA_ROOT, "bench.", DATASET_ROOT, RESUME)


@dataclass
class RunResult:
    status: str  # "FINISHED" | "FAILED" | "KILLED" | "PREDICTED" (bench.predict: not measured)
    params: dict[str, Any]  # resolved, flattened config: "loader.num_workers" -> 4
    metrics: dict[str, float] = field(default_factory=dict)  # unit-bearing names (result.metrics)
    info: dict[str, Any] = field(default_factory=dict)  # non-numeric facts: data source, bound, h2d reason
    warnings: list[str] = field(default_factory=list)
    error: Optional[str] = None
    host: dict[str, Any] = field(default_factory=dict)
    config_hash: str = ""
    run_id: Optional[str] = None  # MLflow run id once created
    logged: bool = False  # everything reached MLflow (else `python -m loaderexp.sync` imports it)
    profile: Optional[dict[str, Any]] = None  # the stage costs the ceiling is modelled from (measure.stages)

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
        if not isinstance(data, dict) or not isinstance(data.get("params"), dict) or "status" not in data:
            raise ValueError("it holds no status and params")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def param(self, name: str, default: Any = None) -> Any:
        return self.params.get(name, default)

    @property
    def workers(self) -> int:
        return self.params.get(NUM_WORKERS) or 0

    @property
    def ranks(self) -> int:
        return self.params.get(RANKS) or 1


def param_text(value: Any) -> str:
    """A param as Hydra's override syntax writes it (true, null), so it can be pasted back."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return str(value.value)
    return "null" if value is None else str(value)


# Query parameters that carry a credential (?token=, ?access_token=, ?password=, ?sig=, ?api_key= ...).
SECRET_QUERY = re.compile(r"token|passw|pwd|secret|key|auth|credential|sig", re.IGNORECASE)


def uri_secrets(uri: str) -> list[str]:
    """What in ``uri`` is a credential: its password, and query parameters named like one."""
    parts = urlsplit(uri)
    found = ["a password"] if parts.password is not None else []
    found += [f"the query parameter {key}" for key, _ in parse_qsl(parts.query, keep_blank_values=True)
              if SECRET_QUERY.search(key)]
    return found


def redact_uri(uri: str) -> str:
    """``uri`` with its password and credential query values replaced by ``***``: for messages."""
    if not uri_secrets(uri):
        return uri  # as written (urlunsplit would drop the empty host of sqlite:////abs/path)
    parts = urlsplit(uri)
    if parts.password is not None:
        host = parts.hostname or ""
        parts = parts._replace(netloc=f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else ""))
    query = [(key, "***" if SECRET_QUERY.search(key) else value)
             for key, value in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="*"))) if parts.query else urlunsplit(parts)


__all__ = ["RESULT_FILE", "RunResult", "cpu_model", "machine_facts", "param_text", "redact_uri", "uri_secrets",
           "usable_cpus"]
