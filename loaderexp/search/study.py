"""The Optuna side of a search: its sampler, each dimension as a distribution, and what a study knows.

Optuna is imported here only, when a search runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Optional

from loaderexp.result import RunResult
from loaderexp.search.space import FloatDimension, IntDimension, SpaceError


@dataclass
class TrialNote:
    """What loaderexp keeps on each Optuna trial it launched (its user attributes), so a resumed study knows
    its jobs: the job's number, what it measured (the effective configuration's key) and its rate."""

    job: int
    key: str
    rate: Optional[float] = None  # None: the trial failed or is still running

    def save(self, trial: Any) -> None:
        for name, value in asdict(self).items():
            if value is not None:
                trial.set_user_attr(name, value)

    @classmethod
    def of(cls, trial: Any) -> Optional[TrialNote]:
        """The note on ``trial``; None for a trial loaderexp never launched (rejected, or repeated)."""
        names = {each.name for each in fields(cls)}
        saved = {name: value for name, value in trial.user_attrs.items() if name in names}
        return cls(**saved) if {"job", "key"} <= saved.keys() else None


@dataclass
class SearchState:
    """What the search knows: the trials it ran (a resumed study's too) and how its suggestions went."""

    results: list[RunResult]
    measured: dict[str, float]  # a trial's effective configuration -> its rate
    job_index: int  # the next trial's job number
    launched: int = 0
    pruned: int = 0
    repeated: int = 0  # suggestions that measure the same as a trial already run
    rejected: int = 0  # suggestions the validation refuses

    @classmethod
    def resumed(cls, study: Any, sweep_dir: Path) -> "SearchState":
        notes = [note for note in map(TrialNote.of, study.trials) if note is not None]
        return cls(results=[RunResult.read(p) for p in sorted(sweep_dir.glob("*/result.json"))],
                   measured={note.key: note.rate for note in notes if note.rate is not None},
                   job_index=max((note.job for note in notes), default=-1) + 1, launched=len(notes))

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), int)
                and f.name != "job_index"}


def make_sampler(name: str, seed: int) -> Any:
    import optuna

    if name == "tpe":
        # Few random start-up trials: the seeds already span the worker counts.
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=5, multivariate=True)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=5)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise SpaceError(f"hydra.sweeper.sampler={name}: valid samplers: tpe, gp, random")


def distribution(dimension: Any) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(dimension, IntDimension):
        return IntDistribution(dimension.low, dimension.high, step=dimension.step)
    if isinstance(dimension, FloatDimension):
        return FloatDistribution(dimension.low, dimension.high, log=dimension.log)
    return CategoricalDistribution(list(dimension.choices))
