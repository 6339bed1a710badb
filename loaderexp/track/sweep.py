"""Hydra callback that makes a multirun one unit: its size up front, one MLflow parent run, a summary.

The sweep's identity (its parent run, its size, the keys it sweeps) is written to the sweep
folder's record (``sweep.json``) before the first job, and each job reads it from there
(:func:`identity`): a launcher that runs jobs in other processes or on other hosts (Ray,
SLURM, submitit) keeps them in the sweep.  The tracking store is checked before the first job: an
unreachable store stops the sweep before anything is measured, instead of losing every result.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from loaderexp.config import ConfigError, check_tracking, composed_spec
from loaderexp.config.schema import TrackingConfig
from loaderexp.result import RESULT_FILE, RESUME, RunResult, Status
from loaderexp.result.sweep_record import SweepRecord
from loaderexp.track.launchers import check_launcher
from loaderexp.track.stores import refuse_credentials_in_uri
from loaderexp.track.sweep_end import SweepState, finish_sweep
from loaderexp.track.sweep_folder import claim_or_exit

log = logging.getLogger("loaderexp")


STATE = SweepState()


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


def with_the_folders_jobs(sweep_dir: Path, total: int, swept: tuple[str, ...], jobs: list[list[str]], resume: bool
                          ) -> tuple[int, tuple[str, ...], list[list[str]]]:
    """A grid resumed into a folder whose sweep had other jobs adds to them: the count, the axes and the jobs are the
    folder's and this command's together (a different grid resumed there said "8 of 6 jobs recorded")."""
    previous = SweepRecord.read(sweep_dir) if resume and jobs else None
    if previous is None or not previous.jobs:
        return total, swept, jobs

    def same(job: list[str]) -> list[str]:  # how it was run (resume=true, hydra's own keys) is not which job it is
        return sorted(o for o in job if not o.startswith((f"{RESUME}=", "hydra.", "hydra/")))

    before = [same(job) for job in previous.jobs]
    added = [job for job in jobs if same(job) not in before]
    if added:
        log.info("resume: the folder's sweep had %d jobs; this command adds %d of its %d: %d in all",
                 len(previous.jobs), len(added), len(jobs), len(previous.jobs) + len(added))
    every = [*previous.jobs, *added]
    return len(every), tuple(dict.fromkeys([*previous.swept_keys, *swept])), every


def is_search(config: DictConfig) -> bool:
    return "loaderexp_search" in str(OmegaConf.select(config, "hydra.sweeper._target_") or "")


def identity(sweep_dir: Path) -> SweepState:
    """The sweep a job belongs to: this process's when the launcher runs jobs here, else the one
    its record in the sweep folder describes (an empty state when there is none)."""
    if STATE.sweep_dir is not None and Path(STATE.sweep_dir) == Path(sweep_dir):
        return STATE
    saved = SweepRecord.read(sweep_dir)
    if saved is None:
        return SweepState()
    return SweepState(total=saved.total, swept_keys=tuple(saved.swept_keys), parent_run_id=saved.parent_run_id,
                      sweep_dir=Path(sweep_dir))


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            spec = composed_spec(config)
        except ConfigError:
            return  # the run says it in one line (loaderexp.__main__.main)
        refuse_credentials_in_uri(spec.tracking)

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
        total, swept, jobs = with_the_folders_jobs(Path(config.hydra.sweep.dir), *grid(config), spec.resume)
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
        from loaderexp.track.stores import TrackingUnavailable
        from loaderexp.track.tracker import open_tracker

        try:
            STATE.tracker = open_tracker(tracking.uri, tracking.experiment)
        except TrackingUnavailable as error:
            print(f"loaderexp: error: {error}; the sweep did not start", file=sys.stderr)
            raise SystemExit(2) from error
        STATE.parent_run_id = _open_parent(spec, config, grid_text)
        _write_record(tracking)
        log.info("MLflow: experiment %r, parent run %s", tracking.experiment, STATE.parent_run_id)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """A result its job could not write (a full disk) still counts in the sweep's summary: MLflow has it."""
        result, folder = getattr(job_return, "return_value", None), Path(config.hydra.runtime.output_dir)
        if isinstance(result, RunResult) and result.info.not_written and not (folder / RESULT_FILE).is_file():
            STATE.unwritten.append((folder, result))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not finish_sweep(STATE, Status.FINISHED):
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
    previous = SweepRecord.read(STATE.sweep_dir) if spec.resume else None
    if previous is not None and (previous.uri, previous.experiment) == (tracking.uri, tracking.experiment) \
            and previous.parent_run_id:
        # Resuming: the sweep stays one parent run, its new children join the old ones.
        parent = previous.parent_run_id
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
    SweepRecord(tracking.uri, tracking.experiment, STATE.parent_run_id, STATE.total, list(STATE.swept_keys),
                STATE.jobs or []).write(STATE.sweep_dir)
