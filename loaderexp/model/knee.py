"""The knee of the curve, and the grid cut short at it (``bench.predict``): measure the predicted knee and its
neighbours, predict the rest, and measure on where a measurement disagrees with the model (unless the model,
refitted on the runs past the cores, agrees with them all: :func:`refit`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional

from loaderexp.model.ceiling import CeilingModel

AGREE = 0.10  # a measurement this close to the prediction confirms the model


@dataclass(frozen=True)
class Plan:
    knee: int
    candidates: tuple[int, ...]  # the knee and its neighbours in the grid: always measured
    trusted: bool  # every measurement so far agrees with the model
    disagreeing: tuple[int, ...]  # worker counts whose measurement the model missed

    def measure(self, workers: int, measured: dict[int, float]) -> bool:
        """Whether a job at ``workers`` is measured (else its figure is the model's)."""
        if workers in self.candidates or not self.trusted:
            return True
        if workers < self.knee:
            return False  # below the knee: slower by the model, which every measurement so far confirms
        # Past the knee's neighbour: predicted no faster, once the knee and its neighbours confirmed it.
        return not all(c in measured for c in self.candidates)


def misses(predicted: float, measured: float, spread: float = 0.0, agree: float = AGREE) -> bool:
    """Whether a measurement refutes the model: the prediction is further from it than ``agree`` plus half the
    windows' own spread (IQR/median).  A run whose windows disagree among themselves by 38% cannot show a
    prediction 18% off wrong (a quickstart on a noisy host did just that at 1 worker), and on a 0..16 grid one
    such reading sent 14 predicted settings back to measuring; windows that agree keep the 10%."""
    return measured > 0 and abs(predicted / measured - 1) > agree + max(spread, 0.0) / 2


def neighbours(values: list[int], value: int) -> tuple[int, ...]:
    ordered = sorted(set(values))
    at = ordered.index(value)
    return tuple(ordered[max(at - 1, 0): at + 2])


def plan(model: CeilingModel, values: list[int], measured: dict[int, float], tolerance: float,
         spreads: Optional[dict[int, float]] = None) -> Plan:
    """What the model says of a num_workers grid, given the rates measured so far (workers -> samples/s) and their
    windows' spreads (workers -> IQR/median; none: windows that agree)."""
    knee = model.knee(values, tolerance)
    spreads = spreads or {}
    off = tuple(w for w, rate in sorted(measured.items()) if misses(model.predict(w), rate, spreads.get(w, 0.0)))
    return Plan(knee, neighbours(values, knee), not off, off)


def refit(model: CeilingModel, measured: dict[int, float], spreads: Optional[dict[int, float]] = None
          ) -> Optional[CeilingModel]:
    """The model with its one fitted factor, what the usable cores do together, taken from the measured runs at or
    past the cores (their median) instead of the profile's loop of about 0.4 s, which a slow moment of the host
    reads low (x0.80 once: every setting past the knee predicted 20-26% low, so a 0..16 grid measured 16 of 17).
    Only when checked: each of those runs is predicted from the others' fit (two runs at least), and every other
    measured run agrees with the refitted model, all by :func:`misses`; else None."""
    spreads, m = spreads or {}, model.machine
    past = sorted(w for w in measured if w * m.ranks >= m.cores)
    if len(past) < 2:
        return None

    def fitted(on: list[int]) -> CeilingModel:
        return model.with_machine(all_cores_rate=statistics.median(measured[w] for w in on))

    if any(misses(fitted([o for o in past if o != w]).predict(w), measured[w], spreads.get(w, 0.0)) for w in past):
        return None
    refitted = fitted(past)
    if any(misses(refitted.predict(w), rate, spreads.get(w, 0.0)) for w, rate in measured.items()):
        return None
    return refitted


def knee_seeds(model: Optional[CeilingModel], values: list[int], tolerance: float) -> list[int]:
    """The worker counts a search tries first: the predicted knee and its neighbours, the knee first."""
    if model is None or not values:
        return []
    knee = model.knee(values, tolerance)
    return [knee, *(v for v in neighbours(values, knee) if v != knee)]
