"""The measured loop: how long a training loop waits for each batch from a DataLoader.

Plain Python and torch only, driven by tests with a fake clock and by the benchmark against a bare
``for batch in loader`` loop; CUDA work is synchronised by the consumer, not here.  A stream starts
a fresh iterator, leaves its first ``warmup_batches`` out (and after a probe's reading there, which
pauses the loop while the workers bank batches, the pipeline's ``depth`` more), then measures windows until the budget
is spent (batches, whole epochs, or seconds); an epoch that ends inside it is paid, as in training.

With workers, batches come in *rounds*: worker ``i`` makes batches ``i, i + W, i + 2W, ...``
and the workers finish theirs at about the same time.  A window that starts or ends inside a
round counts a part-round of batches that were made before it or will be paid for after it (at
16 workers and 100 batches, several percent).  So a window holds whole rounds
(``BudgetSpec.round_size`` = W batches): it runs from one batch to the batch W x k later, which
the same worker made k batch-times later, and the rate is exact wherever the rounds' phases lie.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Iterable, Optional, Protocol

from loaderexp.harness.budget import batches_left, expected_batches, whole_rounds
from loaderexp.harness.delivery import DeliveryTracker
from loaderexp.harness.records import Budget, BudgetSpec, RepeatTiming
from loaderexp.harness.transfer import batch_size_and_bytes
from loaderexp.harness.worker_exits import with_worker_exits

Clock = Callable[[], float]
Process = Callable[[Any, bool], None]  # (batch, measured) -> None: copy to device, train step
Another = Callable[[list[RepeatTiming]], bool]  # more windows after these?


class RunTimeout(RuntimeError):
    """A repeat ran past its wall-clock limit."""


class Probe(Protocol):
    """Told where an epoch stands, outside the measured windows (what memory an epoch leaves)."""

    def warmed_up(self) -> None:
        """The warm-up is over and the first window opens next (its clock starts after this)."""

    def windows_open(self) -> None:
        """The first window opens next, once a stream: the warm-up and the batches its reading let pile up are
        read (its clock starts after this)."""

    def windows_done(self) -> bool:
        """The last window just closed, inside an epoch: True reads on to the epoch's end, unmeasured."""

    def epoch_done(self) -> None:
        """An epoch ended (or the stream left it)."""

    def epoch_ending(self) -> None:
        """Reading on to an epoch's end, its last batch is next (its workers are still alive)."""

    def read_enough(self) -> bool:
        """Reading on, after each batch: True stops it there (the readings tell what the epoch's rest holds)."""


def run_repeat(loader: Iterable, budget: BudgetSpec, delivery: DeliveryTracker, process: Optional[Process] = None,
               clock: Clock = time.perf_counter, on_batch: Optional[Callable[[int], None]] = None) -> RepeatTiming:
    """One window of ``loader`` under ``budget``, from a fresh iterator: :func:`run_windows` with one."""
    return run_windows(loader, budget, delivery, process, clock, on_batch)[0]


def run_windows(
    loader: Iterable,
    budget: BudgetSpec,
    delivery: DeliveryTracker,
    process: Optional[Process] = None,
    clock: Clock = time.perf_counter,
    on_batch: Optional[Callable[[int], None]] = None,
    another: Optional[Another] = None,
    probe: Optional[Probe] = None,
) -> list[RepeatTiming]:
    """Measure consecutive windows of one stream of batches under ``budget``.

    The stream starts with a fresh iterator and its warm-up; each window then runs until the
    budget is spent, and when ``another(windows so far)`` says so the next window starts at the
    very batch where the last one ended: the workers stay warm and nothing in flight is lost or
    counted twice, as in a training loop that never pauses.  (Budget ``epochs`` is whole epochs
    from a fresh iterator each time: the caller starts one stream per repeat there.)

    A batch's wait runs from the end of the previous batch's work (or the epoch's start, its
    iterator and workers included) to its arrival; its busy time from arrival to the end of
    ``process``.  The loop's own bookkeeping falls into the next wait, as a training loop's
    would.  ``on_batch(count)`` follows every measured batch with the count across windows: the
    heartbeat that the measuring process's parent watches for stalls, and what the progress bar counts.
    """
    stream = Stream(loader, budget, delivery, process, clock, on_batch, another, probe)
    while not stream.finished:
        stream.epoch()
    return stream.close()


class Stream:
    """One stream of batches measured window by window; :meth:`epoch` is the hot loop.

    Per batch the loop does as little as a bare ``for batch in loader`` allows: one clock read (two
    with a step), a few stores and compares on local names, and nothing else: on a fast in-memory
    dataset each Python operation shows, and what the loop touches between batches evicts what the
    loader's own code would find in cache.  Everything else (samples, bytes, epoch checks) is counted
    once, outside the loop.  The timings go into lists sized up front: a list that grows is
    reallocated every few dozen batches, and a block kept between two batch-sized buffers moves where
    later batches land, a cost the bare loop would not have.
    """

    def __init__(self, loader: Iterable, budget: BudgetSpec, delivery: DeliveryTracker, process: Optional[Process],
                 clock: Clock, on_batch: Optional[Callable[[int], None]], another: Optional[Another],
                 probe: Optional[Probe] = None):
        self.loader, self.budget, self.delivery, self.process = loader, budget, delivery, process
        self.clock, self.on_batch, self.another = clock, on_batch, another
        self.windows: list[RepeatTiming] = []
        self.capacity = expected_batches(loader, budget)
        self.batch_limit = whole_rounds(budget.batches, budget.round_size) if budget.mode is Budget.batches else sys.maxsize
        self.seconds = budget.seconds if budget.mode is Budget.seconds else math.inf
        self.min_seconds = budget.min_seconds if budget.mode is Budget.batches else 0.0
        self.before = 0  # measured batches in the windows before this one
        self.seen = 0  # batches including warm-up
        self.epochs_done = 0
        self.finished = False
        self.start = self.done = clock()
        self.window_start: Optional[float] = None
        self.deadline = math.inf
        self.hard_deadline = self.start + budget.max_seconds
        self.delivered_before = delivery.delivered_samples() if budget.warmup_batches == 0 else 0
        self.probe = probe
        self.warmup = budget.warmup_batches  # the probe's pause adds the pipeline's depth to it
        self.drained = False
        self._new_window(RepeatTiming(round_size=budget.round_size))

    def _new_window(self, timing: RepeatTiming) -> None:
        self.timing = timing
        self.waits, self.busies = [0.0] * self.capacity, [0.0] * self.capacity  # busy stays 0 without a step
        self.count = 0  # measured batches in this window

    def _open(self, previous: float, batch: Any, warmup: int) -> None:
        """The first measured batch: the window starts where the warm-up (``warmup`` batches) ended."""
        self.window_start = previous
        self.deadline = previous + self.seconds
        self.timing.warmup_s = previous - self.start
        self.timing.warmup_batches = warmup
        samples, size = batch_size_and_bytes(batch)
        self.timing.sample_bytes = size / max(samples, 1)  # collated samples share a shape

    def _close_window(self, done: float) -> bool:
        """The window is full: keep it, and say whether the next one starts here, on the same iterator."""
        _close(self.timing, self.waits, self.busies, self.count, done - self.window_start,
               self.delivery.delivered_samples() - self.delivered_before)
        self.windows.append(self.timing)
        if self.another is None or self.budget.mode is Budget.epochs or not self.another(self.windows):
            self.finished = True
            return False
        self.before += self.count
        self._new_window(RepeatTiming(round_size=self.budget.round_size, sample_bytes=self.timing.sample_bytes))
        self.delivered_before = self.delivery.delivered_samples()
        # Windows tile the stream: this bookkeeping falls into the next wait.
        self.window_start = done
        self.deadline = done + self.seconds
        self.hard_deadline = done + self.budget.max_seconds
        return True

    def epoch(self) -> None:  # the hot loop (see the class): long because each batch may touch only locals
        delivery, clock, process, on_batch = self.delivery, self.clock, self.process, self.on_batch
        take, payload = delivery.take, delivery.payload  # take is None when nothing is logged per batch
        warmup, per_round, capacity = self.warmup, self.budget.round_size, self.capacity
        batch_limit, min_seconds = self.batch_limit, self.min_seconds
        waits, busies, count, seen, done = self.waits, self.busies, self.count, self.seen, self.done
        window_start, deadline, hard_deadline = self.window_start, self.deadline, self.hard_deadline
        delivery.start_epoch()
        epoch_start = previous = clock()
        epoch_first = seen
        iterator = iter(self.loader)
        complete = False
        try:  # entered once per epoch: nothing is paid per batch
            for batch in iterator:  # `batch` is the only reference, as in a bare loop
                arrived = clock()
                if seen == epoch_first:
                    self.timing.startup_s.append(arrived - epoch_start)
                if take is not None:
                    take(batch)
                if process is not None:
                    process(payload(batch), seen >= warmup)
                    done = clock()
                else:
                    done = arrived
                seen += 1
                if seen > warmup:
                    if window_start is None:
                        self._open(previous, payload(batch), warmup)
                        window_start, deadline = self.window_start, self.deadline
                    if count < capacity:
                        waits[count] = arrived - previous
                        busies[count] = done - arrived
                    else:
                        waits.append(arrived - previous)
                        busies.append(done - arrived)
                    count += 1
                    if on_batch is not None:
                        on_batch(self.before + count)
                    if count % per_round == 0 and (
                        (count >= batch_limit and done - window_start >= min_seconds) or done >= deadline
                    ):
                        self.count = count
                        if not self._close_window(done):
                            if self.probe is not None and self.probe.windows_done():
                                seen, complete = self._drain(iterator, seen)
                            break
                        waits, busies, count = self.waits, self.busies, 0
                        window_start, deadline, hard_deadline = done, self.deadline, self.hard_deadline
                        previous = done
                        continue
                elif seen == warmup:
                    # Once a stream, where the configured warm-up ends (the drain below moves `warmup` on).
                    if self.probe is not None and seen == self.budget.warmup_batches:
                        self.probe.warmed_up()
                        done = clock()
                        # The reading paused this loop while the workers went on: up to the pipeline's depth of
                        # batches wait, made before the window.  Drained unmeasured, they are not counted in it
                        # (an epoch's end drains them anyway: its next starts with an empty pipeline).
                        left = batches_left(iterator)
                        warmup += self.budget.depth if left is None else min(self.budget.depth, left)
                    if seen == warmup:
                        if self.probe is not None:
                            self.probe.windows_open()
                            done = clock()  # the reading is not the window's
                        self.delivered_before = delivery.delivered_samples()
                if done > hard_deadline:
                    raise RunTimeout(f"a repeat ran past bench.max_run_seconds={self.budget.max_seconds:g}")
                previous = done
            else:
                complete = True
        except (RuntimeError, ConnectionError, EOFError) as error:  # a dead worker, as torch noticed it
            named = with_worker_exits(error, iterator)
            if named is error:
                raise
            raise named from error
        self.waits, self.busies, self.count, self.seen, self.done = waits, busies, count, seen, done
        self.warmup = warmup
        if self.probe is not None and self.finished:
            self.probe.epoch_done()  # the stream is done with its windows: never inside one (a reading costs ms)
        self._end_epoch(complete, seen - epoch_first, epoch_start)
        del iterator  # shuts non-persistent workers down before the next repeat

    def _drain(self, iterator: Any, seen: int) -> tuple[int, bool]:
        """The rest of this epoch, unmeasured and not stepped: what a whole epoch's reads leave in memory
        (the probe asked for it), or as much of it as the probe needs.  Nothing here is timed; the heartbeat goes
        on.  (batches seen, whether the epoch ended)"""
        take, on_batch, beat = self.delivery.take, self.on_batch, self.before + self.count
        self.drained = True
        last = seen + (batches_left(iterator) or 0)  # DataLoader's workers exit with the epoch's last batch: read before it
        for batch in iterator:
            if take is not None:
                take(batch)
            seen += 1
            beat += 1
            if on_batch is not None:
                on_batch(beat)
            if seen == last - 1 and self.probe is not None:
                self.probe.epoch_ending()
            elif self.probe is not None and self.probe.read_enough():
                return seen, False
        return seen, True

    def _end_epoch(self, complete: bool, batches: int, epoch_start: float) -> None:
        self.delivery.end_epoch(complete, batches)
        if not complete:
            return
        self.epochs_done += 1
        if not self.drained:  # a drained epoch was partly stepped, partly not: not an epoch's time
            self.timing.epoch_s.append(self.clock() - epoch_start)
        if self.budget.mode is Budget.epochs and self.epochs_done >= self.budget.epochs:
            self.finished = True
        if self.seen == 0:
            raise ValueError(
                "the loader yielded no batch in a whole epoch "
                "(an empty dataset, or drop_last with fewer samples than batch_size)"
            )

    def close(self) -> list[RepeatTiming]:
        """The windows, the last one closed where the budget ended it (with the epochs, not in a window)."""
        if not self.windows or self.windows[-1] is not self.timing:
            opened = self.window_start is not None
            _close(self.timing, self.waits, self.busies, self.count, self.done - self.window_start if opened else 0.0,
                   self.delivery.delivered_samples() - self.delivered_before if opened else 0)
            self.windows.append(self.timing)
        return self.windows


def _close(timing: RepeatTiming, waits: list[float], busies: list[float], count: int, window_s: float,
           samples: int) -> None:
    del waits[count:], busies[count:]
    timing.wait_s, timing.busy_s = waits, busies
    timing.window_s = window_s
    timing.samples = samples
