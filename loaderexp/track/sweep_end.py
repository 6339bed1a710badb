"""A sweep's end: its report (table, recommendation, plot), the pick confirmed side by side, the export for the
user's training, the summary with the addresses to look at it, and its MLflow parent run closed."""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from loaderexp.result import metrics as M
from loaderexp.result import Status, write_whole

log = logging.getLogger("loaderexp")

EXPORT_DIR = "export"  # the recommendation as files for the user's training (report.export)
UNCONFIRMED = "the sweep ended before its pick was confirmed side by side; the recommendation above is unconfirmed."


@dataclass
class SweepState:
    """One sweep as the launching process knows it (track.sweep sets it up, :func:`finish_sweep` ends it)."""

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
    unwritten: list = field(default_factory=list)  # (folder, result) of jobs whose result.json could not be written


def finish_sweep(state: SweepState, status: Status, interrupted: str = "") -> bool:
    """Report the sweep (table, recommendation, plot) and close its parent run; on Ctrl-C (``interrupted``: the
    signal) as KILLED.  A report that cannot be written (a full disk) is said, and the parent still closes.
    Returns whether any job measured (or was predicted); a sweep where none did closes its parent as FAILED."""
    if state.sweep_dir is None:
        return True
    from loaderexp.report import load_results, write_report

    items = load_results(state.sweep_dir)
    items += [item for item in state.unwritten if item[0] not in {folder for folder, _ in items}]  # MLflow has them
    _forecast_memory(items)
    measured = any(r.status in (Status.FINISHED, Status.PREDICTED) for _, r in items)
    status = Status.FAILED if status is Status.FINISHED and not measured else status
    confirmation = _confirmed(state, items) if status is Status.FINISHED else None
    elapsed = time.time() - state.started
    artifacts: list[Path] = []
    try:
        text, plot = write_report(items, state.sweep_dir, confirmation=confirmation)
        artifacts += [plot] if plot is not None else []
    except OSError as error:
        from loaderexp.report import summary_table

        text = summary_table(items)
        log.error("could not write the sweep's report into %s: %s", state.sweep_dir, error)
    if interrupted and measured:
        text += f"\nInterrupted ({interrupted}): {UNCONFIRMED}"
    exported = _exported(state, items, confirmation)
    summary = _summary(state, text, items, elapsed, exported)
    print(f"\n{summary}", file=sys.stdout, flush=True)
    try:
        write_whole(state.sweep_dir / "summary.txt", summary + "\n")
        artifacts.insert(0, state.sweep_dir / "summary.txt")
    except OSError as error:
        log.error("could not write %s: %s", state.sweep_dir / "summary.txt", error)
    if not measured:
        print(f"loaderexp: error: no job measured: {len(items)} of {state.total} jobs recorded, none finished "
              "(each one's error is in the table above)", file=sys.stderr, flush=True)
    _close_parent(state, status, artifacts, items, elapsed, exported)
    state.sweep_dir = None
    return measured


def _forecast_memory(items: list) -> None:
    """The predicted settings' memory, forecast from the measured runs', kept in their result.json."""
    from loaderexp.report.forecast import fill_forecasts

    changed = {id(r) for r in fill_forecasts([r for _, r in items])}
    for folder, result in items:
        if id(result) in changed:
            try:
                result.write(folder)
            except OSError as error:
                log.error("could not keep the memory forecast in %s: %s", folder, error)


def _exported(state: SweepState, items: list, confirmation: Any) -> list[Path]:
    """The recommendation as files for the user's training, in <sweep>/export (none without a pick)."""
    from loaderexp.report import export

    try:
        source = str(state.sweep_dir) + (f" (MLflow parent run {state.parent_run_id})" if state.parent_run_id else "")
        return export(items, state.sweep_dir / EXPORT_DIR, source, confirmation)
    except OSError as error:
        log.error("could not export the recommendation into %s: %s", state.sweep_dir / EXPORT_DIR, error)
        return []


def _confirmed(state: SweepState, items: list) -> Any:
    """The pick confirmed side by side, kept in the sweep folder (confirmation.json); None when there is none."""
    from loaderexp.report.confirm import CONFIRMATION_FILE
    from loaderexp.track.confirm import confirm_pick

    try:
        confirmation = confirm_pick(items, state.confirm_s)
    except Exception as error:  # noqa: BLE001 - the sweep's own answer stands
        log.error("could not confirm the pick side by side: %s: %s", type(error).__name__, error)
        return None
    if confirmation is not None:
        try:
            write_whole(state.sweep_dir / CONFIRMATION_FILE, json.dumps(confirmation.to_dict(), indent=2, default=str))
        except OSError as error:
            log.error("could not write %s: %s", CONFIRMATION_FILE, error)
    return confirmation


def _summary(state: SweepState, text: str, items: list, elapsed: float, exported: Sequence[Path] = ()) -> str:
    """The table, how many jobs were recorded where, and the addresses to look at them."""
    from loaderexp.track.tracker import chart_axis

    counted = f"{len(items)} trials (at most {state.total})" if state.search else f"{len(items)} of {state.total} jobs"
    lines = [text, f"{counted} recorded in {elapsed:.1f} s; results in {state.sweep_dir}"]
    if state.unwritten:
        held = ", ".join(f"{folder.name} (MLflow run {r.run_id})" if r.logged else folder.name
                         for folder, r in state.unwritten)
        lines.append(f"{len(state.unwritten)} of them could not be written to the sweep folder: {held}")
    if exported:
        lines.append(f"the recommendation for your training: {state.sweep_dir / EXPORT_DIR}/ "
                     f"({', '.join(sorted({p.name for p in exported}))})")
    if state.tracker is not None:
        lines.append(f"MLflow runs table: {state.tracker.runs_url()}")
        if state.parent_run_id is not None:
            try:
                table = state.tracker.table_url(state.parent_run_id, state.swept_keys)
                lines.append(f"MLflow this sweep: {table}\n  (its jobs, fastest first: throughput, spread, memory, "
                             "ceiling, the swept knobs)")
                charts = state.tracker.charts_url(state.parent_run_id, state.swept_keys)
                lines.append(f"MLflow charts:     {charts}\n  (throughput and memory against "
                             f"{chart_axis(state.swept_keys)}, a point per configuration)")
            except Exception as error:  # the store went away: the table's address still helps
                log.error("could not store the sweep's chart view in MLflow: %s", error)
        if not state.tracker.uri.startswith("http"):
            lines.append(f"(start the UI with `mlflow ui --backend-store-uri {shlex.quote(state.tracker.uri)}`)")
        unlogged = [r for _, r in items if not r.logged and r.status is not Status.PREDICTED]
        if unlogged:
            lines.append(f"{len(unlogged)} result(s) did not reach MLflow; import them with: "
                         f"python -m loaderexp.sync {shlex.quote(str(state.sweep_dir))}")
    return "\n".join(line for line in lines if line)


def _close_parent(state: SweepState, status: str, artifacts: list[Path], items: list, elapsed: float,
                  exported: Sequence[Path] = ()) -> None:
    """The parent's artifacts (summary, plot, stage profiles), its figures (each stage's cost among them)."""
    if state.tracker is None or state.parent_run_id is None:
        return
    from loaderexp.report import stage_metrics
    from loaderexp.report.confirm import CONFIRMATION_FILE

    try:
        confirmation = state.sweep_dir / CONFIRMATION_FILE
        confirmed = [confirmation] if confirmation.is_file() else []
        for artifact in [*artifacts, *confirmed, *sorted((state.sweep_dir / "profiles").glob("*.json"))]:
            state.tracker.log_file(state.parent_run_id, artifact)
        for path in exported:  # under export/, as in the sweep folder (a node type's own subfolder kept)
            where = path.parent.relative_to(state.sweep_dir).as_posix()
            state.tracker.log_file(state.parent_run_id, path, where)
        metrics = {M.JOBS_RECORDED: len(items), M.SWEEP_SECONDS: elapsed, **stage_metrics([r for _, r in items])}
        state.tracker.log(state.parent_run_id, metrics=metrics, tags={"loaderexp.runs_url": state.tracker.runs_url()})
        state.tracker.end_run(state.parent_run_id, status)
    except Exception as error:
        log.error("could not close the sweep's MLflow run: %s", error)
