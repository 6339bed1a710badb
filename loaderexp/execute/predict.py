"""``bench.predict=true``: a num_workers grid cut short.  Each job of the grid asks, before it measures,
whether the sweep already knows its answer: the sweep's stage profile predicts the curve, the knee, its
neighbours and the fewest workers are measured, and a job the model has covered (below the knee, or past it
once those confirmed the model) takes the model's figure instead, saying so (status PREDICTED).  Any
measurement the model misses by more than 10% beyond half its windows' spread (:func:`loaderexp.model.knee.misses`)
sends every later job back to measuring, unless the model refitted on the runs agrees with every measurement
(:func:`loaderexp.model.knee.refit`: the profile's short loops met another moment of the host).

A job needs only its config and its sweep folder: the grid is in the sweep's record (``sweep.json``,
written by :mod:`loaderexp.track.sweep`), the profile and the measured runs in its folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from loaderexp.config.schema import Config
from loaderexp.execute.profiling import ProfileStore, profile_key
from loaderexp.harness.stages import StageProfile
from loaderexp.model.ceiling import CeilingModel, Machine
from loaderexp.model.knee import plan, refit
from loaderexp.result import NUM_WORKERS, RESULT_FILE, TOLERANCE, RunResult, Status
from loaderexp.result import metrics as M
from loaderexp.result.ceiling import machine_of, refit_metrics, refit_of_machine, refit_words
from loaderexp.result.sweep_record import SweepRecord



def _workers_and_rest(overrides: list[str]) -> tuple[Optional[int], tuple[str, ...]]:
    workers, rest = None, []
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key == NUM_WORKERS:
            workers = int(value)
        else:
            rest.append(override)
    return workers, tuple(sorted(rest))


def grid_values(sweep_dir: Path, overrides: list[str]) -> list[int]:
    """The worker counts of the grid's jobs that differ from this one in num_workers only."""
    record = SweepRecord.read(sweep_dir)
    jobs = record.jobs if record is not None else []
    _, mine = _workers_and_rest(overrides)
    found = [_workers_and_rest(job) for job in jobs]
    return sorted({w for w, rest in found if w is not None and rest == mine})


def measured_neighbours(sweep_dir: Path, job: RunResult) -> list[RunResult]:
    found = []
    for path in sweep_dir.glob(f"*/{RESULT_FILE}"):
        try:
            result = RunResult.read(path)
        except (OSError, ValueError, TypeError):
            continue
        if result.finished and result.profile and result.setting_but_workers == job.setting_but_workers:
            found.append(result)
    return found


def _loader_only(spec: Config, result: RunResult) -> bool:
    """Nothing but the loader counts: no step, no CUDA copy (their times come from a measured run)."""
    return spec.step._target_ is None and not result.host.cuda_available


def _unmeasured_machine(spec: Config, result: RunResult, profile: StageProfile) -> Machine:
    """The machine as the model sees it before any run of the group was measured."""
    return Machine(cores=float(result.host.cpus_usable or profile.cores),
                   batch_size=spec.loader.batch_size or profile.batch_size, ranks=spec.dist.nproc_per_node)


def refit_text(refitted: CeilingModel, profile: StageProfile) -> str:
    """The refit a predicted job took, in the words the report uses, with the profile's figure it replaced."""
    m, words = refitted.machine, refit_words(**refit_of_machine(refitted.machine))
    replaced = ""
    if m.all_cores_rate:
        replaced = f"; the profile's all-cores loop read {profile.all_cores_rate or 0:,.0f}"
    return (f"the model refitted on the runs: {words}{replaced}; each run it rests on predicted by the others "
            "within that")


def predicted_instead(spec: Config, result: RunResult, sweep_dir: Path, overrides: list[str],
                      profile_now: Callable[[], Optional[StageProfile]]) -> bool:
    """Fill ``result`` with the model's figure and return True when this job need not be measured.  Without
    a profile yet, ``profile_now()`` runs the profiling pass alone (kept for the jobs after)."""
    workers = spec.loader.num_workers
    values = grid_values(sweep_dir, overrides)
    if workers not in values:
        return False
    store, key = ProfileStore(sweep_dir), profile_key(spec, result.host)
    profile = store.get(key)
    runs = measured_neighbours(sweep_dir, result)
    if profile is None:
        profile = profile_now() if _loader_only(spec, result) else None
        if profile is None:
            return False  # this job measures (and profiles)
        store.put(key, profile)
    if not runs and not _loader_only(spec, result):
        return False
    # the measured run nearest this job's count for its own figures (a step's time, the copy), all of them for what a
    # sample costs (as the report's model takes them): not whichever the folder listed last
    nearest = min(runs, key=lambda r: (abs(r.workers - workers), r.workers), default=None)
    machine = machine_of(nearest, profile, runs) if nearest else _unmeasured_machine(spec, result, profile)
    model = CeilingModel(profile, machine)
    measured = {r.workers: r.metrics[M.THROUGHPUT] for r in runs if M.THROUGHPUT in r.metrics}
    spreads = {r.workers: r.metrics.get(M.THROUGHPUT_IQR, 0.0) for r in runs}
    decided = plan(model, values, measured, TOLERANCE, spreads)
    refitted = None if decided.trusted else refit(model, measured, spreads)
    if refitted is not None:
        model, decided = refitted, plan(refitted, values, measured, TOLERANCE, spreads)
    if decided.measure(workers, measured):
        return False
    ceiling = model.ceiling()
    result.status, result.profile = Status.PREDICTED, profile
    result.metrics = {M.PREDICTED: round(model.predict(workers), 1), M.CEILING: round(ceiling.rate, 1)}
    agreed = (f"measured at {', '.join(map(str, sorted(measured)))}, all within 10% of the model (beyond half "
              "their windows' spread)" if measured else
              "none measured yet: the knee, its neighbours and the fewest workers will be")
    if refitted is not None:
        result.metrics.update(refit_metrics(refitted.machine))
        agreed += "; " + refit_text(refitted, profile)
    result.info.predicted = (f"bench.predict: not measured; the model predicts {model.predict(workers):,.0f} "
                             f"samples/s (knee at num_workers={decided.knee}; {agreed})")
    return True

