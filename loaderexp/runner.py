"""``run(cfg)``: one job from a composed config to result.json and an MLflow run.

A job never takes the sweep down with it: a bad setting, a dataset that raises or a crashed
worker becomes a FAILED run with its error, written locally first and then to MLflow.  Only
Ctrl-C propagates, after the current run is recorded as KILLED.

The recipe: the config becomes the typed spec, the host's facts are read, the run opens in MLflow,
the spec is checked, the host is held while the job is measured (in a killable process, or in
this one), and the measurement is named (:mod:`loaderexp.result.figures`) and recorded.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import psutil
from omegaconf import DictConfig, OmegaConf

from loaderexp.config import (
    RESOLVED_CONFIG,
    Config,
    ConfigError,
    apply_python_path,
    check_tracking,
    composed_spec,
    config_dir,
    config_hash,
    plain,
    resolve_auto_transform,
    spec_params,
    without_inapplicable,
)
from loaderexp.config.validation import changed_knobs
from loaderexp.execute.faults import explain, interrupted_by
from loaderexp.execute.dispatch import host_facts, measure_spec, profile_only
from loaderexp.execute.host_lock import exclusive_host
from loaderexp.execute.predict import predicted_instead
from loaderexp.execute.profiling import ProfileStore, profile_key
from loaderexp.execute.progress import JobProgress
from loaderexp.loading.registry import checked
from loaderexp.result import RESULT_FILE, RunFacts, RunResult, Status, machine_facts, write_whole
from loaderexp.result.ceiling import about_this_run, ceiling_figures
from loaderexp.result.figures import figures

log = logging.getLogger("loaderexp")
SHARED_HOST_WARNING = ("bench.shared_host_ok=true: other measurements may have run on this host at the same time; "
                       "its figures can be low by an unknown amount")


@dataclass
class JobContext:
    """Where a job sits: its folder, its place in a sweep, and the sweep's parent run."""

    output_dir: Path
    index: Optional[int] = None  # 0-based position in the sweep
    total: Optional[int] = None  # jobs in the sweep, when known
    overrides: list[str] = field(default_factory=list)
    parent_run_id: Optional[str] = None
    name_keys: tuple[str, ...] = ()  # the sweep's axes: a run is named by its values of these
    config_sources: tuple[tuple[str, str], ...] = ()  # (folder, provider) it was composed from; () loaderexp's conf/

    @property
    def label(self) -> str:
        if self.index is None:
            return "run"
        return f"job {self.index + 1}/{self.total}" if self.total else f"job {self.index + 1}"

    @property
    def sweep_dir(self) -> Path:
        """The folder the sweep's jobs share (a single run's own)."""
        return self.output_dir.parent if self.index is not None else self.output_dir

    @property
    def swept(self) -> list[str]:
        """This job's values of the sweep's axes, as overrides (a single run: all of its overrides)."""
        return [o for o in self.overrides if o.split("=", 1)[0] in self.name_keys] if self.name_keys else self.overrides



def run(cfg: DictConfig, job: Optional[JobContext] = None) -> RunResult:
    """Measure the configured loader once (``bench.repeats`` times) and record the result."""
    job = job or JobContext(output_dir=Path.cwd() / "outputs" / "runs" / time.strftime("%Y-%m-%d_%H-%M-%S"))
    spec = composed_spec(cfg)
    result = RunResult(status=Status.RUNNING, params=spec_params(spec), host=machine_facts())
    tracker = run_id = None
    reused = False
    try:
        result.host = host_facts(spec.bench.isolate)
        spec = resolve_auto_transform(spec)
        result.params = spec_params(spec)
        job.output_dir.mkdir(parents=True, exist_ok=True)
        write_whole(job.output_dir / RESOLVED_CONFIG, OmegaConf.to_yaml(OmegaConf.create(plain(spec))))
        result.config_hash = config_hash(result.params, result.host)
        if spec.resume:
            done = already_measured(job.output_dir.parent, result.config_hash)
            if done is not None:
                log.info("%s: already measured in %s, skipped (resume=true)", job.label, done.parent)
                reused, result = True, RunResult.read(done)
                return result
        _record_config_sources(result, job)  # not for a run resumed from its folder: that one keeps its own
        checked = None
        if spec.bench.predict and job.index is not None:
            checked = _checked(spec, result, job)
            if predicted_instead(checked, result, job.sweep_dir, job.overrides, lambda: profile_only(checked, job.label)):
                log.info("%s: predicted, not measured (bench.predict)", job.label)
                return result
        check_tracking(spec)  # before the store is opened: a bad name is the config's fault, not the store's
        tracker, run_id = _open_run(spec, result, job)
        spec = windows_before_a_race(checked or _checked(spec, result, job), job)
        _measure_into(result, spec, job)
    except KeyboardInterrupt as interrupt:
        result.status, result.error = Status.KILLED, f"interrupted ({interrupted_by(interrupt)})"
        raise
    except Exception as error:  # a job's failure is its own: record it, let the sweep go on
        result.status = Status.FAILED
        if isinstance(error, ConfigError) or getattr(error, "kind", None) == ConfigError.__name__:
            result.error = str(error)  # a ConfigError from the measuring process keeps its own words
        else:
            _describe_failure(result, error)
    finally:
        if not reused:
            # The runner's own memory after each job: it must stay flat across a long sweep.
            result.info.runner_rss_mb = round(psutil.Process().memory_info().rss / 2**20, 1)
            _record(result, job, tracker, run_id)
    return result


def _record_config_sources(result: RunResult, job: JobContext) -> None:
    """Each config folder's commit and whether it was dirty; the uncommitted changes in config.diff."""
    from loaderexp.track.versions import DIFF_FILE, config_diff, inspect_sources

    sources = inspect_sources(job.config_sources or ((str(config_dir()), "main"),))
    result.info.config_sources = [s.to_dict() for s in sources]
    result.info.config_dirty = any(s.dirty for s in sources)
    diff = config_diff(sources)
    if diff:
        write_whole(job.output_dir / DIFF_FILE, diff)


def windows_before_a_race(spec: Config, job: JobContext) -> Config:
    """A sweep's job when the sweep races its pick (``bench.confirm_s``): windows stop at ``bench.raced_max_repeats``;
    the race tells close settings apart (a noisy moment had kept a 0-worker job to 10 windows, 9.4 s of 29)."""
    bench = spec.bench
    if job.index is None or (job.total or 0) < 2 or bench.confirm_s <= 0 or bench.repeats \
            or bench.raced_max_repeats is None:
        return spec
    most = max(bench.min_repeats, min(bench.max_repeats, bench.raced_max_repeats))
    return dataclasses.replace(spec, bench=dataclasses.replace(bench, max_repeats=most))


def _checked(spec: Config, result: RunResult, job: JobContext) -> Config:
    """The spec as it will be measured: its python_path applied, validated (the imports its targets need
    happen in the measuring process), and the knobs that need workers left out without them."""
    apply_python_path(spec)
    host = result.host
    result.warnings = checked(spec, bool(host.cuda_available), host.cpus_usable or 1, gpus=host.gpu_count,
                              targets=not spec.bench.isolate)
    result.info.loader_changed = changed_knobs(spec.loader)
    loader, not_applied = without_inapplicable(spec.loader)
    if not_applied:
        result.info.not_applied = not_applied
    for warning in result.warnings:
        log.warning("%s: %s", job.label, warning)
    log.info("%s: %s", job.label, " ".join(job.swept) or "defaults")
    if spec.bench.shared_host_ok:
        result.warnings.append(SHARED_HOST_WARNING)
    return dataclasses.replace(spec, loader=loader)


def _measure_into(result: RunResult, spec: Config, job: JobContext) -> None:
    """Hold the host, measure, and name what was measured into ``result``."""
    progress = JobProgress(job.label)
    host_use = RunFacts()
    profiles, key = ProfileStore(job.sweep_dir), profile_key(spec, result.host)
    known = profiles.get(key)
    try:
        with exclusive_host(job.label, spec.bench.shared_host_ok, host_use, spec.bench.host_wait_s):
            measured = measure_spec(spec, progress, profile=known is None)
    finally:
        progress.close()
        result.info.update(host_use)  # a failed job keeps its interval too
    if measured.profile is not None:
        profiles.put(key, measured.profile)
    measured.profile = measured.profile or known
    named = figures(measured)
    result.metrics = named.metrics
    result.info.update(named.info)
    result.warnings += named.warnings
    result.status = Status.FINISHED
    result.profile = measured.profile
    ceiling_metrics, ceiling_info = ceiling_figures(result)
    result.metrics.update(ceiling_metrics)
    result.info.update(ceiling_info)
    failure = ceiling_info.model_failure
    if failure and (known is None or about_this_run(failure)):  # the profile's own: said once, by the job that made it
        log.warning("%s: the ceiling model is off: %s", job.label, failure)
    _write_batches(job.output_dir, named.batches_csv, result, job.label)


def _describe_failure(result: RunResult, error: Exception) -> None:
    """The error, its traceback, and a known fault's likely cause and remedy."""
    kind = getattr(error, "kind", type(error).__name__)  # a child's error keeps its own class name
    result.error = f"{kind}: {error}"
    result.info.traceback = getattr(error, "details", "") or traceback.format_exc(limit=20)
    # torch reports a dead worker either as "killed by signal: X" or, when the pipe breaks
    # first, as "exited unexpectedly" with the signal only in the chained traceback: surface it.
    signal_line = re.search(r"DataLoader worker \(pid \d+\) is killed by signal: [^.\n]+", result.info.traceback)
    if signal_line and signal_line.group(0) not in result.error:
        result.error += f" ({signal_line.group(0)})"
    known = explain(f"{result.error}\n{result.info.traceback}")
    if known is not None:
        result.info.fault, result.info.remedy = known
        result.error += f"\nlikely cause: {known[0]}; {known[1]}"


def already_measured(sweep_dir: Path, wanted_hash: str) -> Optional[Path]:
    """A FINISHED result.json of the same configuration and host in this sweep's folder."""
    for path in sorted(sweep_dir.glob(f"*/{RESULT_FILE}")):
        try:
            previous = RunResult.read(path)
        except (OSError, ValueError):
            continue  # a half-written or foreign file is not a measurement
        if previous.finished and previous.config_hash == wanted_hash:
            return path
    return None


def _open_run(spec: Config, result: RunResult, job: JobContext) -> tuple[Any, Optional[str]]:
    """The job's MLflow run, or (None, None) when the store fails: the measurement goes on locally."""
    tracking = spec.tracking
    if tracking.backend.value == "none":
        return None, None
    from loaderexp.track.tracker import MlflowTracker, opening_tags, run_name

    try:
        tracker = MlflowTracker(tracking.uri, tracking.experiment)
        tags = opening_tags(result, job.output_dir, job.overrides, str(config_dir().parent))
        run_id = tracker.start_run(run_name(job.swept), tags, job.parent_run_id)
    except Exception as error:
        log.error("%s: MLflow store %s unavailable (%s); measuring anyway: result.json keeps the result and "
                  "`python -m loaderexp.sync %s` imports it later", job.label, tracking.uri,
                  str(error).splitlines()[0] if str(error) else type(error).__name__, job.output_dir.parent)
        return None, None
    result.run_id = run_id
    return tracker, run_id


def _write_batches(folder: Path, table: str, result: RunResult, label: str) -> None:
    """batches.csv beside result.json; a full disk costs the file, not the measurement (it is recorded)."""
    path = folder / "batches.csv"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_whole(path, table)
    except OSError as error:
        _not_written(result, path, error, label)


def _not_written(result: RunResult, path: Path, error: OSError, label: str) -> None:
    reason = f"{path.name} could not be written to {path} ({error.strerror or error})"
    log.error("%s: %s; the measurement still goes to MLflow", label, reason)
    result.info.not_written = [*(result.info.not_written or []), reason]
    result.warnings.append(reason)


def _write_result(result: RunResult, job: JobContext) -> Optional[Path]:
    """result.json, or None when it cannot be written (a full disk): the reason is recorded instead."""
    try:
        return result.write(job.output_dir)
    except OSError as error:
        _not_written(result, job.output_dir / RESULT_FILE, error, job.label)
        return None


def _record(result: RunResult, job: JobContext, tracker: Any, run_id: Optional[str]) -> None:
    """result.json first (it survives a broken tracking store), then MLflow; a failed write of either
    loses neither the measurement nor the sweep."""
    path = _write_result(result, job)
    if result.status is Status.FAILED:
        log.error("%s failed: %s", job.label, result.error)
    if tracker is None or run_id is None:
        return
    from loaderexp.track.tracker import log_result

    try:
        log_result(tracker, run_id, result, job.output_dir)
    except Exception as error:  # the store went away: result.json still holds everything
        log.error("%s: could not log to MLflow (%s); the result is in %s, `python -m loaderexp.sync %s` "
                  "imports it later", job.label, error, path, job.output_dir.parent)
        return
    result.logged = True
    if path is not None:
        _write_result(result, job)
