"""The measured loop and its statistics, on a fake clock: exact expected numbers."""

from __future__ import annotations

import pytest
import torch

from loaderexp.harness.delivery import DeliveryTracker
from loaderexp.harness.loop import BudgetSpec, RunTimeout, run_repeat, run_windows
from loaderexp.harness.paired import Side, interleaved, short_epoch
from loaderexp.harness.records import spread
from loaderexp.result.figures import classify


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeLoader:
    """``batches`` batches of ``size`` samples per epoch; start-up and each batch advance the clock."""

    def __init__(self, clock: FakeClock, batches: int, size: int = 4, startup: float = 1.0, per_batch: float = 0.125):
        self.clock, self.batches, self.size, self.startup, self.per_batch = clock, batches, size, startup, per_batch
        self.epochs_started = 0

    def __iter__(self):
        self.epochs_started += 1
        for i in range(self.batches):
            self.clock.advance((self.startup if i == 0 else 0.0) + self.per_batch)
            yield torch.zeros(self.size, 3)

    def __len__(self) -> int:
        return self.batches


def tracker(length=None):
    return DeliveryTracker(recorder=None, dataset_length=length, batch_size=4, drop_last=False, in_order=True, num_workers=0)


def stepping(clock: FakeClock, seconds: float):
    return lambda batch, measured: clock.advance(seconds)


def test_batches_budget_excludes_warmup_and_startup():
    clock = FakeClock()
    loader = FakeLoader(clock, batches=25)
    budget = BudgetSpec(mode="batches", warmup_batches=2, batches=3)
    timing = run_repeat(loader, budget, tracker(), stepping(clock, 0.125), clock)
    assert timing.startup_s == [1.125]
    assert timing.wait_s == [0.125, 0.125, 0.125]
    assert timing.busy_s == [0.125, 0.125, 0.125]
    assert timing.samples == 12
    assert timing.window_s == 0.75
    assert timing.samples_per_s == 16.0
    assert timing.epoch_s == []  # the epoch was cut by the budget


def test_budget_crossing_an_epoch_counts_the_next_start_up():
    clock = FakeClock()
    loader = FakeLoader(clock, batches=3, startup=1.0, per_batch=0.25)
    budget = BudgetSpec(mode="batches", warmup_batches=1, batches=4)
    delivery = tracker(length=12)
    timing = run_repeat(loader, budget, delivery, None, clock)
    assert loader.epochs_started == 2
    assert timing.startup_s == [1.25, 1.25]
    assert timing.wait_s == [0.25, 0.25, 1.25, 0.25]
    assert timing.epoch_s == [1.75]
    assert [e.complete for e in delivery.epochs] == [True, False]
    assert delivery.ok is True


def test_epochs_budget_times_whole_epochs():
    clock = FakeClock()
    loader = FakeLoader(clock, batches=4, startup=0.5, per_batch=0.25)
    timing = run_repeat(loader, BudgetSpec(mode="epochs", warmup_batches=0, epochs=2), tracker(16), None, clock)
    assert timing.epoch_s == [1.5, 1.5]
    assert timing.batches == 8
    assert timing.window_s == 3.0


def test_seconds_budget_stops_once_the_time_is_spent():
    clock = FakeClock()
    loader = FakeLoader(clock, batches=100, startup=0.0, per_batch=0.25)
    timing = run_repeat(loader, BudgetSpec(mode="seconds", warmup_batches=1, seconds=1.0), tracker(), None, clock)
    assert timing.batches == 4
    assert timing.window_s == 1.0


def test_a_repeat_past_its_wall_clock_limit_stops():
    clock = FakeClock()
    loader = FakeLoader(clock, batches=100, startup=0.0, per_batch=1.0)
    with pytest.raises(RunTimeout, match="max_run_seconds=5"):
        run_repeat(loader, BudgetSpec(mode="batches", warmup_batches=0, batches=50, max_seconds=5), tracker(), None, clock)


def test_progress_callback_counts_measured_batches():
    clock = FakeClock()
    seen = []
    run_repeat(FakeLoader(clock, 10), BudgetSpec(mode="batches", warmup_batches=2, batches=3), tracker(), None, clock, seen.append)
    assert seen == [1, 2, 3]


class RoundLoader:
    """Batches in rounds, as ``workers`` workers deliver them: a round every ``round_s``, its batches
    at once; the first round after ``startup``. Worker i makes batches i, i + W, ..."""

    def __init__(self, clock: FakeClock, workers: int, round_s: float, startup: float = 1.0, batches: int = 10_000):
        self.clock, self.workers, self.round_s, self.startup, self.batches = clock, workers, round_s, startup, batches

    def __iter__(self):
        for i in range(self.batches):
            if i % self.workers == 0:
                self.clock.advance((self.startup if i == 0 else 0.0) + self.round_s)
            yield torch.zeros(4, 3)

    def __len__(self) -> int:
        return self.batches


@pytest.mark.parametrize("warmup", [5, 32, 37])
def test_a_window_of_whole_rounds_measures_the_true_rate(warmup):
    """16 workers, a round every 0.1 s: 160 batches/s, wherever the window starts inside a round."""
    clock = FakeClock()
    budget = BudgetSpec(mode="batches", warmup_batches=warmup, batches=100, round_size=16)
    timing = run_repeat(RoundLoader(clock, 16, 0.1), budget, tracker(), None, clock)
    assert timing.batches == 112 and timing.rounds == 7
    assert timing.samples / timing.window_s == pytest.approx(160 * 4)


def test_a_window_of_part_rounds_is_off_by_the_part_round():
    """What the old fixed window of 100 batches after 5 read at 16 workers: 100 batches in 6 rounds' time."""
    clock = FakeClock()
    timing = run_repeat(RoundLoader(clock, 16, 0.1), BudgetSpec(mode="batches", warmup_batches=5, batches=100),
                        tracker(), None, clock)
    assert timing.samples / timing.window_s == pytest.approx(100 * 4 / 0.6)  # +4% against the true 160 x 4


def test_a_short_window_is_extended_by_whole_rounds_to_its_minimum_time():
    clock = FakeClock()
    budget = BudgetSpec(mode="batches", warmup_batches=8, batches=8, round_size=8, min_seconds=0.45)
    timing = run_repeat(RoundLoader(clock, 8, 0.1), budget, tracker(), None, clock)
    assert timing.batches == 40 and timing.window_s == pytest.approx(0.5)


@pytest.mark.parametrize("warmup", [6, 7, 8])
def test_a_side_by_side_window_holds_whole_rounds_and_measures_the_true_rate(warmup):
    """The race's windows, as the measured loop's: 3 workers, a round every 0.07 s (42.9 batches/s), wherever
    the window starts inside a round."""
    clock = FakeClock()
    side = Side(RoundLoader(clock, 3, 0.07), warmup, lambda batch: batch, round_size=3)
    assert interleaved([side], 2, 0.5, clock).rates[0] == pytest.approx([3 * 4 / 0.07] * 2)


def test_a_side_by_side_window_cut_at_any_batch_is_off_by_the_part_round():
    """Cut at the first batch past 0.5 s, the window counted a round's first batch after the whole gap before it."""
    clock = FakeClock()
    cut_anywhere = Side(RoundLoader(clock, 3, 0.07), 5, lambda batch: batch)  # 5 and the opening batch
    assert interleaved([cut_anywhere], 1, 0.5, clock).rates[0][0] == pytest.approx(22 * 4 / 0.56)  # -8%


class CountedPipeline:
    """A :class:`PipelineLoader` that counts the iterators (the worker start-ups) it was asked for."""

    def __init__(self, clock: "FakeClock", per_s: float, depth: int, startup: float = 0.3):
        self.clock, self.per_s, self.depth, self.startup, self.started = clock, per_s, depth, startup, 0

    def __iter__(self):
        self.started += 1
        self.clock.advance(self.startup)
        return iter(PipelineLoader(self.clock, self.per_s, self.depth))


@pytest.mark.parametrize("depth", [0, 8])
def test_a_side_by_side_stream_is_resumed_window_after_window_and_its_banked_batches_are_not_timed(depth):
    """Two sides, 100 and 50 batches/s of 4 samples: each side starts its workers once, and a resumed window reads
    its workers' pace although they banked the pipeline's depth while the other side measured; not knowing the
    depth, the resumed windows count those in no time and read fast."""
    clock = FakeClock()
    fast, slow = CountedPipeline(clock, 100, 8), CountedPipeline(clock, 50, 8)
    sides = [Side(fast, 8, lambda batch: batch, depth=depth), Side(slow, 8, lambda batch: batch, depth=depth)]
    slept: list[float] = []
    rates = interleaved(sides, 4, 0.25, clock, sleep=lambda s: (slept.append(s), clock.advance(s))).rates
    assert (fast.started, slow.started) == (1, 1)
    assert len(slept) == (7 if depth else 0)  # after every window but the last: no window follows it
    assert rates[0][0] == pytest.approx(400) and rates[1][0] == pytest.approx(200)  # fresh: warmed up
    if depth:
        assert rates[0] == pytest.approx([400] * 4) and rates[1] == pytest.approx([200] * 4)
    else:
        # the windows that followed the other side's (F S, S F, F S, S F)
        assert min(rates[0][1], rates[0][3]) > 1.2 * 400 and rates[1][2] > 1.2 * 200


def test_a_side_without_workers_takes_the_copies_another_sides_fork_costs_before_its_window():
    """Forking a side's workers shares this process's pages with them: the next write to each copies it.  A side
    without workers (a resnet18 step on the CPU) paid that in the first window after the other side's start: 0.27 s,
    half its 0.5 s window, every race in which it went first.  A window opens after a round taken unmeasured."""
    clock = FakeClock()
    pages = {"shared": False}

    class Forks(CountedPipeline):
        def __iter__(self):
            pages["shared"] = True
            return super().__iter__()

    def serial(batches=10_000):  # 0 workers: 100 batches/s, fetched in the loop
        for _ in range(batches):
            clock.advance(0.01)
            yield torch.zeros(4, 3)

    class Serial:
        __iter__ = staticmethod(serial)

    def step(batch, measured):  # its first write after a fork copies the pages it writes: 0.2 s
        if pages["shared"]:
            clock.advance(0.2)
            pages["shared"] = False

    pipeline = Forks(clock, 50, 8)
    alone, forked = Side(Serial(), 8, lambda batch: batch, step), Side(pipeline, 8, lambda b: b, depth=8)
    rates = interleaved([alone, forked], 4, 0.25, clock, sleep=clock.advance).rates
    assert rates[0] == pytest.approx([400] * 4) and rates[1] == pytest.approx([200] * 4)
    assert pipeline.started == 1


class WorkersInRounds:
    """``workers`` workers, each ``batch_s`` a batch (batch i on worker i % workers), at most ``depth`` batches ahead
    of the loop: a worker starts a batch once it made its last one and the batch ``depth`` before it was taken."""

    def __init__(self, clock: FakeClock, workers: int, batch_s: float, depth: int, batches: int = 10_000):
        self.clock, self.workers, self.batch_s, self.depth, self.batches = clock, workers, batch_s, depth, batches

    def __iter__(self):
        taken, ready = [], []
        for i in range(self.batches):
            free = taken[i - self.depth] if i >= self.depth else 0.0
            ready.append(max(ready[i - self.workers] if i >= self.workers else 0.0, free) + self.batch_s)
            self.clock.now = max(self.clock.now, ready[i])
            taken.append(self.clock.now)
            yield torch.zeros(4, 3)


def test_a_side_by_side_window_opens_where_a_round_was_just_taken():
    """The JPEG folder, a 50 ms step, 2 workers at 0.26 s a batch each (2 batches every 0.26 s): a resumed window took
    the 4 batches the workers banked, stepping each, while the workers made the next round, so it met that round
    0.2 s early and read one-round windows 63% fast (1,579-1,727 samples/s against 991-1,163 in the race).  Opened
    after a round taken unmeasured, every window reads the workers' pace, whatever its length in rounds."""
    for window_s in (0.25, 0.6, 1.1):
        clock = FakeClock()
        sides = [Side(WorkersInRounds(clock, 2, 0.26, 4), 4, lambda batch: batch,
                      lambda batch, measured: clock.advance(0.05), round_size=2, depth=4) for _ in range(2)]
        rates = interleaved(sides, 4, window_s, clock, sleep=clock.advance, min_rounds=1).rates
        assert rates[0] == pytest.approx([2 * 4 / 0.26] * 4) and rates[1] == pytest.approx([2 * 4 / 0.26] * 4)


class ShortEpochs:
    """An epoch of ``batches``: its workers start (``startup``), then make ``per_s`` batches a second, at most
    ``depth`` ahead of the loop."""

    def __init__(self, clock: FakeClock, per_s: float, depth: int, startup: float, batches: int = 16):
        self.clock, self.per_s, self.depth, self.startup, self.batches = clock, per_s, depth, startup, batches

    def __len__(self) -> int:
        return self.batches

    def __iter__(self):
        self.clock.advance(self.startup)
        taken, ready = [], self.clock.now
        for i in range(self.batches):
            ready = max(ready, taken[i - self.depth] if i >= self.depth else 0.0) + 1 / self.per_s
            self.clock.now = max(self.clock.now, ready)
            taken.append(self.clock.now)
            yield torch.zeros(4, 3)


def test_a_side_by_side_race_over_short_epochs_times_whole_epochs_with_their_start():
    """The JPEG folder: 16 batches an epoch. Windows that let go the banked batches and a round before them left
    the epoch's start and tail untimed, and 4 workers (a costly start, a fast pace) read 20% over 2 where whole
    epochs read 3% under. Here 4 workers make 100 batches/s after a 0.3 s start, 2 make 60 after 0.05 s: per
    epoch, 2 are faster, and the race says so."""
    clock = FakeClock()
    four = Side(ShortEpochs(clock, 100, 8, 0.3), 8, lambda b: b, round_size=4, depth=8, epoch_batches=16)
    two = Side(ShortEpochs(clock, 60, 4, 0.05), 4, lambda b: b, round_size=2, depth=4, epoch_batches=16)
    assert short_epoch(four) and short_epoch(two)
    rates = interleaved([four, two], 4, 0.25, clock, sleep=clock.advance).rates
    assert rates[0] == pytest.approx([4 * 16 / (0.3 + 16 / 100)] * 4)  # 139 samples/s
    assert rates[1] == pytest.approx([4 * 16 / (0.05 + 16 / 60)] * 4)  # 202 samples/s
    long = Side(ShortEpochs(clock, 100, 8, 0.3, batches=10_000), 8, lambda b: b, round_size=4, depth=8,
                epoch_batches=10_000)
    assert not short_epoch(long)  # an epoch of many windows: windows of one stream, as before


def test_a_side_by_side_stream_is_let_go_after_each_window_when_its_idle_workers_memory_is_needed():
    clock = FakeClock()
    fast, slow = CountedPipeline(clock, 100, 8), CountedPipeline(clock, 50, 8)
    sides = [Side(fast, 8, lambda batch: batch, depth=8), Side(slow, 8, lambda batch: batch, depth=8)]
    rates = interleaved(sides, 4, 0.25, clock, keep=lambda: False, sleep=clock.advance).rates
    assert (fast.started, slow.started) == (4, 4)
    assert rates[0] == pytest.approx([400] * 4) and rates[1] == pytest.approx([200] * 4)
    assert all(side.stream is None for side in sides)  # every stream ended with the race


def test_a_seconds_budget_ends_on_a_round_boundary():
    clock = FakeClock()
    budget = BudgetSpec(mode="seconds", warmup_batches=8, seconds=0.25, round_size=8)
    timing = run_repeat(RoundLoader(clock, 8, 0.1), budget, tracker(), None, clock)
    assert timing.batches % 8 == 0
    assert timing.samples / timing.window_s == pytest.approx(80 * 4)


def test_repeats_are_consecutive_windows_of_one_warmed_stream():
    """Later windows start at the batch where the last one ended: no new iterator, no second
    warm-up, nothing counted twice; across an epoch's end the stream goes on, its start-up counted."""
    clock = FakeClock()
    loader = FakeLoader(clock, batches=10, size=4, startup=1.0, per_batch=0.125)
    budget = BudgetSpec(mode="batches", warmup_batches=2, batches=3)
    seen = []
    windows = run_windows(loader, budget, tracker(), None, clock, seen.append, lambda done: len(done) < 4)
    assert len(windows) == 4
    assert [w.batches for w in windows] == [3, 3, 3, 3]
    assert windows[0].warmup_s == pytest.approx(1.25) and all(w.warmup_s == 0 for w in windows[1:])
    assert [w.window_s for w in windows[:2]] == [0.375, 0.375]
    # Batches 3..10 are the first epoch's; the third window crosses into the second epoch and
    # pays its start-up (1 s) as training would.
    assert loader.epochs_started == 2
    assert windows[2].window_s == pytest.approx(0.375 + 1.0) and windows[2].startup_s == [1.125]
    assert windows[3].window_s == pytest.approx(0.375) and windows[3].startup_s == []
    assert sum(w.samples for w in windows) == 12 * 4
    assert seen == list(range(1, 13))  # the heartbeat counts across windows


def test_a_window_of_whole_rounds_stays_exact_when_windows_follow_each_other():
    clock = FakeClock()
    budget = BudgetSpec(mode="batches", warmup_batches=37, batches=100, round_size=16)
    windows = run_windows(RoundLoader(clock, 16, 0.1), budget, tracker(), None, clock, None, lambda done: len(done) < 5)
    assert len(windows) == 5
    for window in windows:
        assert window.batches == 112 and window.samples / window.window_s == pytest.approx(160 * 4)


class PipelineLoader:
    """Workers that make ``per_s`` batches a second and run at most ``depth`` batches ahead of the loop: a
    batch is made once the one ``depth`` before it was taken (its slot freed), as DataLoader's prefetch does."""

    def __init__(self, clock: FakeClock, per_s: float, depth: int, batches: int = 10_000):
        self.clock, self.per_s, self.depth, self.batches = clock, per_s, depth, batches

    def __iter__(self):
        taken, ready = [], 0.0
        for i in range(self.batches):
            ready = max(ready, taken[i - self.depth] if i >= self.depth else 0.0) + 1 / self.per_s
            self.clock.now = max(self.clock.now, ready)
            taken.append(self.clock.now)
            yield torch.zeros(4, 3)


class PausingProbe:
    """A memory reading that takes ``seconds`` at the end of the warm-up, as the job's probe does."""

    def __init__(self, clock: FakeClock, seconds: float):
        self.clock, self.seconds = clock, seconds

    def warmed_up(self) -> None:
        self.clock.advance(self.seconds)

    def windows_open(self) -> None:
        pass

    def windows_done(self) -> bool:
        return False

    def epoch_done(self) -> None:
        pass

    def epoch_ending(self) -> None:
        pass

    def read_enough(self) -> bool:
        return False


@pytest.mark.parametrize("depth", [0, 8])
def test_batches_banked_while_the_probe_reads_are_not_counted_in_the_window(depth):
    """The probe's reading pauses the loop and the workers bank up to the pipeline's depth: with the depth known,
    those are drained before the window, which then reads the workers' pace (100 batches/s, 4 samples each);
    not knowing it, the window of 8 counts the 8 banked batches in no time at all."""
    clock = FakeClock()
    budget = BudgetSpec(mode="batches", warmup_batches=8, batches=8, depth=depth)
    [timing] = run_windows(PipelineLoader(clock, 100, 8), budget, tracker(), None, clock, None, None,
                           PausingProbe(clock, 1.0))
    if depth:
        assert timing.samples / timing.window_s == pytest.approx(400) and timing.warmup_batches == 16
    else:
        assert timing.window_s < 0.02  # the old reading: all eight were made during the pause


def test_spread_flags_noise_above_threshold():
    steady = spread([100.0, 101.0, 99.0])
    assert steady.median == 100.0
    assert steady.relative == pytest.approx(0.01)
    assert not steady.noisy(0.10)
    shaky = spread([100.0, 70.0, 130.0, 100.0])
    assert shaky.relative == pytest.approx(0.15)
    assert shaky.noisy(0.10)
    assert not spread([100.0]).noisy(0.10)  # one value has no spread to judge


@pytest.mark.parametrize(
    "wait,copy,compute,expected",
    [
        (0.5, 0.1, 1.0, "loader-bound"),
        (0.05, 2.0, 1.0, "transfer-bound"),
        (0.05, 0.1, 1.0, "compute-bound"),
        (0.0, 0.0, 0.0, "unknown"),
    ],
)
def test_classify_names_the_limiting_part(wait, copy, compute, expected):
    assert classify(wait, copy, compute) == expected


def test_resource_monitor_sees_the_worker_processes():
    from torch.utils.data import DataLoader

    from loaderexp.data.synthetic import SyntheticImages
    from loaderexp.harness.resources import ResourceMonitor

    loader = DataLoader(SyntheticImages(num_samples=512, shape=(3, 8, 8)), batch_size=16, num_workers=2)
    with ResourceMonitor(interval_s=0.02) as monitor:
        for _ in loader:
            __import__("time").sleep(0.005)
    stats = monitor.stats()
    assert stats.processes_peak >= 3  # main process and two workers
    assert stats.pss_peak_mb > 0 and stats.uss_peak_mb > 0
    assert stats.samples >= 1
