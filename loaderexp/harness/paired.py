"""Settings compared side by side: windows of each, interleaved on one host (A B, B A, A B, ...), so a host
whose speed drifts over minutes meets every setting alike and the drift cancels out of their differences.

Each side reads one stream: its iterator starts once (its workers start and warm up unmeasured) and is
resumed window after window, as a training epoch runs.  While the other sides measure, its workers
bank up to the pipeline's depth and then wait (no CPU): a resumed window first lets those go and takes one
round unmeasured, then times ``window_s`` of batches at the workers' pace, and at least :data:`MIN_ROUNDS`
rounds: a window of a round or two meets its rounds' phase (the JPEG folder at 2 against 3 workers and a
50 ms step: rounds differences 16-20% (sd) in windows of one round, 8-15% in windows of four).
Restarting the iterator for every window instead cost 0.18 s a window, and read sides with workers low in
short windows (their new workers' first batches run slower than their later ones): CIFAR-10, 0 against 2
workers, -33% in 0.25 s windows against -39% in 0.5 s ones and -38.5% in the jobs.  A stream whose epoch
ends starts anew at the next window; one is let go (its workers end) when ``keep`` says the memory their idle
processes hold is needed.  The order alternates round by round, so a steady drift favours no side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional

from loaderexp.harness.budget import MIN_ROUNDS, epoch_is_short
from loaderexp.harness.records import PairedRates
from loaderexp.harness.transfer import batch_size_and_bytes


@dataclass
class Side:
    """One setting's loader and what the loop does with each of its batches."""

    loader: Iterable
    warmup: int  # batches before a fresh stream's first window: at least the pipeline's depth
    payload: Callable[[Any], Any]  # the batch as the dataset made it (the delivery tags removed)
    consume: Optional[Callable[[Any, bool], None]] = None  # the copy and the step, as in the measured loop
    round_size: int = 1  # a window holds whole rounds of this many batches (one per worker)
    depth: int = 0  # batches its workers bank while the others measure: taken before a resumed window
    stream: Optional[Iterator] = field(default=None, repr=False)  # the iterator resumed window after window
    epoch_batches: Optional[int] = None  # an epoch's batches, where the loader knows them


def short_epoch(side: Side, min_rounds: int = MIN_ROUNDS) -> bool:
    """Whether the side's epoch is short against its windows (:func:`loaderexp.harness.budget.epoch_is_short`)."""
    return epoch_is_short(side.epoch_batches, side.depth, side.round_size, min_rounds)


def _start(side: Side) -> None:
    """A fresh stream, warmed up unmeasured (its workers start)."""
    side.stream = iter(side.loader)
    for _ in range(side.warmup):
        batch = next(side.stream, None)
        if batch is None:  # an epoch no longer than the warm-up: the window times the next one from its start
            side.stream = iter(side.loader)
            return
        if side.consume is not None:
            side.consume(side.payload(batch), False)


def _resume(side: Side) -> None:
    """The stream where the last window left it, less what its workers banked since (a fresh one if none runs), then
    one round more, unmeasured, so that the window opens where a round has just been taken, as the measured loop's
    windows tile its stream.  Opened anywhere else, a window's first round came early or late by up to a round: the
    JPEG folder with a 50 ms step, 2 against 3 workers, read -18% in windows of one round and +15% in windows of
    three, both from the stream.  The round also takes the copies another side's fork costs: forking its workers
    shares this process's pages with them, and the first write to each copies it (a resnet18 step without workers
    lost 0.27 s of a 0.5 s window to them)."""
    banked = side.depth if side.stream is not None else 0
    if side.stream is None:
        _start(side)
    for taken in range(banked + side.round_size):
        batch = next(side.stream, None)
        if batch is None:  # its epoch ended in the banked batches
            return _start(side)
        if side.consume is not None and taken >= banked:  # the banked ones are let go: only the round is stepped
            side.consume(side.payload(batch), False)


def _window(side: Side, window_s: float, clock: Callable[[], float], beat: Callable[[], None],
            min_rounds: int = MIN_ROUNDS) -> tuple[float, float]:
    """The side's rate over one window, and its time per batch (0 where none was timed)."""
    _resume(side)
    samples, batches, restarted, start = 0, 0, False, clock()
    least = min_rounds * side.round_size
    while clock() - start < window_s or batches % side.round_size or batches < least:
        batch = next(side.stream, None)
        if batch is None:
            if batches == 0 and not restarted:  # the epoch ended just before the window: time the next one's
                _start(side)
                restarted = True
                start = clock()
                continue
            side.stream = None  # the epoch ended inside the window: it is what it timed; the next starts anew
            break
        samples += _timed(side, batch, beat)
        batches += 1
    return _rates(samples, batches, clock() - start)


def _whole_epoch(side: Side, clock: Callable[[], float], beat: Callable[[], None]) -> tuple[float, float]:
    """One epoch from its iterator's start to its end, its workers' start and its tail paid, as training pays them
    each epoch (persistent workers are kept by the loader itself); its workers end with it."""
    samples, batches, start = 0, 0, clock()
    for batch in side.loader:
        samples += _timed(side, batch, beat)
        batches += 1
    return _rates(samples, batches, clock() - start)


def _timed(side: Side, batch: Any, beat: Callable[[], None]) -> int:
    """A measured batch: stepped as the measured loop steps it; its samples."""
    payload = side.payload(batch)
    if side.consume is not None:
        side.consume(payload, True)
    beat()
    return batch_size_and_bytes(payload)[0]


def _rates(samples: int, batches: int, spent: float) -> tuple[float, float]:
    """Samples/s, and seconds a batch (0 where none was timed)."""
    return (samples / spent if spent > 0 else 0.0), (spent / batches if batches else 0.0)


def interleaved(sides: list[Side], rounds: int, window_s: float, clock: Callable[[], float] = time.perf_counter,
                beat: Callable[[], None] = lambda: None, keep: Callable[[], bool] = lambda: True,
                sleep: Callable[[float], None] = time.sleep, min_rounds: int = MIN_ROUNDS) -> PairedRates:
    """``rounds`` windows of each side, interleaved, the order reversed every other round; each side's stream
    resumed while ``keep()`` (asked after each window) says its idle workers may hold their memory.

    A window's workers go on with the batches they were asked for (the pipeline's depth) after it closes: the next
    window waits for them (the depth at the pace it timed), else they take the cores from its first batches (3
    against 2 workers on 2 cores: 16-23% from window to window in 0.25 s windows, against 4.5-7% at 0.5 s).
    Where an epoch is short against the windows (:func:`short_epoch`), every window is a whole epoch instead."""
    schedule = [index for number in range(rounds)
                for index in (range(len(sides)) if number % 2 == 0 else reversed(range(len(sides))))]
    rates: list[list[float]] = [[] for _ in sides]
    whole = any(short_epoch(side, min_rounds) for side in sides)  # every side alike: one kind of figure
    try:
        for position, index in enumerate(schedule):
            side = sides[index]
            rate, per_batch_s = (_whole_epoch(side, clock, beat) if whole
                                 else _window(side, window_s, clock, beat, min_rounds))
            rates[index].append(rate)
            if position == len(schedule) - 1:
                break  # no window follows: every stream ends below, its workers with it
            if not keep():
                side.stream = None  # its workers end here, before the next side's start
            elif side.stream is not None and side.depth:
                sleep(side.depth * per_batch_s)  # its workers bank what they were asked for
    finally:
        for side in sides:
            side.stream = None
    return PairedRates(rates, window_s, rounds, whole_epochs=whole)
