"""What-ifs that are measured, not modelled: the pipeline with one of its costliest transform operations left
out, timed in loops of its own.

Subtracting an operation's cost from the pipeline's predicts the lighter pipeline badly both ways: what the
cores do together (the model's efficiency) is not the same for a lighter pipeline, and the subtraction
inherits every error of the short loops it starts from ("GaussianBlur removed" promised x2.6 where the loops
gained x3.4).  The lighter pipeline is a real pipeline: a one-worker loop and an all-cores loop of it cost a
fraction of a second each.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from loaderexp.harness.profile_loops import all_cores_rates, single_process, worker_figures
from loaderexp.harness.stages import Lighter, Stage

SHARE = 0.10  # an operation costing at least this share of a sample's CPU is left out and measured
LEAST_S = 0.00005  # ... and at least 0.05 ms a sample (below, the loops could not tell it from their noise)
MOST = 2  # the costliest two: they share a quarter of the profiling budget


def without(transform: Any, index: int) -> Optional[Callable]:
    """The Compose (torchvision v1 or v2) with its ``index``-th operation left out; None for anything else."""
    ops = list(getattr(transform, "transforms", None) or [])
    if not 0 <= index < len(ops):
        return None
    try:
        return type(transform)(ops[:index] + ops[index + 1:])
    except Exception:  # noqa: BLE001 - a Compose of another library that is built otherwise: modelled instead
        return None


def costly(stages: list[Stage]) -> list[tuple[int, Stage]]:
    """(index among the transform's operations, stage) of the operations worth measuring without, costliest first."""
    total = sum(s.cpu_s for s in stages) or 1e-12
    ops = [s for s in stages if s.kind == "transform"]
    found = [(i, s) for i, s in enumerate(ops) if s.cpu_s >= LEAST_S and s.cpu_s / total >= SHARE]
    return sorted(found, key=lambda item: -item[1].cpu_s)[:MOST]


def lighter_pipelines(dataset: Any, stages: list[Stage], indices: list[int], batch_size: Optional[int],
                      collate: Optional[Callable], cores: float, budget_s: float) -> list[Lighter]:
    """Each costly operation left out in turn and the lighter pipeline measured, within about ``budget_s`` in all."""
    transform = getattr(dataset, "transform", None)
    found, chosen = [], costly(stages)
    budget_s /= max(len(chosen), 1)
    for index, stage in chosen:
        lighter = without(transform, index)
        if lighter is None:
            continue
        per_sample = sum(s.wall_s for s in stages if s.kind != "collate") - stage.wall_s
        dataset.transform = lighter
        try:
            single = single_process(dataset, indices, batch_size, collate, per_sample, 0.25 * budget_s)[1]
            worker = worker_figures(dataset, indices, per_sample, batch_size, collate, 0.4 * budget_s)
            if worker is None:
                continue
            rates = all_cores_rates(dataset, indices, batch_size, collate, cores, worker.wall_s, 0.35 * budget_s,
                                    own_batch=True)
        except Exception:  # noqa: BLE001 - the pipeline does not run without it (ToTensor before Normalize): modelled
            continue
        finally:
            dataset.transform = transform
        middle = sorted(rates)[len(rates) // 2] if rates else None
        spread = max(worker.spread, (max(rates) - min(rates)) / middle if middle else 0.0)
        found.append(Lighter(stage.name, single, worker.cpu_s, worker.wall_s, worker.main_cpu_s_per_batch, middle,
                             spread))
    return found
