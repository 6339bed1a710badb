"""What a measuring budget comes to in batches, and how many an epoch's iterator has left."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from loaderexp.harness.records import Budget, BudgetSpec


def batches_left(iterator: Any) -> Optional[int]:
    """Batches a DataLoader's epoch has left to give; None where the iterator does not say."""
    try:
        return max(len(iterator) - iterator._num_yielded, 0)
    except (TypeError, AttributeError):
        return None


def whole_rounds(batches: int, round_size: int) -> int:
    """``batches`` rounded up to whole rounds."""
    return -(-batches // round_size) * round_size


def expected_batches(loader: Iterable, budget: BudgetSpec) -> int:
    """Measured batches a repeat will most likely take (its timing lists are sized to it)."""
    if budget.mode is Budget.batches:
        return whole_rounds(budget.batches, budget.round_size)
    if budget.mode is Budget.epochs:
        try:
            return min(max(len(loader) * budget.epochs - budget.warmup_batches, 0), 1 << 20)  # type: ignore[arg-type]
        except TypeError:
            pass
    return 4096
