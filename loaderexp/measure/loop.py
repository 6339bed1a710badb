"""The measured loop: how long a training loop waits for each batch from a DataLoader.

Plain Python and torch only (no Hydra, no MLflow), so it can be driven by tests with a fake
clock and by the benchmark against a bare ``for batch in loader`` loop.  The clock is chosen
once by the caller; CUDA work is synchronised by the consumer, not here.

One *repeat* starts a fresh iterator (workers start, unless persistent), excludes the first
``warmup_batches`` from steady-state figures, and then measures until the budget is spent:
a number of batches, whole epochs, or seconds.  When an epoch ends inside the budget the next
one starts, its start-up cost counted, as in training.

With workers, batches come in *rounds*: worker ``i`` makes batches ``i, i + W, i + 2W, ...``
and the workers finish theirs at about the same time.  A window that starts or ends inside a
round counts a part-round of batches that were made before it or will be paid for after it (at
16 workers and 100 batches, several percent).  So a window holds whole rounds
(``BudgetSpec.round_size`` = W batches): it runs from one batch to the batch W x k later, which
the same worker made k batch-times later, and the rate is exact wherever the rounds' phases lie.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from loaderexp.measure.delivery import DeliveryTracker
from loaderexp.measure.transfer import batch_size_and_bytes

Clock = Callable[[], float]
Process = Callable[[Any, bool], None]  # (batch, measured) -> None: copy to device, train step


@dataclass(frozen=True)
class BudgetSpec:
    mode: str  # "batches" | "epochs" | "seconds"
    warmup_batches: int = 5
    batches: int = 100
    epochs: int = 1
    seconds: float = 5.0
    max_seconds: float = 900.0  # wall-clock limit of one repeat (one window, its warm-up included)
    round_size: int = 1  # batches per round (one per worker): windows hold whole rounds
    min_seconds: float = 0.0  # budget=batches: a window lasts at least this long (more rounds if need be)


class RunTimeout(RuntimeError):
    """A repeat ran past its wall-clock limit."""


@dataclass
class RepeatTiming:
    startup_s: list[float] = field(default_factory=list)  # iterator creation -> first batch, per epoch
    epoch_s: list[float] = field(default_factory=list)  # wall time of each complete epoch
    wait_s: list[float] = field(default_factory=list)  # end of the previous batch's work -> arrival
    busy_s: list[float] = field(default_factory=list)  # copy + step per measured batch
    samples: int = 0
    sample_bytes: float = 0.0  # of one sample, from the first measured batch
    window_s: float = 0.0  # end of warm-up -> last measured batch processed
    warmup_s: float = 0.0  # repeat start -> end of warm-up (start-up and warm-up batches)
    round_size: int = 1

    @property
    def rounds(self) -> float:
        return self.batches / self.round_size

    @property
    def batches(self) -> int:
        return len(self.wait_s)

    @property
    def bytes(self) -> int:
        return round(self.samples * self.sample_bytes)

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.window_s if self.window_s > 0 else 0.0


def run_repeat(
    loader: Iterable,
    budget: BudgetSpec,
    delivery: DeliveryTracker,
    process: Optional[Process] = None,
    clock: Clock = time.perf_counter,
    on_batch: Optional[Callable[[int], None]] = None,
) -> RepeatTiming:
    """One window of ``loader`` under ``budget``, from a fresh iterator: :func:`run_windows` with one."""
    return run_windows(loader, budget, delivery, process, clock, on_batch)[0]


def run_windows(
    loader: Iterable,
    budget: BudgetSpec,
    delivery: DeliveryTracker,
    process: Optional[Process] = None,
    clock: Clock = time.perf_counter,
    on_batch: Optional[Callable[[int], None]] = None,
    another: Optional[Callable[[list[RepeatTiming]], bool]] = None,
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
    would.  Per batch the loop does as little as a bare ``for batch in loader`` allows: one
    clock read (two with a step), a few stores and compares, and nothing else: on a fast
    in-memory dataset each Python operation shows, and what the loop touches between batches
    evicts what the loader's own code would find in cache.  Everything else (samples, bytes,
    epoch checks) is counted once, outside the loop.  The timings go into lists sized up front:
    a list that grows is reallocated every few dozen batches, and a block kept between two
    batch-sized buffers moves where later batches land, a cost the bare loop would not have.
    ``on_batch(count)`` follows every measured batch with the count across windows: the
    heartbeat that the measuring process's parent watches for stalls, and what the progress bar counts.
    """
    windows: list[RepeatTiming] = []
    timing = RepeatTiming(round_size=budget.round_size)
    capacity = _expected_batches(loader, budget)
    waits, busies = [0.0] * capacity, [0.0] * capacity  # busy stays 0 without a step
    count = 0  # measured batches in this window
    before = 0  # measured batches in the windows before it
    seen = 0  # batches including warm-up
    warmup = budget.warmup_batches
    per_round = budget.round_size
    batch_limit = whole_rounds(budget.batches, per_round) if budget.mode == "batches" else sys.maxsize
    seconds = budget.seconds if budget.mode == "seconds" else math.inf
    min_seconds = budget.min_seconds if budget.mode == "batches" else 0.0
    take, payload = delivery.take, delivery.payload  # take is None when nothing is logged per batch
    repeat_start = done = clock()
    hard_deadline = repeat_start + budget.max_seconds
    deadline = math.inf
    window_start: Optional[float] = None
    delivered_before = delivery.delivered_samples() if warmup == 0 else 0
    epochs_done = 0
    finished = False
    while not finished:
        delivery.start_epoch()
        epoch_start = previous = clock()
        epoch_first = seen
        iterator = iter(loader)
        complete = False
        try:  # entered once per epoch: nothing is paid per batch
            for batch in iterator:  # `batch` is the only reference, as in a bare loop
                arrived = clock()
                if seen == epoch_first:
                    timing.startup_s.append(arrived - epoch_start)
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
                        window_start = previous
                        deadline = window_start + seconds
                        timing.warmup_s = previous - repeat_start
                        samples, size = batch_size_and_bytes(payload(batch))
                        timing.sample_bytes = size / max(samples, 1)  # collated samples share a shape
                    if count < capacity:
                        waits[count] = arrived - previous
                        busies[count] = done - arrived
                    else:
                        waits.append(arrived - previous)
                        busies.append(done - arrived)
                    count += 1
                    if on_batch is not None:
                        on_batch(before + count)
                    if count % per_round == 0 and (
                        (count >= batch_limit and done - window_start >= min_seconds) or done >= deadline
                    ):
                        _close(timing, waits, busies, count, done - window_start,
                               delivery.delivered_samples() - delivered_before)
                        windows.append(timing)
                        if another is None or budget.mode == "epochs" or not another(windows):
                            finished = True
                            break
                        # The next window starts here, on the same iterator.
                        timing = RepeatTiming(round_size=per_round, sample_bytes=timing.sample_bytes)
                        waits, busies = [0.0] * capacity, [0.0] * capacity
                        before += count
                        count = 0
                        delivered_before = delivery.delivered_samples()
                        # Windows tile the stream: this bookkeeping falls into the next wait.
                        window_start = previous = done
                        deadline = window_start + seconds
                        hard_deadline = window_start + budget.max_seconds
                        continue
                elif seen == warmup:
                    delivered_before = delivery.delivered_samples()
                if done > hard_deadline:
                    raise RunTimeout(f"a repeat ran past bench.max_run_seconds={budget.max_seconds:g}")
                previous = done
            else:
                complete = True
        except RuntimeError as error:
            named = with_worker_exits(error, iterator)
            if named is error:
                raise
            raise named from error
        delivery.end_epoch(complete, seen - epoch_first)
        if complete:
            epochs_done += 1
            timing.epoch_s.append(clock() - epoch_start)
            if budget.mode == "epochs" and epochs_done >= budget.epochs:
                finished = True
            if seen == 0:
                raise ValueError(
                    "the loader yielded no batch in a whole epoch "
                    "(an empty dataset, or drop_last with fewer samples than batch_size)"
                )
        del iterator  # shuts non-persistent workers down before the next repeat
    if not windows or windows[-1] is not timing:  # the budget ended with the epochs, not in a window
        _close(timing, waits, busies, count, done - window_start if window_start is not None else 0.0,
               delivery.delivered_samples() - delivered_before if window_start is not None else 0)
        windows.append(timing)
    return windows


def _close(timing: RepeatTiming, waits: list[float], busies: list[float], count: int, window_s: float,
           samples: int) -> None:
    del waits[count:], busies[count:]
    timing.wait_s, timing.busy_s = waits, busies
    timing.window_s = window_s
    timing.samples = samples


def with_worker_exits(error: RuntimeError, iterator: Any) -> RuntimeError:
    """torch names a dead worker's signal only when its SIGCHLD handler wins the race with the broken
    pipe; otherwise it says "exited unexpectedly".  Its worker processes know how they ended: say it
    in torch's own words, so the fault is classified the same either way."""
    if "exited unexpectedly" not in str(error):
        return error
    ends = []
    for worker in getattr(iterator, "_workers", ()):
        code = getattr(worker, "exitcode", None)
        if code is not None and code < 0:
            try:
                name = signal.strsignal(-code) or str(-code)
            except ValueError:
                name = str(-code)
            ends.append(f"DataLoader worker (pid {worker.pid}) is killed by signal: {name}.")
    return RuntimeError(f"{error} {' '.join(ends)}") if ends else error


def whole_rounds(batches: int, round_size: int) -> int:
    """``batches`` rounded up to whole rounds."""
    return -(-batches // round_size) * round_size


def _expected_batches(loader: Iterable, budget: BudgetSpec) -> int:
    """Measured batches a repeat will most likely take (its timing lists are sized to it)."""
    if budget.mode == "batches":
        return whole_rounds(budget.batches, budget.round_size)
    if budget.mode == "epochs":
        try:
            return min(max(len(loader) * budget.epochs - budget.warmup_batches, 0), 1 << 20)  # type: ignore[arg-type]
        except TypeError:
            pass
    return 4096
