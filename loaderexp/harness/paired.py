"""Settings compared side by side: windows of each, interleaved on one host (A B, B A, A B, ...), so a host
whose speed drifts over minutes meets every setting alike and the drift cancels out of their differences.

Each window starts its own iterator (its workers start and warm up unmeasured), times ``window_s`` of
batches, and ends before its epoch does; the order alternates round by round, so a steady drift
favours neither side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from loaderexp.harness.records import PairedRates
from loaderexp.harness.transfer import batch_size_and_bytes


@dataclass
class Side:
    """One setting's loader and what the loop does with each of its batches."""

    loader: Iterable
    warmup: int  # batches before the window: the pipeline's depth
    payload: Callable[[Any], Any]  # the batch as the dataset made it (the delivery tags removed)
    consume: Optional[Callable[[Any, bool], None]] = None  # the copy and the step, as in the measured loop
    round_size: int = 1  # a window holds whole rounds of this many batches (one per worker)


def _window(side: Side, window_s: float, clock: Callable[[], float], beat: Callable[[], None]) -> float:
    iterator = iter(side.loader)
    try:
        for _ in range(side.warmup):
            batch = next(iterator, None)
            if batch is None:
                break
            if side.consume is not None:
                side.consume(side.payload(batch), False)
        samples, batches, start = 0, 0, clock()
        while clock() - start < window_s or batches % side.round_size:
            batch = next(iterator, None)
            if batch is None:
                break  # the epoch ended: the window is what it timed
            payload = side.payload(batch)
            if side.consume is not None:
                side.consume(payload, True)
            samples += batch_size_and_bytes(payload)[0]
            batches += 1
            beat()
        spent = clock() - start
    finally:
        del iterator  # its workers end here, before the other side's start
    return samples / spent if spent > 0 else 0.0


def interleaved(sides: list[Side], rounds: int, window_s: float, clock: Callable[[], float] = time.perf_counter,
                beat: Callable[[], None] = lambda: None) -> PairedRates:
    """``rounds`` windows of each side, interleaved, the order reversed every other round."""
    rates: list[list[float]] = [[] for _ in sides]
    for number in range(rounds):
        order = range(len(sides)) if number % 2 == 0 else reversed(range(len(sides)))
        for index in order:
            rates[index].append(_window(sides[index], window_s, clock, beat))
    return PairedRates(rates, window_s, rounds)
