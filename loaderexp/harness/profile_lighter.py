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

import copy
import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

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
# Of an operation's budget, each loop of its pairs: two single, four worker and four all-cores loops, 2.2x the
# budget in all (and each loop with workers starts them): the pass runs past bench.profile_s by that much
SHARES = {"single": 0.1, "worker": 0.2, "all_cores": 0.3}
# Two one-worker pairs whose ratios are further apart than this: a third, on top of the 2.2x.  In 20 checks
# against bare loops (the tensor and CPU-burn pipelines, interleaved with one pair's), one-worker what-ifs read
# at most 6.5% off (mean 2.4%) where one pair read up to 16.2% (mean 4.5%)
AGREE = 0.10
STREAM_ROUNDS = 8  # all cores: the two pipelines as live streams, this many interleaved windows of each


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
    """Each costly operation left out in turn, the lighter pipeline timed beside the whole one, in about 2.2 x
    ``budget_s`` in all when the pairs agree (:data:`SHARES`): a pair of loops without workers, and two pairs with
    one worker and two with one per core, each pair whole and lighter back to back at the same batch, the second
    the other way round (whole, lighter, lighter, whole: a steady drift favours neither); a third one-worker pair
    where the two read their ratio more than :data:`AGREE` apart.  The lighter's figures are put on ``whole``'s
    moment by the pairs' ratio.  A loop of a tenth of a second meets the host's moment; two side by side meet the
    same one, and the same short loop's start effects, which their ratio leaves out."""
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

        def streams() -> Optional[list[Pair]]:  # a costly sample's loops hold steady (the JPEG folder's within 6%),
            # and windows of whole rounds at its pace took its profile from 9-10 s to 16 s: a light one's only
            return side_by_side(dataset, (transform, lighter), indices, pair_batch, collate, cores,
                                4 * SHARES["all_cores"] * budget_s) if pair_batch == batch_size else None

        try:
            singles = (timed(transform, single), timed(lighter, single))
            one_worker = _paired(lambda: timed(lighter, worker), lambda: timed(transform, worker), _worker_ratio)
            # Two pairs on all cores, never a third: a third where they read more than AGREE apart (6 of 10 there)
            # brought those what-ifs no nearer bare loops (mean 8.8% and 14.0% off against 9.2% and 11.2%)
            all_cores = streams() or _paired(lambda: timed(lighter, rates), lambda: timed(transform, rates),
                                             _rates_ratio, whole_first=True, settle=False)
        except Exception:  # noqa: BLE001 - the pipeline does not run without it (ToTensor before Normalize): modelled
            continue
        if any(figures is None for pair in one_worker for figures in pair) or not all(singles):
            continue
        found.append(_rebased(stage.name, whole, singles, one_worker, all_cores))
    return found


class _Cycle:
    """The indices over and over: a stream that never ends its epoch (which would start its workers again)."""

    def __init__(self, indices: list[int]):
        self.indices = indices

    def __iter__(self):
        while True:
            yield from self.indices


def side_by_side(dataset: Any, pipelines: tuple[Any, Any], indices: list[int], batch: Optional[int],
                 collate: Optional[Callable], cores: float, budget_s: float) -> Optional[list["Pair"]]:
    """The whole and the lighter pipeline on one worker per core each, as two live streams (each over its own shallow
    copy of the dataset, its transform set), in :data:`STREAM_ROUNDS` interleaved windows of each, as the sweep's
    race compares settings (:mod:`.paired`): (whole, lighter) rates, a pair a round.  Two pairs of fresh loops of
    0.27 s put the blur's gain about 12% (sd) from its moment's typical ratio: a light pipeline on all cores (its
    workers and the main process on two cores) moves 15-25% from one loop to the next.  None where the dataset
    cannot be copied, or the cores or the indices are too few."""
    from torch.utils.data import DataLoader

    from loaderexp.harness.paired import Side, interleaved
    from loaderexp.harness.profile_loops import _fork

    workers, batch = one_per_core(cores), batch or 1
    if workers < 2 or len(indices) < 4 * workers * batch:
        return None
    try:
        copies = [copy.copy(dataset) for _ in pipelines]
        for each, pipeline in zip(copies, pipelines):
            each.transform = pipeline
    except Exception:  # noqa: BLE001 - a dataset that cannot be copied: the pairs of fresh loops instead
        return None
    sides = [Side(DataLoader(each, batch_size=batch, sampler=_Cycle(indices), collate_fn=collate, num_workers=workers,
                             multiprocessing_context=_fork()), 2 * workers, lambda batch: batch, round_size=workers,
                  depth=2 * workers) for each in copies]
    paired = interleaved(sides, STREAM_ROUNDS, budget_s / (2 * STREAM_ROUNDS))
    return [([whole], [lighter]) for whole, lighter in zip(*paired.rates) if whole > 0 and lighter > 0] or None


def _middle(rates: list[float]) -> Optional[float]:
    return sorted(rates)[len(rates) // 2] if rates else None


Pair = tuple[list[float], list[float]]  # (whole, lighter): the segment rates of an all-cores loop of each


def _paired(lighter: Callable[[], Any], whole: Callable[[], Any], ratio: Callable[[Any, Any], Optional[float]],
            whole_first: bool = False, settle: bool = True) -> list[tuple[Any, Any]]:
    """(whole, lighter) pairs of loops: the second the other way round from the first (whole, lighter, lighter,
    whole: a steady drift over the four favours neither side), and with ``settle`` a third as the first where the
    two read ``ratio`` (lighter to whole) more than :data:`AGREE` apart: a loop that met a slow stretch, which the
    median of three leaves out."""
    def pair(whole_before: bool) -> tuple[Any, Any]:
        """One (whole, lighter) pair, its loops timed in the order asked."""
        if whole_before:
            whole_loop = whole()
            return whole_loop, lighter()
        lighter_loop = lighter()
        return whole(), lighter_loop

    found = [pair(whole_first), pair(not whole_first)]
    ratios = [r for r in (ratio(*each) for each in found) if r]
    if settle and len(ratios) == 2 and 2 * _half_apart(ratios) > AGREE:
        found.append(pair(whole_first))
    return found


def _worker_ratio(whole: Optional[WorkerFigures], lighter: Optional[WorkerFigures]) -> Optional[float]:
    """How much faster one worker made the lighter pipeline than the whole one."""
    return whole.wall_s / lighter.wall_s if whole and lighter and lighter.wall_s > 0 else None


def _rates_ratio(whole: list[float], lighter: list[float]) -> Optional[float]:
    """How much faster the lighter pipeline's all-cores loop ran than the whole one's (their thirds' middles)."""
    w_rate, l_rate = _middle(whole), _middle(lighter)
    return l_rate / w_rate if w_rate and l_rate else None


def _combined(ratios: list[float]) -> Optional[float]:
    """Three pairs' ratios: their median (a pair that met a slow stretch left out); one or two: their geometric mean
    (two in turn cancel a steady drift's share)."""
    if not ratios:
        return None
    if len(ratios) >= 3:
        return statistics.median(ratios)
    return math.prod(ratios) ** (1 / len(ratios))


def pairs_ratio(pairs: Sequence[tuple[Any, Any]],
                ratio: Callable[[Any, Any], Optional[float]] = _rates_ratio) -> tuple[Optional[float], float]:
    """The lighter-to-whole rate ratio of loops timed as (whole, lighter) pairs (:func:`_combined`; all-cores loops
    unless ``ratio`` reads other ones), and how far the pairs' ratios are apart (half their relative difference; 0
    with one pair)."""
    ratios = [r for r in (ratio(whole, lighter) for whole, lighter in pairs) if r]
    return (_combined(ratios), _half_apart(ratios)) if ratios else (None, 0.0)


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


def _rebased(name: str, whole: Whole, singles: tuple[float, float],
             workers: Sequence[tuple[WorkerFigures, WorkerFigures]], all_cores: Sequence[Pair]) -> Lighter:
    """The lighter pipeline's figures as the whole pipeline's from the profile, times the lighter-to-whole ratio of
    the loops timed side by side; its spread, how far its loops and the pairs read apart."""
    w_single, l_single = singles
    ratio, apart = pairs_ratio(all_cores)
    all_cores_rate = whole.all_cores_rate * ratio if whole.all_cores_rate and ratio else None
    _, workers_apart = pairs_ratio(workers, _worker_ratio)
    spread = max(max(lighter.spread for _, lighter in workers), workers_apart, apart,
                 _loops_apart([lighter for _, lighter in all_cores]))

    def on_whole(attribute: str) -> float:
        """The profile's whole-pipeline figure times the pairs' lighter-to-whole ratio (the lighter's own when the
        whole one's loops read nothing)."""
        ratios = [getattr(lighter, attribute) / getattr(beside, attribute) for beside, lighter in workers
                  if getattr(beside, attribute) > 0]
        combined = _combined(ratios)
        return getattr(whole.worker, attribute) * combined if combined is not None else \
            getattr(workers[-1][1], attribute)

    return Lighter(name, whole.single_wall_s * l_single / w_single, on_whole("cpu_s"), on_whole("wall_s"),
                   on_whole("main_cpu_s_per_batch"), all_cores_rate, spread)
