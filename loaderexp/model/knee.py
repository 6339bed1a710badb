"""The knee of the curve, and the grid cut short at it (``bench.predict``): measure the predicted knee, its
neighbours and the fewest workers, predict the rest, and measure on where a measurement disagrees with the model
(unless the model, refitted on the runs, agrees with them all: :func:`refit`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional

from loaderexp.model.ceiling import CeilingModel

AGREE = 0.10  # a measurement this close to the prediction confirms the model


@dataclass(frozen=True)
class Plan:
    knee: int
    candidates: tuple[int, ...]  # the knee, its neighbours and the fewest workers in the grid: always measured
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
    # The fewest workers of the grid too: it checks the curve's rising part (a sample per worker's time), which the
    # knee's neighbours near the plateau cannot.  A profile read beside two burning cores put one worker at half its
    # rate and the knee at 4; 3, 4 and 5 agreed with the plateau, and 1 and 2 were predicted, not measured: the
    # sweep picked 3 where 2 did as well.
    slope = min((v for v in values if v > 0), default=knee)
    return Plan(knee, tuple(sorted({slope, *neighbours(values, knee)})), not off, off)


def refit(model: CeilingModel, measured: dict[int, float], spreads: Optional[dict[int, float]] = None
          ) -> Optional[CeilingModel]:
    """The model refitted on the measured runs where the profile's short loops met another moment of the host, or
    None: first its one fitted factor, what the usable cores do together, from the runs at or past the cores
    (their median) instead of the profile's all-cores loop of about 0.4 s (x0.80 once: every setting past the knee
    predicted 20-26% low, so a 0..16 grid measured 16 of 17); else, when the whole profile met it (beside two
    burning cores every figure read x0.65-0.72), one scale for every predicted rate, from the runs' median ratio;
    else, when only its one-worker loop met it (0.31 ms a sample where the runs' CPU said 0.20: every setting with
    workers predicted 35-38% low, the loop without workers within 1%), one scale for the rates with workers.
    Only when checked: each run the fit rests on is predicted by the fit on the others (two runs at least past the
    cores; three for a scale) and every measured run agrees with the refitted model, all by :func:`misses`."""
    spreads, m = spreads or {}, model.machine
    past = sorted(w for w in measured if w * m.ranks >= m.cores)
    ratios = {w: rate / model.predict(w) for w, rate in measured.items()}
    with_workers = sorted(w for w in measured if w > 0)
    tries = [(past, lambda on: model.with_machine(all_cores_rate=statistics.median(measured[w] for w in on))),
             (sorted(measured) if len(measured) >= 3 else [],
              lambda on: model.with_machine(moment=statistics.median(ratios[w] for w in on))),
             (with_workers if len(with_workers) >= 3 else [],
              lambda on: model.with_machine(workers_moment=statistics.median(ratios[w] for w in on)))]
    for on, fitted in tries:
        if len(on) < 2 or any(misses(fitted([o for o in on if o != w]).predict(w), measured[w], spreads.get(w, 0.0))
                              for w in on):
            continue
        refitted = fitted(on)
        if not any(misses(refitted.predict(w), rate, spreads.get(w, 0.0)) for w, rate in measured.items()):
            return refitted
    return None


def knee_seeds(model: Optional[CeilingModel], values: list[int], tolerance: float) -> list[int]:
    """The worker counts a search tries first: the predicted knee and its neighbours, the knee first."""
    if model is None or not values:
        return []
    knee = model.knee(values, tolerance)
    return [knee, *(v for v in neighbours(values, knee) if v != knee)]
