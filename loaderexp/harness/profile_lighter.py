"""What-ifs that are measured, not modelled: the pipeline with one of its costliest transform operations left
out, timed in loops of its own, each beside the same loop of the whole pipeline.

Subtracting an operation's cost from the pipeline's predicts the lighter pipeline badly both ways: what the
cores do together (the model's efficiency) is not the same for a lighter pipeline, and the subtraction
inherits every error of the short loops it starts from ("GaussianBlur removed" promised x2.6 where the loops
gained x3.4).  The lighter pipeline is a real pipeline: a loop of it costs a fraction of a second.  Alone, such a
loop holds the host's moment: in 12 checks against bare loops, 8 read beyond 15% (-34% to +23%).  Timed beside
the whole pipeline's loop and taken as their ratio, 30 of 36 read within 15% (at worst +23.0%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from loaderexp.harness.profile_loops import (MIN_TIMED, WorkerFigures, all_cores_rates, one_per_core, single_process,
                                             timed_batch, worker_figures)
from loaderexp.harness.stages import Lighter, Stage

# An operation costing at least this share of a sample's CPU is left out and measured.  Below it, the gain of
# leaving it out (about its share) is within the noise of loops of tenths of a second (the tensor pipeline's
# Normalize, 12% of its CPU, read -22% and +23% against bare loops measured), while subtracting its cost barely
# moves how the cores work together (modelled, CIFAR-10's ops of 21-28% read within 13%)
SHARE = 0.20
LEAST_S = 0.00005  # ... and at least 0.05 ms a sample (below, the loops could not tell it from their noise)
MOST = 2  # the costliest two: they share the lighter pipelines' part of the profiling budget
PAIR_S = 0.4  # the longest an all-cores loop of the whole pipeline may take at the run's batch
# Of an operation's budget, each loop of its pairs: two single and two worker loops, four all-cores ones, 1.8x the
# budget in all (and each loop with workers starts them): the pass runs past bench.profile_s by that much
SHARES = {"single": 0.1, "worker": 0.2, "all_cores": 0.3}


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


@dataclass(frozen=True)
class Whole:
    """The whole pipeline's figures from the profile's own loops: the moment the lighter one is put on."""

    single_wall_s: float
    worker: WorkerFigures
    all_cores_rate: Optional[float]


def lighter_pipelines(dataset: Any, stages: list[Stage], indices: list[int], batch_size: Optional[int],
                      collate: Optional[Callable], cores: float, budget_s: float, whole: Whole) -> list[Lighter]:
    """Each costly operation left out in turn, the lighter pipeline timed beside the whole one, in about 1.8 x
    ``budget_s`` in all (:data:`SHARES`): each kind of loop twice, whole and lighter back to back at the same batch
    (in the order whole-lighter, lighter-whole, whole-lighter; the all-cores loops, whose ratio is the what-if at the
    cores, twice more, lighter-whole), and the lighter's figures put on ``whole``'s moment by the pairs' ratio.  A loop
    of a tenth of a second meets the host's moment; two side by side meet the same one, and the same short loop's
    start effects, which their ratio leaves out."""
    transform = getattr(dataset, "transform", None)
    found, chosen = [], costly(stages)
    budget_s /= max(len(chosen), 1)
    per_sample = sum(s.wall_s for s in stages if s.kind != "collate")  # the whole's: both loops at one batch
    # The all-cores pair at the run's batch (a smaller one spreads the per-batch costs over fewer samples: 10-19%
    # slow at 24 against 64 for a light pipeline), unless the whole one's loop would take over PAIR_S there: a
    # costly sample's per-batch share is small (the JPEG folder's whole loop took 2.3 s at 128)
    workers = one_per_core(cores)
    pair_batch = timed_batch(batch_size, whole.worker.wall_s / workers, PAIR_S, MIN_TIMED + workers)
    for index, stage in chosen:
        lighter = without(transform, index)
        if lighter is None:
            continue

        def timed(pipeline: Any, loop: Callable[[], Any]) -> Any:
            dataset.transform = pipeline
            try:
                return loop()
            finally:
                dataset.transform = transform

        def single() -> float:
            return single_process(dataset, indices, batch_size, collate, per_sample, SHARES["single"] * budget_s)[1]

        def worker() -> Optional[WorkerFigures]:  # at the lighter one's batch: a batch shrunk for the whole one
            # hands over more batches per sample, whose cost is a larger share of the lighter one's (read 17-22% slow)
            return worker_figures(dataset, indices, per_sample - stage.wall_s, batch_size, collate,
                                  SHARES["worker"] * budget_s)

        def rates() -> list[float]:
            return all_cores_rates(dataset, indices, pair_batch, collate, cores, whole.worker.wall_s,
                                   SHARES["all_cores"] * budget_s, own_batch=True)

        try:
            singles = (timed(transform, single), timed(lighter, single))
            lighter_worker = timed(lighter, worker)  # this pair the other way round: lighter, then whole
            one_worker = (timed(transform, worker), lighter_worker)
            # Whole, lighter, lighter, whole: a drift over the four loops favours neither ratio's side (one pair
            # read a 2-worker what-if beyond 15% of bare loops in 5 of 12 checks, -20% to +35%; two, in 4 of 26).
            first = (timed(transform, rates), timed(lighter, rates))
            later_lighter = timed(lighter, rates)
            all_cores = (first, (timed(transform, rates), later_lighter))
        except Exception:  # noqa: BLE001 - the pipeline does not run without it (ToTensor before Normalize): modelled
            continue
        if any(figures is None for figures in one_worker) or not all(singles):
            continue
        found.append(_rebased(stage.name, whole, singles, one_worker, all_cores))
    return found


def _middle(rates: list[float]) -> Optional[float]:
    return sorted(rates)[len(rates) // 2] if rates else None


Pair = tuple[list[float], list[float]]  # (whole, lighter): the segment rates of an all-cores loop of each


def pairs_ratio(pairs: tuple[Pair, ...]) -> tuple[Optional[float], float]:
    """The lighter-to-whole rate ratio of all-cores loops timed as pairs (the geometric mean of each pair's: in the
    order whole-lighter, lighter-whole a steady drift's share cancels), and how far the pairs' ratios are apart
    (half their relative difference; 0 with one pair)."""
    ratios = []
    for whole, lighter in pairs:
        w_rate, l_rate = _middle(whole), _middle(lighter)
        if w_rate and l_rate:
            ratios.append(l_rate / w_rate)
    if not ratios:
        return None, 0.0
    return math.prod(ratios) ** (1 / len(ratios)), _half_apart(ratios)


def _half_apart(values: list[float]) -> float:
    """Half the relative difference of the highest and lowest of (positive) ``values``: how far either may be off."""
    return (max(values) / min(values) - 1) / 2


def _loops_apart(loops: list[list[float]]) -> float:
    """How far the lighter pipeline's all-cores loops read apart (half the relative difference of their middles);
    of one loop, how far its thirds were.  Not the range of every third of both loops: thirds of a loop of a tenth
    of a second swing with the batches that cross their edges, and stated the fast tensor pipeline +-67% to +-111%
    where its what-ifs read within 10%."""
    middles = [m for m in map(_middle, loops) if m]
    if len(middles) > 1:
        return _half_apart(middles)
    rates = next((rates for rates in loops if rates), [])
    return (max(rates) - min(rates)) / middles[0] if middles else 0.0


def _rebased(name: str, whole: Whole, singles: tuple[float, float], workers: tuple[WorkerFigures, WorkerFigures],
             all_cores: tuple[Pair, ...]) -> Lighter:
    """The lighter pipeline's figures as the whole pipeline's from the profile, times the lighter-to-whole ratio of
    the loops timed side by side."""
    (w_single, l_single), (w_worker, l_worker) = singles, workers
    ratio, apart = pairs_ratio(all_cores)
    all_cores_rate = whole.all_cores_rate * ratio if whole.all_cores_rate and ratio else None
    spread = max(l_worker.spread, apart, _loops_apart([lighter for _, lighter in all_cores]))

    def on_whole(attribute: str) -> float:
        """The profile's whole-pipeline figure times the pair's lighter-to-whole ratio (the lighter's own when the
        whole one's loop read nothing)."""
        lighter, beside = getattr(l_worker, attribute), getattr(w_worker, attribute)
        return getattr(whole.worker, attribute) * lighter / beside if beside > 0 else lighter

    return Lighter(name, whole.single_wall_s * l_single / w_single, on_whole("cpu_s"), on_whole("wall_s"),
                   on_whole("main_cpu_s_per_batch"), all_cores_rate, spread)
