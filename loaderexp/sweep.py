"""Hydra callback that makes a multirun one unit: its size up front, one MLflow parent run, a summary.

Hydra's basic launcher runs every job in this process, so the callback and the jobs share
:data:`STATE`.  The tracking store is checked before the first job: an unreachable store stops
the sweep before anything is measured, instead of losing every result.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("loaderexp")


@dataclass
class SweepState:
    total: Optional[int] = None
    parent_run_id: Optional[str] = None
    tracker: Any = None
    sweep_dir: Optional[Path] = None
    started: float = 0.0


STATE = SweepState()


def sweep_overrides(config: DictConfig) -> list[str]:
    """The sweep's overrides as BasicSweeper sees them: hydra.sweeper.params, then the command line."""
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    return [f"{key}={value}" for key, value in params.items()] + list(config.hydra.overrides.task)


def count_jobs(config: DictConfig) -> int:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    parsed = OverridesParser.create().parse_overrides(sweep_overrides(config))
    batches = BasicSweeper.split_arguments(parsed, None)
    return sum(len(batch) for batch in batches)


class SweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global STATE
        STATE = SweepState(total=count_jobs(config), sweep_dir=Path(config.hydra.sweep.dir), started=time.time())
        grid = " ".join(sweep_overrides(config))
        log.info("sweep of %d jobs: %s", STATE.total, grid or "(defaults)")
        tracking = config.tracking
        if tracking.backend != "mlflow":
            return
        from loaderexp.tracking import MlflowTracker, check_reachable

        check_reachable(tracking.uri)  # raises: no job starts against a store that is not there
        STATE.tracker = MlflowTracker(tracking.uri, tracking.experiment)
        from loaderexp.result import host_facts

        tags = {f"host.{k}": v for k, v in host_facts().items()}
        tags.update(
            {
                "loaderexp.sweep": "parent",
                "loaderexp.sweep_dir": str(STATE.sweep_dir),
                "loaderexp.command": " ".join(["python -m loaderexp -m", *config.hydra.overrides.task]),
                "loaderexp.grid": grid,
                "loaderexp.jobs": str(STATE.total),
            }
        )
        name = f"sweep {time.strftime('%Y-%m-%d %H:%M:%S')} ({STATE.total} jobs)"
        STATE.parent_run_id = STATE.tracker.start_run(name, tags)
        log.info("MLflow: experiment %r, parent run %s", tracking.experiment, STATE.parent_run_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finish_sweep("FINISHED")


def finish_sweep(status: str) -> None:
    """Print the sweep's summary and close its parent run (also on Ctrl-C, as KILLED)."""
    if STATE.sweep_dir is None:
        return
    from loaderexp.report import load_results, summary_table

    results = load_results(STATE.sweep_dir)
    table = summary_table(results)
    elapsed = time.time() - STATE.started
    footer = f"{len(results)} of {STATE.total} jobs recorded in {elapsed:.1f} s; results in {STATE.sweep_dir}"
    print(f"\n{table}\n{footer}", file=sys.stdout, flush=True)
    (STATE.sweep_dir / "summary.txt").write_text(f"{table}\n{footer}\n")
    if STATE.tracker is not None and STATE.parent_run_id is not None:
        try:
            STATE.tracker.log_file(STATE.parent_run_id, STATE.sweep_dir / "summary.txt")
            STATE.tracker.log(STATE.parent_run_id, metrics={"jobs_recorded": len(results), "sweep_seconds": elapsed})
            STATE.tracker.end_run(STATE.parent_run_id, status)
            print(f"MLflow runs: {STATE.tracker.runs_url()}  (after `mlflow ui` in the store's folder)")
        except Exception as error:
            log.error("could not close the sweep's MLflow run: %s", error)
    STATE.sweep_dir = None
