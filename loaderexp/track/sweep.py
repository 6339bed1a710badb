"""Hydra callback that makes a multirun one unit: its size up front, one MLflow parent run, a summary.

The sweep's identity (its parent run, its size, the keys it sweeps) is written to the sweep
folder's record (``sweep.json``) before the first job, and each job reads it from there
(:func:`identity`): a launcher that runs jobs in other processes or on other hosts (Ray,
SLURM, submitit) keeps them in the sweep.  The tracking store is checked before the first job: an
unreachable store stops the sweep before anything is measured, instead of losing every result.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from loaderexp.config import composed_spec
from loaderexp.config.schema import TrackingConfig
from loaderexp.result import metrics as M
from loaderexp.result import redact_uri

log = logging.getLogger("loaderexp")


@dataclass
class SweepState:
    total: Optional[int] = None  # a search's: at most this many
    search: bool = False
    swept_keys: tuple[str, ...] = ()  # the grid's axes: they name each job's run
    parent_run_id: Optional[str] = None
    tracker: Any = None
    sweep_dir: Optional[Path] = None
    started: float = 0.0


STATE = SweepState()
SWEEP_RECORD = "sweep.json"  # the sweep's MLflow parent run, found again by resume=true


def sweep_overrides(config: DictConfig) -> list[str]:
    """The sweep's overrides as BasicSweeper sees them: hydra.sweeper.params, then the command line."""
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    return [f"{key}={value}" for key, value in params.items()] + list(config.hydra.overrides.task)


def grid(config: DictConfig) -> tuple[int, tuple[str, ...]]:
    """The number of jobs, counted as BasicSweeper will (a search: at most its max_trials), and the
    keys that are swept."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    if is_search(config):  # its space is checked here, before the sweep's parent run exists
        from loaderexp.search.space import checked_space

        return int(config.hydra.sweeper.max_trials), checked_space(sweep_overrides(config), config).keys
    parsed = OverridesParser.create().parse_overrides(sweep_overrides(config))
    batches = BasicSweeper.split_arguments(parsed, None)
    swept = tuple(dict.fromkeys(o.get_key_element() for o in parsed if o.is_sweep_override()))
    return sum(len(batch) for batch in batches), swept


def is_search(config: DictConfig) -> bool:
    return "loaderexp_search" in str(OmegaConf.select(config, "hydra.sweeper._target_") or "")


def identity(sweep_dir: Path) -> SweepState:
    """The sweep a job belongs to: this process's when the launcher runs jobs here, else the one
    its record in the sweep folder describes (an empty state when there is none)."""
    if STATE.sweep_dir is not None and Path(STATE.sweep_dir) == Path(sweep_dir):
        return STATE
    record = Path(sweep_dir) / SWEEP_RECORD
    try:
        saved = json.loads(record.read_text())
    except (OSError, ValueError):
        return SweepState()
    return SweepState(total=saved.get("total"), swept_keys=tuple(saved.get("swept_keys") or ()),
                      parent_run_id=saved.get("parent_run_id"), sweep_dir=Path(sweep_dir))


def refuse_password_in_uri(tracking: TrackingConfig) -> None:
    """A password in tracking.uri would reach the files Hydra writes (multirun.yaml, .hydra/),
    the run's params and every log line that names the store: refuse it before any of them."""
    uri = tracking.uri or ""
    if tracking.backend.value == "mlflow" and urlsplit(uri).password is not None:
        print(f"loaderexp: error: tracking.uri={redact_uri(uri)} carries a password: give it through the "
              "environment (MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN), "
              "which MLflow reads and loaderexp never records", file=sys.stderr)
        raise SystemExit(2)


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_password_in_uri(composed_spec(config).tracking)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Hydra turns a callback's exception into a warning and runs the jobs anyway; a sweep
        # that cannot be set up must not start, so failures leave as SystemExit, which passes.
        try:
            self._start(config)
        except SystemExit:
            raise
        except Exception as error:
            print(f"loaderexp: error: the sweep could not start: {type(error).__name__}: {error}", file=sys.stderr)
            raise SystemExit(2) from error

    def _start(self, config: DictConfig) -> None:
        global STATE
        spec = composed_spec(config)
        refuse_password_in_uri(spec.tracking)
        total, swept = grid(config)
        STATE = SweepState(total=total, swept_keys=swept, sweep_dir=Path(config.hydra.sweep.dir), started=time.time(),
                           search=is_search(config))
        grid_text = " ".join(sweep_overrides(config))
        log.info("%s: %s", f"search of at most {total} trials" if STATE.search else f"sweep of {total} jobs",
                 grid_text or "(defaults)")
        tracking = spec.tracking
        if tracking.backend.value != "mlflow":
            _write_record(tracking)
            return
        from loaderexp.track.tracker import (
            MlflowTracker,
            TrackingUnavailable,
            check_reachable,
        )

        try:
            check_reachable(tracking.uri)
        except TrackingUnavailable as error:
            print(f"loaderexp: error: {error}; the sweep did not start", file=sys.stderr)
            raise SystemExit(2) from error
        STATE.tracker = MlflowTracker(tracking.uri, tracking.experiment)
        from loaderexp.result import machine_facts
        from loaderexp.track.tracker import host_tags

        tags = host_tags(machine_facts())  # where the sweep was launched; each job tags its own host
        tags.update(
            {
                "loaderexp.sweep": "parent",
                "loaderexp.sweep_dir": str(STATE.sweep_dir),
                "loaderexp.command": " ".join(["python -m loaderexp -m", *config.hydra.overrides.task]),
                "loaderexp.grid": grid_text,
                "loaderexp.jobs": str(STATE.total),
            }
        )
        record = STATE.sweep_dir / SWEEP_RECORD
        previous = json.loads(record.read_text()) if spec.resume and record.is_file() else {}
        if previous.get("uri") == tracking.uri and previous.get("experiment") == tracking.experiment:
            # Resuming: the sweep stays one parent run, its new children join the old ones.
            STATE.parent_run_id = previous["parent_run_id"]
            STATE.tracker.client.update_run(STATE.parent_run_id, status="RUNNING")
        else:
            size = f"search, at most {STATE.total} trials" if STATE.search else f"{STATE.total} jobs"
            name = f"sweep {time.strftime('%Y-%m-%d %H:%M:%S')} ({size})"
            STATE.parent_run_id = STATE.tracker.start_run(name, tags)
        _write_record(tracking)
        log.info("MLflow: experiment %r, parent run %s", tracking.experiment, STATE.parent_run_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finish_sweep("FINISHED")


def _write_record(tracking: TrackingConfig) -> None:
    """What each job needs to know of its sweep, wherever the launcher runs it."""
    STATE.sweep_dir.mkdir(parents=True, exist_ok=True)
    (STATE.sweep_dir / SWEEP_RECORD).write_text(json.dumps({
        "uri": tracking.uri, "experiment": tracking.experiment, "parent_run_id": STATE.parent_run_id,
        "total": STATE.total, "swept_keys": list(STATE.swept_keys)}, indent=2))


def finish_sweep(status: str) -> None:
    """Report the sweep (table, recommendation, plot) and close its parent run; also on Ctrl-C, as KILLED."""
    if STATE.sweep_dir is None:
        return
    from loaderexp.report import load_results, write_report
    from loaderexp.track.tracker import chart_axis

    items = load_results(STATE.sweep_dir)
    text, plot = write_report(items, STATE.sweep_dir, title=f"{STATE.sweep_dir}")
    elapsed = time.time() - STATE.started
    counted = f"{len(items)} trials (at most {STATE.total})" if STATE.search else f"{len(items)} of {STATE.total} jobs"
    footer = f"{counted} recorded in {elapsed:.1f} s; results in {STATE.sweep_dir}"
    links = ""
    if STATE.tracker is not None:
        links = f"MLflow runs table: {STATE.tracker.runs_url()}"
        if STATE.parent_run_id is not None:
            try:
                charts = STATE.tracker.charts_url(STATE.parent_run_id, STATE.swept_keys)
                links += (f"\nMLflow charts:     {charts}\n  (throughput and memory against "
                          f"{chart_axis(STATE.swept_keys)}, a point per configuration)")
            except Exception as error:  # the store went away: the table's address still helps
                log.error("could not store the sweep's chart view in MLflow: %s", error)
        if not STATE.tracker.uri.startswith("http"):
            links += f"\n(start the UI with `mlflow ui --backend-store-uri {STATE.tracker.uri}`)"
    unlogged = [r for _, r in items if STATE.tracker is not None and not r.logged]
    if unlogged:
        links += (f"\n{len(unlogged)} result(s) did not reach MLflow; import them with: "
                  f"python -m loaderexp.sync {STATE.sweep_dir}")
    summary = "\n".join(part for part in (text, footer, links) if part)
    print(f"\n{summary}", file=sys.stdout, flush=True)
    (STATE.sweep_dir / "summary.txt").write_text(summary + "\n")
    if STATE.tracker is not None and STATE.parent_run_id is not None:
        try:
            for artifact in (STATE.sweep_dir / "summary.txt", plot):
                if artifact is not None:
                    STATE.tracker.log_file(STATE.parent_run_id, artifact)
            STATE.tracker.log(STATE.parent_run_id, metrics={M.JOBS_RECORDED: len(items), M.SWEEP_SECONDS: elapsed},
                              tags={"loaderexp.runs_url": STATE.tracker.runs_url()})
            STATE.tracker.end_run(STATE.parent_run_id, status)
        except Exception as error:
            log.error("could not close the sweep's MLflow run: %s", error)
    STATE.sweep_dir = None
