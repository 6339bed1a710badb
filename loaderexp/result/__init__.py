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

from loaderexp.harness.stages import StageProfile
from loaderexp.result.facts import Bound, HostFacts, RunFacts, Status
from loaderexp.result.host import cpu_model, machine_facts, usable_cpus

RESULT_FILE = "result.json"
TOLERANCE = 0.05  # a run within 5% of the best is as good as it: the recommendation's, the search's and the check's

# The params (flattened settings) that the report, the tracker and the search read back from a
# result: spelled here once, each a real schema path (tests/test_layout.py checks).
NUM_WORKERS = "loader.num_workers"
BATCH_SIZE = "loader.batch_size"
PIN_MEMORY = "loader.pin_memory"
PREFETCH_FACTOR = "loader.prefetch_factor"
PERSISTENT_WORKERS = "loader.persistent_workers"
PROFILE_S = "bench.profile_s"
BUDGET = "bench.budget"
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
# How a run was driven, not what it measured: a search's bar for stopping a trial early, a resumed sweep.  Runs
# that differ only in them are one configuration (a search's trials each carry the bar of their moment).
CONTROL_PARAMS = (STOP_BELOW, RESUME)


@dataclass
class RunResult:
    """A run's record: typed while it lives, flattened to names only where result.json and MLflow are written."""

    status: Status
    params: dict[str, Any]  # resolved, flattened config: "loader.num_workers" -> 4
    metrics: dict[str, float] = field(default_factory=dict)  # unit-bearing names (result.metrics)
    info: RunFacts = field(default_factory=RunFacts)
    warnings: list[str] = field(default_factory=list)
    error: Optional[str] = None
    host: HostFacts = field(default_factory=HostFacts)
    config_hash: str = ""
    run_id: Optional[str] = None  # MLflow run id once created
    logged: bool = False  # everything reached MLflow (else `python -m loaderexp.sync` imports it)
    profile: Optional[StageProfile] = None  # the stage costs the ceiling is modelled from

    def __post_init__(self) -> None:
        # Built from plain values (a test, a script): typed here once; an undeclared fact is a TypeError.
        self.status = Status(self.status)
        if isinstance(self.info, dict):
            self.info = RunFacts(**self.info)
        if isinstance(self.host, dict):
            self.host = HostFacts(**self.host)
        if isinstance(self.profile, dict):
            self.profile = StageProfile.from_dict(self.profile)

    def to_record(self) -> dict[str, Any]:
        """The record as result.json holds it: plain values, unset facts left out."""
        record = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        record.update(status=self.status.value, info=self.info.to_dict(), host=self.host.to_dict(),
                      profile=self.profile.to_dict() if self.profile is not None else None)
        return record

    @classmethod
    def from_record(cls, data: Any) -> "RunResult":
        """The one way back from a record (result.json, or a run read from MLflow) to the typed value; a
        ValueError for what is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("params"), dict) or "status" not in data:
            raise ValueError("it holds no status and params")
        try:
            status = Status(data["status"])
        except ValueError:
            raise ValueError(f"its status {data['status']!r} is none of {', '.join(s.value for s in Status)}") from None
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.update(status=status, info=RunFacts.from_dict(data.get("info")),
                      host=HostFacts.from_dict(data.get("host")),
                      profile=StageProfile.from_dict(data["profile"]) if data.get("profile") else None)
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_record(), indent=2, sort_keys=True, default=str)

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return write_whole(folder / RESULT_FILE, self.to_json())

    @classmethod
    def read(cls, path: Path) -> "RunResult":
        return cls.from_record(json.loads(Path(path).read_text()))

    @property
    def finished(self) -> bool:
        return self.status is Status.FINISHED

    @property
    def workers(self) -> int:
        return self.params.get(NUM_WORKERS) or 0

    @property
    def setting_but_workers(self) -> tuple:
        """The run's setting but num_workers (and what changes no speed): its group in a num_workers grid."""
        return tuple(sorted((k, str(v)) for k, v in self.params.items()
                            if k != NUM_WORKERS and v is not None and not k.startswith(IGNORED_PARAMS)))

    @property
    def ranks(self) -> int:
        return self.params.get(RANKS) or 1


def write_whole(path: Path, text: str) -> Path:
    """``text`` into ``path`` whole or not at all: written beside it and renamed over it (a reader never sees half
    a file); on a failed write (a full disk) nothing is left behind and the OSError goes on."""
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    return path


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


__all__ = ["RESULT_FILE", "TOLERANCE", "Bound", "HostFacts", "RunFacts", "RunResult", "Status", "cpu_model", "machine_facts", "param_text", "redact_uri", "uri_secrets", "write_whole",
           "usable_cpus"]
