"""The profile's stage pass holds a batch's samples as a worker does: until the batch is whole, then lets them go."""

from __future__ import annotations

import time
import weakref

from loaderexp.harness.profile import Split, _stage_pass


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


class Burn:
    """A transform op that burns ``cost_s`` of CPU a call, three times that while ``slow`` is set."""

    def __init__(self, cost_s: float):
        self.cost_s, self.slow = cost_s, False

    def __call__(self, value):
        until = time.thread_time() + self.cost_s * (3 if self.slow else 1)
        while time.thread_time() < until:
            pass
        return value


def test_a_slow_moment_in_one_slice_of_the_stage_pass_does_not_move_the_stage_cost(monkeypatch):
    """The pass is taken in three slices spread over the profile, and a stage's cost is their median: a host that
    slowed every operation x3 for the first slice (as a slow second once read every CIFAR-10 stage 36-38% dear)
    leaves the figure at the operation's cost."""
    import torch

    from loaderexp.harness import profile

    class Dataset(torch.utils.data.Dataset):
        def __init__(self):
            self.transform = Burn(0.0002)

        def __len__(self):
            return 4096

        def __getitem__(self, index):
            sample = torch.zeros(4)
            return sample if self.transform is None else self.transform(sample)

    data, real, slices = Dataset(), profile._stage_pass, []
    op = data.transform

    def sliced(split, indices, budget_s, batch_size):
        op.slow = not slices  # the first slice meets the slow moment
        try:
            found = real(split, indices, budget_s, batch_size)
        finally:
            op.slow = False
        slices.append(set(indices))
        return found

    monkeypatch.setattr(profile, "_stage_pass", sliced)
    found = profile.profile_stages(data, 16, None, 1.0, budget_s=1.0)
    assert len(slices) == profile.SLICES and not set.intersection(*slices)  # each slice its own samples
    burn = next(s for s in found.stages if s.name == "Burn")
    assert 0.00015 < burn.cpu_s < 0.0003, burn  # the op's cost, not the slow slice's 0.6 ms


def _count(items):
    return len(items)


def test_no_batch_of_an_earlier_slice_is_alive_while_a_later_one_runs(monkeypatch):
    """An op whose cost is mostly allocating its output pays for fresh memory as a worker does only while the batch
    being made is the one alive: the first slice's batch, kept for collate, held through the later slices read a
    JPEG folder's ToTensor and Normalize 65-93% dear."""
    from loaderexp.harness import profile

    op, real, alive = CountingOp(), profile._stage_pass, []

    def sliced(split, indices, budget_s, batch_size):
        start = len(op.seen)
        found = real(split, indices, budget_s, batch_size)
        alive.append(max(op.seen[start:]))
        return found

    monkeypatch.setattr(profile, "_stage_pass", sliced)
    profile.profile_stages(Indexed(op, 4096), 8, _count, 1.0, budget_s=0.3)
    assert len(alive) == profile.SLICES and max(alive) == 7  # the batch being made, and none before it
