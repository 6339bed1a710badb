"""How many windows a run measures: until they agree, a fixed number, or one when it is clearly behind."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from loaderexp.harness.delivery import DeliveryTracker
from loaderexp.harness.loop import Probe, run_windows
from loaderexp.harness.records import Budget, BudgetSpec, RepeatTiming, spread
from loaderexp.harness.steps import Consumer


@dataclass(frozen=True)
class RepeatPlan:
    fewest: int  # windows at least
    most: int  # windows at most
    precision: float  # stop once IQR/median across windows is at most this
    fixed: bool = False  # exactly ``fewest`` (= ``most``) windows, whatever they say
    stop_below: Optional[float] = None  # one window only when it is below this rate (a search's pruning)


def repeat_until_precise(
    loader: Iterable,
    budget: BudgetSpec,
    plan: RepeatPlan,
    delivery: DeliveryTracker,
    consumer: Optional[Consumer],
    on_batch: Optional[Callable[[int], None]],
    probe: Optional[Probe] = None,
) -> tuple[list[RepeatTiming], str]:
    """Repeats until they agree to ``plan.precision`` (IQR/median, from ``fewest`` up to ``most``), or a
    fixed number of them; and why it stopped ("precise", "max_repeats", "fixed" or "pruned").

    A repeat is one window of a single warmed-up stream (the next starts where the last ended,
    as torch.utils.benchmark's blocks do); with ``budget.mode`` epochs each repeat is its own
    stream of whole epochs from a fresh iterator.
    """
    pruned = False

    def another(repeats: list[RepeatTiming]) -> bool:
        nonlocal pruned
        if len(repeats) >= plan.most:
            return False
        if plan.stop_below is not None and len(repeats) == 1 and repeats[0].samples_per_s < plan.stop_below:
            # Clearly behind after its first window (which starts an epoch and so never pays a
            # restart of the workers): no more windows can bring it within reach of the best.
            pruned = True
            return False
        if plan.fixed or len(repeats) < plan.fewest:
            return True
        return spread([r.samples_per_s for r in repeats]).relative > plan.precision

    if budget.mode is not Budget.epochs:
        repeats = run_windows(loader, budget, delivery, consumer, time.perf_counter, on_batch, another, probe)
    else:
        repeats = []
        while not repeats or another(repeats):
            done_before = sum(r.batches for r in repeats)

            def counted(done: int) -> None:
                on_batch(done_before + done)  # type: ignore[misc]

            repeats += run_windows(loader, budget, delivery, consumer, time.perf_counter,
                                   counted if on_batch is not None else None, probe=probe)
            if consumer is not None:
                consumer.flush()  # a prefetched batch still pending is stepped outside the window
    if consumer is not None:
        consumer.flush()
    if pruned:
        return repeats, "pruned"
    if plan.fixed:
        return repeats, "fixed"
    precise = spread([r.samples_per_s for r in repeats]).relative <= plan.precision
    return repeats, "precise" if precise else "max_repeats"
