"""The search: trials asked of an Optuna study, launched one at a time, judged by the grid's rule.

Each trial is a job like a grid's (its own run under the sweep's MLflow parent, its own folder),
launched through whatever launcher the sweep uses.  What the search adds:

- A model-guided sampler (TPE by default) over the declared space, seeded with the worker count of
  the CPUs (its trial profiles the stages) and then the knee the ceiling model predicts, with its
  neighbours (without a profile: 0, half and all of the CPUs, where the plateau usually starts).
- Pruning: a trial runs with ``bench.stop_below`` = the best rate so far x (1 - prune_margin);
  a run behind that after its first window stops there (it cannot be within the tolerance of the
  best), is recorded as pruned and costs a fraction of a full job.  Only the first window counts:
  it starts an epoch, while a later one may cross an epoch's end and pay the workers' restart.  Each window's rate is the
  trial's intermediate value in the study.
- No wasted trials: a configuration the validation rejects, or one that measures the same as a
  trial already run (prefetch_factor without workers, a repeat suggestion), is told to the study
  without launching anything.
- Stopping: at ``max_trials``, when the space is exhausted, or when ``patience`` trials in a row
  neither beat the best by more than the measured noise nor change the recommendation.  Before
  stopping, the pick's neighbours are measured if they were not: its other values of each other
  knob at the same num_workers, then one worker fewer (the grid's rule wants the fewest workers
  close to the best, where a model-guided search looks least).  A neighbour that changes the
  pick starts the count again.
- The study lives in the sweep folder (``search.db``), so ``resume=true`` continues it.

The recommendation is the grid's (:func:`loaderexp.report.recommend`) over the trials that ran to
the end.  Optuna is imported only when a search runs (here and in :mod:`.study`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, open_dict

from loaderexp.config import ConfigError, composed_spec, plain, without_inapplicable
from loaderexp.loading.registry import checked
from loaderexp.report import recommend
from loaderexp.result import RunResult, usable_cpus
from loaderexp.result import metrics as M
from loaderexp.model.knee import knee_seeds
from loaderexp.result.ceiling import model_of
from loaderexp.search.study import SearchState, TrialNote, distribution, make_sampler
from loaderexp.search.space import WORKERS, FloatDimension, IntDimension, Space, SpaceError, checked_space

log = logging.getLogger("loaderexp")
STUDY_FILE = "search.db"
MAX_IDLE_ASKS = 200  # suggestions in a row that launch nothing (rejected or repeated): the space is spent


class Search:
    def __init__(self, max_trials: int, patience: int, sampler: str, seed: int, prune: bool, prune_margin: float,
                 tolerance: float, params: Optional[DictConfig]):
        self.max_trials, self.patience, self.sampler_name, self.seed = max_trials, patience, sampler, seed
        self.prune, self.prune_margin, self.tolerance = prune, prune_margin, tolerance
        self.params = params
        self.config: Optional[DictConfig] = None
        self.hydra_context: Any = None
        self.launcher: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            config=config, hydra_context=hydra_context, task_function=task_function)

    # -- the space ---------------------------------------------------------------------------------

    def space(self, arguments: list[str]) -> Space:
        params = [f"{k}={v}" for k, v in (self.params or {}).items()]
        return checked_space(params + list(arguments), self.config)

    def _effective(self, overrides: list[str]) -> str:
        """What a trial would measure, as the run sees it: identical keys measure the same thing.
        Raises ConfigError for a configuration the run would refuse."""
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(cfg):
            del cfg.hydra  # a job's own fields (hydra.job.num) are not set until it is launched
        spec = composed_spec(cfg)
        checked(spec, cuda_available=True, cpus=usable_cpus(), targets=False)  # CUDA: the job knows and says
        loader, _ = without_inapplicable(spec.loader)
        # How the search runs (its floor, a resumed study) is not what a trial measures.
        spec = dataclasses.replace(spec, loader=loader, resume=False,
                                   bench=dataclasses.replace(spec.bench, stop_below=None))
        return json.dumps(plain(spec), sort_keys=True, default=str)

    # -- the loop ----------------------------------------------------------------------------------

    def sweep(self, arguments: list[str]) -> None:
        import optuna

        assert self.config is not None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        space = self.space(arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        study_path = sweep_dir / STUDY_FILE
        if study_path.exists() and not composed_spec(self.config).resume:
            raise SpaceError(f"{sweep_dir} already holds a search ({STUDY_FILE}): resume=true continues it")
        study = optuna.create_study(storage=f"sqlite:///{study_path}", study_name="loaderexp", direction="maximize",
                                    sampler=self._sampler(), load_if_exists=True)
        if not study.trials:
            for seed in self._seeds(space):
                study.enqueue_trial(seed)
        state = SearchState.resumed(study, sweep_dir)
        log.info("search over %s (%s points), at most %d trials, sampler %s; study %s", ", ".join(space.keys),
                 space.size() or "continuous", self.max_trials, self.sampler_name, study_path)
        reason = self._search(study, space, state)
        self._write_summary(sweep_dir, state, reason)

    def _search(self, study: Any, space: Space, state: SearchState) -> str:
        """Ask, launch and tell until a stopping rule holds; returns which."""
        distributions = {key: distribution(dim) for key, dim in space.dimensions.items()}
        idle = 0  # suggestions in a row that launched nothing
        stalled = 0  # trials in a row that changed neither the best nor the pick
        knee_seeded = not self._profiled()
        while state.launched < self.max_trials:
            if not knee_seeded and state.results:
                knee_seeded = self._seed_knee(study, space, state)
            if stalled >= self.patience:
                probe = self._local_probe(state.results, space, state.measured)
                if probe is None:
                    return f"converged ({self.patience} trials without a change beyond the noise)"
                study.enqueue_trial(probe)
            if idle >= MAX_IDLE_ASKS or (space.size() and len(state.measured) >= space.size()):
                return "the space is exhausted"
            trial = study.ask(distributions)
            moved = self._trial(study, trial, space.overrides(trial.params), state)
            idle = idle + 1 if moved is None else 0
            if moved is not None:
                stalled = 0 if moved else stalled + 1
        return "max_trials"

    def _trial(self, study: Any, trial: Any, overrides: list[str], state: SearchState) -> Optional[bool]:
        """One suggestion: told to the study without running (rejected, or measured already: None), or
        launched; then whether it moved the answer."""
        from optuna.trial import TrialState

        try:
            key = self._effective(overrides)
        except ConfigError as error:
            study.tell(trial, state=TrialState.FAIL)
            state.rejected += 1
            log.info("search: %s rejected without running: %s", " ".join(overrides), error.problems[0])
            return None
        if key in state.measured:  # the same measurement again: tell the study what it gave
            study.tell(trial, state.measured[key])
            state.repeated += 1
            return None
        before = self._standing(state.results)
        result = self._launch(trial, overrides, state.job_index, before[0])
        note = TrialNote(state.job_index, key)
        note.save(trial)
        state.job_index += 1
        state.launched += 1
        if result is None or not result.finished:
            study.tell(trial, state=TrialState.FAIL)
            return False
        rate = result.metrics[M.THROUGHPUT]
        note.rate = rate
        note.save(trial)
        state.measured[key] = rate
        state.results.append(result)
        for step, value in enumerate(result.info.repeat_rates or []):
            trial.report(value, step)
        if result.metrics.get(M.PRUNED):
            study.tell(trial, state=TrialState.PRUNED)
            state.pruned += 1
        else:
            study.tell(trial, rate)
        return self._changed(before, self._standing(state.results))

    def _launch(self, trial: Any, overrides: list[str], job_index: int, best: Optional[RunResult]
                ) -> Optional[RunResult]:
        job = list(overrides)
        if self.prune and best is not None:
            floor = best.metrics[M.THROUGHPUT] * (1 - self.prune_margin)
            job.append(f"bench.stop_below={floor:.1f}")
        returned = self.launcher.launch([job], initial_job_idx=job_index)[0]
        try:
            value = returned.return_value
        except Exception as error:  # the job raised (not a measured failure: those are results)
            log.error("search: trial %d failed: %s", trial.number, error)
            return None
        return value if isinstance(value, RunResult) else None

    def _standing(self, results: list[RunResult]) -> tuple[Optional[RunResult], Optional[RunResult]]:
        """(the best run, the recommended run) over the trials that ran to the end."""
        rec = recommend(results, self.tolerance)  # it leaves out pruned and failed trials itself
        return (rec.best, rec.result) if rec else (None, None)

    def _changed(self, before: tuple, after: tuple) -> bool:
        """Did the trial move the answer: a best higher by more than the noise, or a pick with another
        num_workers?  (Two settings the measurements cannot tell apart trade places as they come:
        that is not progress.)"""
        (best_before, pick_before), (best_after, pick_after) = before, after
        if best_before is None:
            return best_after is not None
        if pick_after.params.get(WORKERS) != pick_before.params.get(WORKERS):
            return True
        old, new = best_before.metrics[M.THROUGHPUT], best_after.metrics[M.THROUGHPUT]
        noise = max(self.tolerance, best_before.metrics.get(M.THROUGHPUT_IQR, 0.0))
        return new > old * (1 + noise)

    def _local_probe(self, results: list[RunResult], space: Space, measured: dict[str, float]
                     ) -> Optional[dict[str, Any]]:
        """A neighbour of the pick not measured yet, or None: first its other values of each other
        dimension at the same num_workers (the model may have left them out), then one worker fewer
        (the grid's rule wants the fewest workers close to the best, where a model looks least)."""
        _, pick = self._standing(results)
        if pick is None:
            return None
        here = {key: pick.params.get(key) for key in space.dimensions}
        for probe in [*self._neighbours(here, space), self._fewer_workers(here, space)]:
            if probe is None:
                continue
            try:
                if self._effective(space.overrides(probe)) not in measured:
                    return probe
            except ConfigError:
                continue
        return None

    @staticmethod
    def _neighbours(here: dict[str, Any], space: Space) -> list[dict[str, Any]]:
        found = []
        for key, dimension in space.dimensions.items():
            if key == WORKERS or isinstance(dimension, FloatDimension):
                continue
            if isinstance(dimension, IntDimension):
                values = [v for v in (here[key] - dimension.step, here[key] + dimension.step) if v in dimension.values]
            else:
                values = [v for v in dimension.values if v != here[key]]
            found += [{**here, key: value} for value in values]
        return found

    @staticmethod
    def _fewer_workers(here: dict[str, Any], space: Space) -> Optional[dict[str, Any]]:
        dimension = space.dimensions.get(WORKERS)
        if not isinstance(dimension, IntDimension) or here.get(WORKERS) is None:
            return None
        fewer = here[WORKERS] - dimension.step
        return {**here, WORKERS: fewer} if fewer >= dimension.low else None

    def _profiled(self) -> bool:
        return composed_spec(self.config).bench.profile_s > 0

    def _seed_knee(self, study: Any, space: Space, state: SearchState) -> bool:
        """Once a trial has profiled the stages: the predicted knee and its neighbours next, the knee first."""
        dimension = space.dimensions.get(WORKERS)
        model = next((m for m in map(model_of, state.results) if m is not None), None)
        if not isinstance(dimension, IntDimension) or model is None:
            return model is not None or not isinstance(dimension, IntDimension)
        done = {r.params.get(WORKERS) for r in state.results}
        seeds = [w for w in knee_seeds(model, list(dimension.values), self.tolerance) if w not in done]
        log.info("search: the stage profile predicts the knee at num_workers=%s; trying %s next",
                 knee_seeds(model, list(dimension.values), self.tolerance)[:1], seeds)
        for workers in seeds:
            study.enqueue_trial({WORKERS: workers})
        return True

    def _seeds(self, space: Space) -> list[dict[str, Any]]:
        """With a profiling pass: all the usable CPUs first (that trial profiles the stages, and the knee it
        predicts comes next); without: num_workers at 0, half and all of them, the curve's landmarks."""
        dimension = space.dimensions.get(WORKERS)
        if not isinstance(dimension, IntDimension):
            return []
        cpus = max(int(usable_cpus()), 1)  # a quota of 1.5 cores still seeds whole workers
        wanted = (cpus,) if self._profiled() else (cpus, max(cpus // 2, 1), dimension.low)
        values = dimension.values
        picks = dict.fromkeys(min(values, key=lambda v: abs(v - w)) for w in wanted)
        return [{WORKERS: v} for v in picks]

    def _sampler(self) -> Any:
        return make_sampler(self.sampler_name, self.seed)

    def _write_summary(self, sweep_dir: Path, state: SearchState, reason: str) -> None:
        best, pick = self._standing(state.results)
        summary = {**state.counts(), "stopped": reason, "max_trials": self.max_trials,
                   "best": best.params if best else None, "pick": pick.params if pick else None}
        (sweep_dir / "search.json").write_text(json.dumps(summary, indent=2, default=str))
        log.info("search: %d trials run (%d pruned), %d repeated and %d rejected suggestions told to the study "
                 "without running; stopped: %s", state.launched, state.pruned, state.repeated, state.rejected, reason)
