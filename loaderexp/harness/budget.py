"""What a measuring budget comes to in batches, and how many an epoch's iterator has left."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from loaderexp.harness.records import Budget, BudgetSpec

MIN_ROUNDS = 4  # a race's window holds at least this many rounds of its workers, however long it takes
SHORT_EPOCH = 4  # an epoch under this many windows' worth of batches (with their unmeasured ones) is raced whole


def round_and_depth(workers: int, prefetch_factor: Optional[int], epoch_batches: Optional[int],
                    whole_epochs: bool = False) -> tuple[int, int]:
    """A window's round (one batch per busy worker) and the pipeline's depth (``num_workers x prefetch_factor``
    batches in flight when the first arrives; none counted where whole epochs are timed).  An epoch has no more
    batches than it has: more workers than that never all have work, so both are at most an epoch's batches."""
    busy = min(workers, epoch_batches) if epoch_batches else workers
    depth = 0
    if not whole_epochs:
        depth = busy * (prefetch_factor or 2)
        depth = min(depth, epoch_batches) if epoch_batches else depth
    return max(busy, 1), depth


def epoch_is_short(epoch_batches: Optional[int], depth: int, round_size: int, min_rounds: int = MIN_ROUNDS) -> bool:
    """Whether a race's windows would take most of an epoch: a window lets go the banked batches and a round
    before it, so the epoch's restart (its workers' start) and its tail fall in what is not timed.  The JPEG folder
    (16 batches an epoch), 4 against 2 workers on 2 cores, read +20% (95% CI +13% .. +27%) in such windows, where
    whole epochs, interleaved, read -3%."""
    return epoch_batches is not None and epoch_batches < SHORT_EPOCH * (depth + (1 + min_rounds) * round_size)


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
