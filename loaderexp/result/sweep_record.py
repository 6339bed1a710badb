"""``sweep.json``: what each job needs to know of its sweep, wherever the launcher runs it (track.sweep
writes it when the sweep starts; a job, a resumed sweep and ``bench.predict`` read it back)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

SWEEP_RECORD = "sweep.json"


@dataclass
class SweepRecord:
    uri: Optional[str] = None  # the MLflow store the sweep logs to
    experiment: Optional[str] = None
    parent_run_id: Optional[str] = None  # the sweep's MLflow run: its jobs are its children
    total: Optional[int] = None  # jobs (a search's: at most this many)
    swept_keys: list[str] = field(default_factory=list)  # the grid's axes: they name each job's run
    jobs: list[list[str]] = field(default_factory=list)  # each job's overrides, a grid's

    @classmethod
    def read(cls, sweep_dir: Path) -> Optional["SweepRecord"]:
        """The folder's record, or None when it has none that can be read."""
        try:
            saved = json.loads((Path(sweep_dir) / SWEEP_RECORD).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict):
            return None
        known = {each.name for each in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in saved.items() if name in known and value is not None})

    def write(self, sweep_dir: Path) -> None:
        Path(sweep_dir).mkdir(parents=True, exist_ok=True)
        (Path(sweep_dir) / SWEEP_RECORD).write_text(json.dumps(dataclasses.asdict(self), indent=2))
