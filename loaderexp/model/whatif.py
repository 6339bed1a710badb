"""What the model predicts for changes nobody has measured yet: a transform operation removed (or moved to
the device, where its own cost is not known), twice the cores, several training processes sharing the node.
Every figure here is a prediction, and says so where it is shown.

A change is the model's ratio (the changed pipeline's prediction over the pipeline's own, at the same setting)
applied to the rate the setting measured: the ratio holds what the costs say, while the model's absolute figure
also holds the moment its short all-cores loop met (a profile whose loop met a slow second put "Scale removed"
18.5% below the pipeline without it; the ratio on the measured rate read +2.6%).  A measured change (the pipeline
without the operation timed in loops of its own) is on the same footing: its loops were timed beside the whole
pipeline's and put on the profile's moment by their ratio (:mod:`loaderexp.harness.profile_lighter`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from loaderexp.model.ceiling import CeilingModel
from loaderexp.model.limits import cores_word

RANK_COUNTS = (2, 4, 8)


MODELLED = 0.5  # an operation's cost subtracted from the pipeline's missed measured pipelines by up to -49%/+43%
# A tenth of a sample's CPU left out barely moves how the cores work together, so the ratio on a measured rate
# keeps the measured rate's spread and the operation's cost error (15% of a tenth): read within 7% in the checks.
ANCHORED, ANCHORED_SHARE = 0.15, 0.10
SCALED = 0.25  # more cores or ranks than were measured: how far a model of them may be off, at least


@dataclass(frozen=True)
class WhatIf:
    change: str  # "Normalize removed, or on the device"
    ceiling_before: float
    ceiling_after: float
    at_workers_before: float  # at the setting's num_workers: the rate it measured (else the model's)
    at_workers_after: float
    binding_after: str
    how: str = ""  # measured (the lighter pipeline's own loops) or modelled, and what it assumes
    uncertainty: float = MODELLED  # relative

    @property
    def ceiling_gain(self) -> float:
        return self.ceiling_after / self.ceiling_before - 1 if self.ceiling_before else 0.0


def _side_by_side_gain(model: CeilingModel, changed: CeilingModel, workers: int) -> tuple[float, str]:
    """How much faster the pipeline without the stage ran than the whole one, side by side, in the profile's loop
    that runs as ``workers`` do: without workers, one worker, or one per core (its lighter figures are the whole
    one's times that ratio); between them, the model's ratio."""
    p, lighter = model.profile, changed.lighter
    if workers <= 0:
        return p.single_wall_s / lighter.single_wall_s, "in a loop without workers beside the whole one's"
    if workers == 1:
        return p.worker_wall_s / lighter.worker_wall_s, "with one worker beside the whole one's"
    if workers >= p.cores and p.all_cores_rate and lighter.all_cores_rate:
        return lighter.all_cores_rate / p.all_cores_rate, f"with {p.cores:g} workers beside the whole one's"
    return changed.predict(workers) / model.predict(workers), "in the model from its loops beside the whole one's"


def _fewest_best(model: CeilingModel, grid: list[int]) -> int:
    """The fewest workers of ``grid`` at the model's best rate (rounded to a sample/s)."""
    return max(grid, key=lambda w: (round(model.predict(w)), -w))


def what_ifs(model: CeilingModel, workers: int, values: list[int], measured: Optional[float] = None) -> list[WhatIf]:
    """Each transform operation left out, twice the cores, and ranks sharing the node, at ``workers`` (and,
    for more cores or ranks, at the best of the grid's ``values``); the modelled ones as the model's ratio on
    ``measured``, the rate the setting measured, when there is one."""
    ceiling, predicted = model.ceiling().rate, model.predict(workers)
    here = measured or predicted
    past = here / ceiling if ceiling else 1.0  # how far past its own ceiling the setting ran
    bounded = past <= 1 + model.uncertainty()  # beyond the bound the model is off there (the report says so)

    def held(after: float, changed: CeilingModel, how: str) -> tuple[float, str]:
        """A modelled change at most its own ceiling (x ``past``): the ratio on the measured rate carries the run's
        moment past what the changed costs allow (2 ranks on 2 cores, 0 workers each: 13,654 samples/s where their
        CPU limit was 12,337).  Not a measured change (its own loops), nor where the model is off."""
        most = changed.ceiling().rate * max(past, 1.0)
        if not bounded or after <= most:
            return after, how
        return most, how + f"; held at its ceiling, where the ratio on the measured rate put {after:,.0f}"

    scale = here / predicted if predicted > 0 else 1.0  # the modelled changes: the model's ratio on the measured rate
    on = "its ratio on the measured rate" if measured else "the model's own rate"
    found = _stage_what_ifs(model, workers, here, scale, on, bool(measured), held)
    cores = model.machine.cores
    more = model.with_machine(cores=2 * cores)
    # Any worker count, not only the sweep's: with 0 (one process per rank, nothing passed between processes) ranks
    # sharing the cores can beat one rank with workers, and a predicted sweep may not have measured 0.
    grid = sorted(set(values) | {0, workers, int(2 * cores), int(4 * cores)})
    best, step = _fewest_best(more, grid), _step_on_the_cores(model)
    after, how = held(more.predict(best) * scale, more,
                      f"modelled at num_workers={best}, the fewest that reach it, {on}: assumes each sample costs what "
                      f"it did here and the cores work together as these did (x{model.efficiency:.2f}){step}")
    found.append(WhatIf(f"twice the cores ({2 * cores:g})", ceiling, more.ceiling().rate, here, after,
                        more.ceiling().name, how, max(SCALED, model.uncertainty())))
    for ranks in RANK_COUNTS:
        if ranks == model.machine.ranks:
            continue
        shared = model.with_machine(ranks=ranks)
        each = _fewest_best(shared, grid)
        after, held_how = held(shared.predict(each) * scale, shared, "")
        sharing = f"{ranks} training processes on this node sharing its {cores:g} {cores_word(cores)}"
        found.append(WhatIf(sharing, ceiling,
                            shared.ceiling().rate, here, after, shared.ceiling().name,
                            f"modelled, {after / ranks:,.0f} samples/s per rank at num_workers={each} each, the "
                            f"fewest that reach it, {on}: assumes the ranks split the cores evenly, each with a main "
                            f"process of its own, and a sample costs what it did here{step}{held_how}",
                            max(SCALED, model.uncertainty())))
    return found


def _step_on_the_cores(model: CeilingModel) -> str:
    """What a change of cores or ranks assumes of a step that runs on the CPU (its CPU a batch was measured)."""
    m = model.machine
    if not m.step_cpu_s_per_batch or not m.step_s_per_batch or m.step_cpu_s_per_batch < 0.1 * m.step_s_per_batch:
        return ""  # a step on a device, or one the host waits for: the cores are loading's
    return (f", and the step's {1000 * m.step_cpu_s_per_batch:.1f} ms of CPU a batch shares the cores with loading "
            f"(it runs on the CPU; its {1000 * m.step_s_per_batch:.1f} ms kept, though on more cores it may take less)")


def _stage_what_ifs(model: CeilingModel, workers: int, here: float, scale: float, on: str, measured: bool,
                    held: Callable[[float, CeilingModel, str], tuple[float, str]]) -> list[WhatIf]:
    """Each transform operation left out: from its own loops where the profile timed the pipeline without it, else
    its cost subtracted in the model (``held`` at the changed pipeline's ceiling)."""
    ceiling, total_cpu, found = model.ceiling().rate, model.profile.cpu_s or 1e-12, []
    for stage in model.profile.stages:
        if stage.kind != "transform":
            continue
        changed = model.without(stage.name)
        if changed.lighter is not None:  # its loops timed beside the whole pipeline's
            gain, loop = _side_by_side_gain(model, changed, workers)
            how = (f"measured: the pipeline without it ran x{gain:.2f} the whole one's rate {loop}, {on}; on the "
                   "device its own cost there is not measured")
            uncertainty, after = changed.uncertainty(), here * gain
        else:
            how = (f"modelled: its cost subtracted from the pipeline's, the cores' efficiency kept, {on} (too cheap "
                   "to measure apart)")
            small = measured and stage.cpu_s / total_cpu < ANCHORED_SHARE
            uncertainty = ANCHORED if small else MODELLED
            after, how = held(changed.predict(workers) * scale, changed, how)
        found.append(WhatIf(f"{stage.name} removed, or done on the device", ceiling, changed.ceiling().rate, here,
                            after, changed.ceiling().name, how, uncertainty))
    return found
