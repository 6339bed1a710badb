"""``python -m loaderexp``: a thin Hydra entry point around :func:`loaderexp.runner.run`."""

from __future__ import annotations

import atexit
import functools
import gc
import logging
import signal
import sys
import warnings
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.types import RunMode
from omegaconf import DictConfig

from hydra_plugins.loaderexp_grid.grid_sweeper import GridSweeper
from hydra_plugins.loaderexp_search.search_sweeper import SearchSweeper
from loaderexp.config import Config, ConfigError, composed_spec, config_dir
from loaderexp.config.folders import FolderUnwritable
from loaderexp.result import RunResult, Status
from loaderexp.runner import JobContext, run
from loaderexp.track.versions import composed_from

# At exit the interpreter clears every module, and each clearing can run the cycle collector over
# every object torch, MLflow and SQLAlchemy made: seconds after the summary is printed.  Freezing
# them first leaves those objects to plain reference counting (atexit runs before the clearing).
atexit.register(gc.freeze)
# Hydra finds plugins by listing the hydra_plugins package, which cannot see into an editable
# install (`pip install -e .` serves it through an import hook): register loaderexp's sweepers here.
Plugins.instance().register(GridSweeper)
Plugins.instance().register(SearchSweeper)
# conf/hydra/launcher/ray.yaml keeps the plugin's name and so is checked against the plugin's schema
# (what we want); Hydra warns that matching by name is deprecated.
warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/ray' is validated against ConfigStore schema")


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def main(cfg: DictConfig) -> Optional[RunResult]:
    from loaderexp.track import sweep

    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    # The sweep's identity, from this process or, under a launcher that runs jobs elsewhere, its record.
    sweep_state = sweep.identity(Path(hydra_cfg.sweep.dir)) if multirun else sweep.SweepState()
    job = JobContext(
        output_dir=Path(hydra_cfg.runtime.output_dir),
        index=hydra_cfg.job.num if multirun else None,
        total=sweep_state.total,
        overrides=list(hydra_cfg.overrides.task),
        parent_run_id=sweep_state.parent_run_id,
        name_keys=sweep_state.swept_keys,
        config_sources=tuple(composed_from(hydra_cfg.runtime.config_sources)),
    )
    if not multirun:
        try:
            spec = composed_spec(cfg)
        except ConfigError as error:  # nothing to record: the run's own settings cannot be read
            print(f"loaderexp: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        _check_store(spec)
    _log_file_errors_once()
    result = run(cfg, job)  # Ctrl-C inside it: the run is recorded as KILLED, then entry() ends the sweep
    if multirun:
        return result  # a sweeper that searches reads it (hydra/sweeper=search)
    from loaderexp.report import summary_table

    print(summary_table([(job.output_dir, result)]))
    if not result.finished:
        for line in (result.error or "unknown error").splitlines():
            print(f"loaderexp: error: {line}", file=sys.stderr)
        raise SystemExit(1)


def _check_store(spec: Config) -> None:
    """Say so before measuring, not after: a bad experiment name, or a store that cannot be used (a sweep
    checks the same before its first job)."""
    from loaderexp.track.stores import TrackingUnavailable
    from loaderexp.track.tracker import check_store

    try:
        check_store(spec)
    except (ConfigError, TrackingUnavailable) as error:
        print(f"loaderexp: error: {error}; nothing was measured", file=sys.stderr)
        raise SystemExit(2) from error


def _log_file_errors_once() -> None:
    """Hydra's job log file, on a full disk, fails every line with a 15-line "--- Logging error ---": said once
    instead, and the log goes on to the console."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handleError = functools.partial(_drop_log_file, root, handler)


def _drop_log_file(root: logging.Logger, handler: logging.FileHandler, record: logging.LogRecord) -> None:
    root.removeHandler(handler)
    error = sys.exc_info()[1]
    why = error.strerror if isinstance(error, OSError) and error.strerror else error
    print(f"loaderexp: error: the job's log file {handler.baseFilename} could not be written ({why}); its log goes "
          "to the console only", file=sys.stderr)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def entry() -> None:
    """The command: config files that are not YAML are refused in a line each, then Hydra composes.

    Ctrl-C, SIGTERM (a scheduler, `kill`) and SIGHUP (a closed terminal, a lost ssh session) end it at once,
    wherever they land (in a job, between jobs, in the final confirmation): the current run is recorded as
    KILLED, the sweep's parent too, its table is printed with the pick unconfirmed, and it exits 130."""
    from loaderexp.config.yaml_files import folders_of, yaml_problems

    problems = yaml_problems(folders_of(sys.argv[1:]))
    for problem in problems:
        print(f"loaderexp: error: {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(2)
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        main()
    except KeyboardInterrupt as interrupt:
        _interrupted(interrupt)
    except FolderUnwritable as stopped:  # a full disk: the jobs after this one could not be recorded either
        from loaderexp.track import sweep
        from loaderexp.track.sweep_end import finish_sweep

        print(f"loaderexp: error: {stopped}; the sweep stops here", file=sys.stderr, flush=True)
        finish_sweep(sweep.STATE, Status.FAILED)
        raise SystemExit(1) from None
    finally:
        for sig, handler in previous.items():  # loaderexp.sweep() runs this in the user's own process
            signal.signal(sig, handler)


def _interrupted(interrupt: KeyboardInterrupt) -> None:
    from loaderexp.execute.faults import interrupted_by
    from loaderexp.execute.interrupts import INTERRUPTS
    from loaderexp.track import sweep
    from loaderexp.track.sweep_end import finish_sweep

    why = interrupted_by(interrupt)
    ignored = {sig: signal.signal(sig, signal.SIG_IGN) for sig in INTERRUPTS}
    try:  # a second Ctrl-C while the table is written would leave the parent RUNNING
        finish_sweep(sweep.STATE, Status.KILLED, interrupted=why)
    finally:
        for sig, handler in ignored.items():
            signal.signal(sig, handler)
    print(f"loaderexp: interrupted ({why}); finished runs are kept", file=sys.stderr)
    raise SystemExit(130)


if __name__ == "__main__":
    entry()
