"""The delivery check catches loaders that lose, repeat or invent samples."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler, WeightedRandomSampler

from loaderexp.data.synthetic import SyntheticImages
from loaderexp.harness.delivery import DeliveryTracker, Promise, check_epoch
from loaderexp.harness.loop import BudgetSpec, run_repeat
from loaderexp.harness.tagging import RecordingBatchSampler, instrumented

EPOCH = BudgetSpec(mode="epochs", warmup_batches=0, epochs=1)


def measure_delivery(sampler, dataset, batch_size=8, drop_last=False, num_workers=0, wrap=lambda loader: loader):
    recorder = RecordingBatchSampler(sampler, batch_size, drop_last)
    parts = instrumented(dataset, recorder, num_workers)
    loader = DataLoader(parts.dataset, num_workers=num_workers, **parts.arguments())
    delivery = DeliveryTracker(recorder=recorder, dataset_length=len(dataset), batch_size=batch_size,
                               drop_last=drop_last, in_order=True, num_workers=num_workers)
    run_repeat(wrap(loader), EPOCH, delivery)
    return delivery


class RepeatingSampler(RandomSampler):
    """Claims a permutation, but repeats its first index in place of its last."""

    def __iter__(self):
        indices = list(super().__iter__())
        indices[-1] = indices[0]
        return iter(indices)


class ShortSampler(SequentialSampler):
    """Its length promises every index; it yields one fewer."""

    def __iter__(self):
        return iter(range(len(self.data_source) - 1))


def dataset(n=50):
    return SyntheticImages(num_samples=n, shape=(3, 4, 4))


def test_correct_random_and_sequential_epochs_pass():
    data = dataset()
    assert measure_delivery(RandomSampler(data), data).ok is True
    assert measure_delivery(SequentialSampler(data), data, num_workers=2).ok is True


def test_drop_last_expects_the_last_short_batch_missing():
    data = dataset(50)
    delivery = measure_delivery(SequentialSampler(data), data, batch_size=8, drop_last=True)
    assert delivery.ok is True
    assert delivery.epochs[0].delivered == 48


def test_replacement_sampler_promises_its_count_not_uniqueness():
    data = dataset(20)
    sampler = WeightedRandomSampler(torch.ones(20), num_samples=60, replacement=True)
    delivery = measure_delivery(sampler, data)
    assert delivery.ok is True
    assert delivery.epochs[0].delivered == 60


def test_sampler_that_repeats_an_index_is_caught():
    data = dataset()
    delivery = measure_delivery(RepeatingSampler(data), data)
    assert delivery.ok is False
    assert any("repeated 1 indices" in p for p in delivery.problems)


def test_sampler_that_drops_an_index_is_caught():
    data = dataset()
    delivery = measure_delivery(ShortSampler(data), data)
    assert delivery.ok is False
    assert any("yielded 49 indices, its length promises 50" in p for p in delivery.problems)


def test_loader_that_loses_a_batch_is_caught():
    def skip_third_batch(loader):
        class Lossy:
            def __iter__(self):
                for i, batch in enumerate(loader):
                    if i != 2:
                        yield batch

            def __len__(self):
                return len(loader)

        return Lossy()

    data = dataset()
    # With workers each batch's tag says which indices went missing.
    delivery = measure_delivery(SequentialSampler(data), data, num_workers=2, wrap=skip_third_batch)
    assert delivery.ok is False
    assert any("8 missing" in p for p in delivery.problems)
    # Without workers nothing is tagged; the count of batches still shows the loss.
    delivery = measure_delivery(SequentialSampler(data), data, wrap=skip_third_batch)
    assert delivery.ok is False
    assert delivery.problems[0] == "delivered 6 of the 7 batches the sampler yielded"


def test_batches_are_tagged_only_when_they_come_from_workers():
    data = dataset(20)
    for workers, tagged in ((0, False), (2, True)):
        recorder = RecordingBatchSampler(SequentialSampler(data), 8, False)
        parts = instrumented(data, recorder, workers)
        batch = next(iter(DataLoader(parts.dataset, num_workers=workers, **parts.arguments())))
        tracker = DeliveryTracker(recorder=recorder, dataset_length=20, batch_size=8, drop_last=False, in_order=True,
                                  num_workers=workers)
        tracker.start_epoch()
        images, labels = tracker.payload(batch)  # the user's batch, exactly as default_collate made it
        assert torch.equal(images, data.images[:8]) and torch.equal(labels, data.targets[:8])
        assert isinstance(batch[0], bytes) is tagged
        assert (tracker.take is not None) is tagged  # without workers nothing is logged per batch
        if tagged:
            tracker.take(batch)
        assert tracker.delivered() == 8


def test_partial_epoch_must_be_a_prefix_of_what_was_sampled():
    promise = Promise(count=10, unique=True, universe=10)
    ok = check_epoch(promise, [3, 1, 2, 0], [3, 1], complete=False, batch_size=2, drop_last=False, in_order=True)
    assert ok.ok
    wrong = check_epoch(promise, [3, 1, 2, 0], [3, 7], complete=False, batch_size=2, drop_last=False, in_order=True)
    assert wrong.problems == ["1 delivered samples were never sampled"]


class Unsharded(IterableDataset):
    """Every worker yields the whole stream: the classic IterableDataset mistake."""

    def __len__(self):
        return 32

    def __iter__(self):
        return iter(torch.arange(32).float())


def test_iterable_dataset_that_does_not_shard_is_caught():
    loader = DataLoader(Unsharded(), batch_size=8, num_workers=2)
    delivery = DeliveryTracker(recorder=None, dataset_length=32, batch_size=8, drop_last=False, in_order=True,
                               num_workers=2)
    run_repeat(loader, EPOCH, delivery)
    assert delivery.ok is False
    assert any("does not shard" in p for p in delivery.problems)


class LongSampler(SequentialSampler):
    """Its length promises every index once; it yields the first five twice more."""

    def __iter__(self):
        return iter([*range(len(self.data_source)), *range(5)])


def test_a_sampler_yielding_more_than_its_length_is_caught():
    data = dataset(20)
    delivery = measure_delivery(LongSampler(data), data, batch_size=8)
    assert delivery.ok is False
    assert any("yielded 25 indices, its length promises 20" in p for p in delivery.problems)
    assert delivery.epochs[0].delivered == 25  # the pre-sized log grew to hold them all


def test_epochs_are_checked_after_the_measurement_not_at_each_boundary(monkeypatch):
    import loaderexp.harness.delivery as module

    data = dataset(16)
    checked = []
    real = module.check_epoch
    monkeypatch.setattr(module, "check_epoch", lambda *a, **k: checked.append(1) or real(*a, **k))
    recorder = RecordingBatchSampler(SequentialSampler(data), 4, False)
    loader = DataLoader(data, batch_sampler=recorder)
    delivery = DeliveryTracker(recorder=recorder, dataset_length=16, batch_size=4, drop_last=False, in_order=True,
                               num_workers=0)
    run_repeat(loader, BudgetSpec(mode="epochs", warmup_batches=0, epochs=3), delivery)
    assert checked == []  # nothing counted inside the measured window
    assert delivery.ok is True and len(delivery.epochs) == 3 and len(checked) == 3
