"""The profile's stage pass holds a batch's samples as a worker does: until the batch is whole, then lets them go."""

from __future__ import annotations

import gc
import time
import weakref

import torch

from loaderexp.harness.profile import Split, _stage_pass, profile_stages


class _Output:
    """A transform's output, which a weak reference can watch."""


class CountingOp:
    """A transform op that records how many of its earlier outputs are still alive each time it is called."""

    def __init__(self, sleep_s: float = 0.0):
        self.alive: weakref.WeakSet = weakref.WeakSet()
        self.seen: list[int] = []
        self.sleep_s = sleep_s

    def __call__(self, _value):
        self.seen.append(len(self.alive))
        if self.sleep_s:
            time.sleep(self.sleep_s)
        out = _Output()
        self.alive.add(out)
        return out


class Indexed:
    """A map-style dataset with a ``transform`` attribute, as torchvision's are."""

    def __init__(self, op: CountingOp, length: int = 50):
        self.transform, self.length = op, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return index if self.transform is None else self.transform(index)


def test_a_batchs_samples_are_held_until_it_is_whole_and_let_go_before_the_next():
    op = CountingOp()
    _, batch, done = _stage_pass(Split(Indexed(op)), list(range(50)), budget_s=1e9, batch_size=8)
    assert done == 50
    assert op.seen[:16] == [*range(8), *range(8)]  # the samples of the batch being made, and none before it
    assert max(op.seen) == 7
    assert len(batch) == 2  # the last batch, as far as the samples went: kept for collate


def test_the_pass_ends_with_a_whole_batch_past_its_budget():
    op = CountingOp()  # microseconds a sample: a batch of 8 is whole long before twice the budget
    _, batch, done = _stage_pass(Split(Indexed(op, 10**6)), range(10**6), budget_s=0.2, batch_size=8)
    assert done % 8 == 0 and len(batch) == 8 and done < 10**6


def test_samples_too_slow_to_finish_a_batch_end_the_pass_at_twice_its_budget():
    op = CountingOp(sleep_s=0.005)
    _, batch, done = _stage_pass(Split(Indexed(op, length=64)), list(range(64)), budget_s=0.01, batch_size=64)
    assert 3 <= done < 64 and len(batch) == done


class FreezeWatch(CountingOp):
    """An op that records whether the objects alive before the profile were out of the collector's full passes."""

    def __init__(self):
        super().__init__()
        self.frozen: list[bool] = []

    def __call__(self, value):
        self.frozen.append(gc.get_freeze_count() > 0)
        return torch.zeros(4)


class Tensors(Indexed):
    """Samples a DataLoader can collate."""

    def __getitem__(self, index: int):
        return torch.zeros(4) if self.transform is None else self.transform(index)


def _tensor_dataset(op: CountingOp) -> Tensors:
    return Tensors(op, length=400)


def test_the_in_process_loops_run_with_what_the_process_held_frozen_and_thaw_it_after():
    """In the sweep's fork the collector's first full pass writes to every inherited page: the stage pass and the
    loops without workers run with those objects frozen, and the process is as it was after."""
    gc.unfreeze()
    op = FreezeWatch()
    profile_stages(_tensor_dataset(op), 8, None, 1, 0.3)
    assert op.frozen and op.frozen[0]  # the stage pass (and the warm-up before it) ran frozen
    assert gc.get_freeze_count() == 0


def test_what_was_frozen_before_the_profile_stays_frozen():
    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0
        profile_stages(_tensor_dataset(FreezeWatch()), 8, None, 1, 0.3)
        # Frozen objects that die leave the count (it may fall), but a thaw would empty it
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_a_pass_given_longer_for_its_batch_finishes_it():
    """The untimed pass before the stages' holds a whole batch (a kept heap grows to one there, not in the timed
    pass), unless a batch takes longer than the timed pass's budget."""
    op = CountingOp(sleep_s=0.005)
    _, batch, done = _stage_pass(Split(Indexed(op, length=64)), list(range(64)), budget_s=0.01, batch_size=16,
                                 batch_within_s=10.0)
    assert done == 16 and len(batch) == 16


class FetchesBatches:
    """A dataset that fetches a batch at once (``__getitems__``, as Hugging Face's do): 2 ms of CPU a call, against
    2 ms for each sample one at a time."""

    def __len__(self) -> int:
        return 4096

    @staticmethod
    def _burn(ms: float) -> None:
        end = time.thread_time() + ms / 1000
        while time.thread_time() < end:
            pass

    def __getitem__(self, index: int):
        self._burn(2.0)
        return torch.tensor([index])

    def __getitems__(self, indices: list[int]):
        self._burn(2.0)
        return [torch.tensor([i]) for i in indices]


def test_a_dataset_that_fetches_batches_is_timed_a_batch_at_a_time_as_dataloader_fetches_it():
    """A Hugging Face dataset's stage read 0.204 ms a sample, one __getitem__ at a time, where DataLoader's loop
    (one __getitems__ a batch) cost 0.061: the stages added up to 354% of the loop."""
    split = Split(FetchesBatches())
    assert split.fetch[0][0] == "__getitems__" and "a batch's samples at a time" in split.text
    clocks, batch, done = _stage_pass(split, list(range(4096)), budget_s=0.1, batch_size=32)
    assert done % 32 == 0 and len(batch) == 32 and done >= 64
    per_sample = clocks["__getitems__"].cpu / done
    assert 0.9 * 2.0 / 32 <= 1000 * per_sample <= 1.5 * 2.0 / 32  # a call's 2 ms over its 32 samples, not 2 ms each
