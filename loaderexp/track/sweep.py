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
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from loaderexp.config import ConfigError, check_tracking, composed_spec
from loaderexp.config.schema import TrackingConfig
from loaderexp.result import metrics as M
from loaderexp.result import Status
from loaderexp.execute.predict import SWEEP_RECORD  # the jobs read it back: execute owns its name
from loaderexp.track.launchers import check_launcher
from loaderexp.track.stores import refuse_credentials_in_uri
from loaderexp.track.sweep_folder import claim_or_exit

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
    confirm_s: float = 0.0  # bench.confirm_s: the pick against its rivals side by side at the end
    jobs: Optional[list] = None  # each job's overrides, a grid's (bench.predict plans over them)
    folder_lock: Optional[int] = None  # held while the sweep writes its folder (track.sweep_folder)


STATE = SweepState()
EXPORT_DIR = "export"  # the recommendation as files for the user's training (report.export)


def sweep_overrides(config: DictConfig) -> list[str]:
    """The sweep's overrides as BasicSweeper sees them: hydra.sweeper.params, then the command line."""
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    return [f"{key}={value}" for key, value in params.items()] + list(config.hydra.overrides.task)


def grid(config: DictConfig) -> tuple[int, tuple[str, ...], list[list[str]]]:
    """The number of jobs, counted as BasicSweeper will (a search: at most its max_trials), the keys that
    are swept, and each job's overrides (a grid's: what ``bench.predict`` plans over)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    if is_search(config):  # its space is checked here, before the sweep's parent run exists
        from loaderexp.search.space import checked_space

        return int(config.hydra.sweeper.max_trials), checked_space(sweep_overrides(config), config).keys, []
    parsed = OverridesParser.create().parse_overrides(sweep_overrides(config))
    jobs = [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    swept = tuple(dict.fromkeys(o.get_key_element() for o in parsed if o.is_sweep_override()))
    return len(jobs), swept, jobs


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


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_credentials_in_uri(composed_spec(config).tracking)

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
        refuse_credentials_in_uri(spec.tracking)
        check_launcher(config)
        try:
            check_tracking(spec)
        except ConfigError as error:
            print(f"loaderexp: error: {error}; the sweep did not start", file=sys.stderr)
            raise SystemExit(2) from error
        total, swept, jobs = grid(config)
        STATE = SweepState(total=total, swept_keys=swept, sweep_dir=Path(config.hydra.sweep.dir), started=time.time(),
                           search=is_search(config), confirm_s=spec.bench.confirm_s, jobs=jobs)
        STATE.folder_lock = claim_or_exit(STATE.sweep_dir, spec.resume)
        grid_text = " ".join(sweep_overrides(config))
        log.info("%s: %s", f"search of at most {total} trials" if STATE.search else f"sweep of {total} jobs",
                 grid_text or "(defaults)")
        tracking = spec.tracking
        if tracking.backend.value != "mlflow":
            _write_record(tracking)
            return
        from loaderexp.track.stores import TrackingUnavailable, check_reachable
        from loaderexp.track.tracker import MlflowTracker

        try:
            check_reachable(tracking.uri)
        except TrackingUnavailable as error:
            print(f"loaderexp: error: {error}; the sweep did not start", file=sys.stderr)
            raise SystemExit(2) from error
        STATE.tracker = MlflowTracker(tracking.uri, tracking.experiment)
        STATE.parent_run_id = _open_parent(spec, config, grid_text)
        _write_record(tracking)
        log.info("MLflow: experiment %r, parent run %s", tracking.experiment, STATE.parent_run_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not finish_sweep(Status.FINISHED):
            raise SystemExit(1)  # no job measured: a script or CI that runs the sweep must see it failed


def _open_parent(spec: Any, config: DictConfig, grid_text: str) -> str:
    """The sweep's parent run: a new one, or resuming, the one its record names, renamed for its grid
    as it is now, with the runs a killed sweep left RUNNING closed as KILLED."""
    from loaderexp.result import machine_facts
    from loaderexp.track.tracker import close_stale_runs, host_tags

    tracker, tracking = STATE.tracker, spec.tracking
    size = f"search, at most {STATE.total} trials" if STATE.search else f"{STATE.total} jobs"
    described = {"loaderexp.command": " ".join(["python -m loaderexp -m", *config.hydra.overrides.task]),
                 "loaderexp.grid": grid_text, "loaderexp.jobs": str(STATE.total)}
    record = STATE.sweep_dir / SWEEP_RECORD
    previous = json.loads(record.read_text()) if spec.resume and record.is_file() else {}
    if previous.get("uri") == tracking.uri and previous.get("experiment") == tracking.experiment:
        # Resuming: the sweep stays one parent run, its new children join the old ones.
        parent = previous["parent_run_id"]
        closed = close_stale_runs(tracker, parent)
        if closed:
            log.info("resume: %d run(s) a killed sweep left RUNNING are now KILLED", closed)
        started = tracker.client.get_run(parent).data.tags.get("mlflow.runName", "sweep").split(" (")[0]
        tracker.client.update_run(parent, status=Status.RUNNING.value, name=f"{started} ({size}, resumed)")
        tracker.log(parent, tags=described)
        return parent
    tags = {**host_tags(machine_facts()), "loaderexp.sweep": "parent", "loaderexp.sweep_dir": str(STATE.sweep_dir),
            **described}  # the host: where the sweep was launched; each job tags its own
    return tracker.start_run(f"sweep {time.strftime('%Y-%m-%d %H:%M:%S')} ({size})", tags)


def _write_record(tracking: TrackingConfig) -> None:
    """What each job needs to know of its sweep, wherever the launcher runs it."""
    STATE.sweep_dir.mkdir(parents=True, exist_ok=True)
    (STATE.sweep_dir / SWEEP_RECORD).write_text(json.dumps({
        "uri": tracking.uri, "experiment": tracking.experiment, "parent_run_id": STATE.parent_run_id,
        "total": STATE.total, "swept_keys": list(STATE.swept_keys), "jobs": STATE.jobs or []}, indent=2))


def finish_sweep(status: Status) -> bool:
    """Report the sweep (table, recommendation, plot) and close its parent run; also on Ctrl-C, as KILLED.
    A report that cannot be written (a full disk) is said, and the parent still closes.  Returns whether any
    job measured (or was predicted); a sweep where none did closes its parent as FAILED."""
    if STATE.sweep_dir is None:
        return True
    from loaderexp.report import load_results, write_report

    items = load_results(STATE.sweep_dir)
    measured = any(r.status in (Status.FINISHED, Status.PREDICTED) for _, r in items)
    status = Status.FAILED if status is Status.FINISHED and not measured else status
    confirmation = _confirmed(items) if status is Status.FINISHED else None
    elapsed = time.time() - STATE.started
    artifacts: list[Path] = []
    try:
        text, plot = write_report(items, STATE.sweep_dir, title=f"{STATE.sweep_dir}", confirmation=confirmation)
        artifacts += [plot] if plot is not None else []
    except OSError as error:
        from loaderexp.report import summary_table

        text = summary_table(items)
        log.error("could not write the sweep's report into %s: %s", STATE.sweep_dir, error)
    exported = _exported(items, confirmation)
    summary = _summary(text, items, elapsed, exported)
    print(f"\n{summary}", file=sys.stdout, flush=True)
    try:
        (STATE.sweep_dir / "summary.txt").write_text(summary + "\n")
        artifacts.insert(0, STATE.sweep_dir / "summary.txt")
    except OSError as error:
        log.error("could not write %s: %s", STATE.sweep_dir / "summary.txt", error)
    if not measured:
        print(f"loaderexp: error: no job measured: {len(items)} of {STATE.total} jobs recorded, none finished "
              "(each one's error is in the table above)", file=sys.stderr, flush=True)
    _close_parent(status, artifacts, items, elapsed, exported)
    STATE.sweep_dir = None
    return measured


def _exported(items: list, confirmation: Any) -> list[Path]:
    """The recommendation as files for the user's training, in <sweep>/export (none without a pick)."""
    from loaderexp.report import export

    try:
        source = str(STATE.sweep_dir) + (f" (MLflow parent run {STATE.parent_run_id})" if STATE.parent_run_id else "")
        return export(items, STATE.sweep_dir / EXPORT_DIR, source, confirmation)
    except OSError as error:
        log.error("could not export the recommendation into %s: %s", STATE.sweep_dir / EXPORT_DIR, error)
        return []


def _confirmed(items: list) -> Any:
    """The pick confirmed side by side, kept in the sweep folder (confirmation.json); None when there is none."""
    from loaderexp.report.confirm import CONFIRMATION_FILE
    from loaderexp.track.confirm import confirm_pick

    try:
        confirmation = confirm_pick(items, STATE.confirm_s)
    except Exception as error:  # noqa: BLE001 - the sweep's own answer stands
        log.error("could not confirm the pick side by side: %s: %s", type(error).__name__, error)
        return None
    if confirmation is not None:
        try:
            (STATE.sweep_dir / CONFIRMATION_FILE).write_text(json.dumps(confirmation.to_dict(), indent=2, default=str))
        except OSError as error:
            log.error("could not write %s: %s", CONFIRMATION_FILE, error)
    return confirmation


def _summary(text: str, items: list, elapsed: float, exported: Sequence[Path] = ()) -> str:
    """The table, how many jobs were recorded where, and the addresses to look at them."""
    from loaderexp.track.tracker import chart_axis

    counted = f"{len(items)} trials (at most {STATE.total})" if STATE.search else f"{len(items)} of {STATE.total} jobs"
    lines = [text, f"{counted} recorded in {elapsed:.1f} s; results in {STATE.sweep_dir}"]
    if exported:
        lines.append(f"the recommendation for your training: {STATE.sweep_dir / EXPORT_DIR}/ "
                     f"({', '.join(sorted({p.name for p in exported}))})")
    if STATE.tracker is not None:
        lines.append(f"MLflow runs table: {STATE.tracker.runs_url()}")
        if STATE.parent_run_id is not None:
            try:
                charts = STATE.tracker.charts_url(STATE.parent_run_id, STATE.swept_keys)
                lines.append(f"MLflow charts:     {charts}\n  (throughput and memory against "
                             f"{chart_axis(STATE.swept_keys)}, a point per configuration)")
            except Exception as error:  # the store went away: the table's address still helps
                log.error("could not store the sweep's chart view in MLflow: %s", error)
        if not STATE.tracker.uri.startswith("http"):
            lines.append(f"(start the UI with `mlflow ui --backend-store-uri {shlex.quote(STATE.tracker.uri)}`)")
        unlogged = [r for _, r in items if not r.logged and r.status is not Status.PREDICTED]
        if unlogged:
            lines.append(f"{len(unlogged)} result(s) did not reach MLflow; import them with: "
                         f"python -m loaderexp.sync {shlex.quote(str(STATE.sweep_dir))}")
    return "\n".join(line for line in lines if line)


def _close_parent(status: str, artifacts: list[Path], items: list, elapsed: float,
                  exported: Sequence[Path] = ()) -> None:
    """The parent's artifacts (summary, plot, stage profiles), its figures (each stage's cost among them)."""
    if STATE.tracker is None or STATE.parent_run_id is None:
        return
    from loaderexp.report import stage_metrics
    from loaderexp.report.confirm import CONFIRMATION_FILE

    try:
        confirmation = STATE.sweep_dir / CONFIRMATION_FILE
        confirmed = [confirmation] if confirmation.is_file() else []
        for artifact in [*artifacts, *confirmed, *sorted((STATE.sweep_dir / "profiles").glob("*.json"))]:
            STATE.tracker.log_file(STATE.parent_run_id, artifact)
        for path in exported:  # under export/, as in the sweep folder (a node type's own subfolder kept)
            where = path.parent.relative_to(STATE.sweep_dir).as_posix()
            STATE.tracker.log_file(STATE.parent_run_id, path, where)
        metrics = {M.JOBS_RECORDED: len(items), M.SWEEP_SECONDS: elapsed, **stage_metrics([r for _, r in items])}
        STATE.tracker.log(STATE.parent_run_id, metrics=metrics, tags={"loaderexp.runs_url": STATE.tracker.runs_url()})
        STATE.tracker.end_run(STATE.parent_run_id, status)
    except Exception as error:
        log.error("could not close the sweep's MLflow run: %s", error)
