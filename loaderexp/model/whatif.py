"""What the model predicts for changes nobody has measured yet: a transform operation removed (or moved to
the device, where its own cost is not known), twice the cores, several training processes sharing the node.
Every figure here is a prediction, and says so where it is shown."""

from __future__ import annotations

from dataclasses import dataclass

from loaderexp.model.ceiling import CeilingModel

RANK_COUNTS = (2, 4, 8)


MODELLED = 0.5  # an operation's cost subtracted from the pipeline's missed measured pipelines by up to -49%/+43%
SCALED = 0.25  # more cores or ranks than were measured: how far a model of them may be off, at least


@dataclass(frozen=True)
class WhatIf:
    change: str  # "Normalize removed, or on the device"
    ceiling_before: float
    ceiling_after: float
    at_workers_before: float  # predicted at the setting's num_workers
    at_workers_after: float
    binding_after: str
    how: str = ""  # measured (the lighter pipeline's own loops) or modelled, and what it assumes
    uncertainty: float = MODELLED  # relative

    @property
    def ceiling_gain(self) -> float:
        return self.ceiling_after / self.ceiling_before - 1 if self.ceiling_before else 0.0


def what_ifs(model: CeilingModel, workers: int, values: list[int]) -> list[WhatIf]:
    """Each transform operation left out, twice the cores, and ranks sharing the node, at ``workers`` (and,
    for more cores or ranks, at the best of the grid's ``values``)."""
    ceiling, here = model.ceiling().rate, model.predict(workers)
    found = []
    for stage in model.profile.stages:
        if stage.kind != "transform":
            continue
        changed = model.without(stage.name)
        if changed.lighter is not None:
            how = ("measured: the pipeline without it in a one-worker and an all-cores loop of its own; on the "
                   "device its own cost there is not measured")
            uncertainty = changed.uncertainty()
        else:
            how = ("modelled: its cost subtracted from the pipeline's, the cores' efficiency kept (too cheap to "
                   "measure apart)")
            uncertainty = MODELLED
        found.append(WhatIf(f"{stage.name} removed, or done on the device", ceiling, changed.ceiling().rate, here,
                            changed.predict(workers), changed.ceiling().name, how, uncertainty))
    cores = model.machine.cores
    more = model.with_machine(cores=2 * cores)
    grid = sorted(set(values) | {workers, int(2 * cores), int(4 * cores)})
    best = max(grid, key=lambda w: (round(more.predict(w)), -w))
    found.append(WhatIf(f"twice the cores ({2 * cores:g})", ceiling, more.ceiling().rate, here, more.predict(best),
                        more.ceiling().name, f"modelled at num_workers={best}, the fewest that reach it: assumes each "
                        f"sample costs what it did here and the cores work together as these did (x{model.efficiency:.2f})",
                        max(SCALED, model.uncertainty())))
    for ranks in RANK_COUNTS:
        if ranks == model.machine.ranks:
            continue
        shared = model.with_machine(ranks=ranks)
        per_rank = max(shared.predict(w) for w in grid) / ranks
        found.append(WhatIf(f"{ranks} training processes on this node sharing its {cores:g} cores", ceiling,
                            shared.ceiling().rate, here, per_rank * ranks, shared.ceiling().name,
                            f"modelled, {per_rank:,.0f} samples/s per rank at the best worker count: assumes the ranks "
                            "split the cores evenly, each with a main process of its own, and a sample costs what it "
                            "did here", max(SCALED, model.uncertainty())))
    return found
