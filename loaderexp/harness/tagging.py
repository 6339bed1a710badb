"""The wrappers that let the delivery check see what each batch carried (:mod:`.delivery` checks it).

The sampler is wrapped so the main process records every index it hands out
(:class:`RecordingBatchSampler`).  With workers, the dataset and the collate function are wrapped
too, so each batch travels back with the indices it was fetched for (:class:`IndexedDataset`,
:class:`IndexedCollate`): batches cross a process boundary, several in flight, and can be lost,
repeated or reordered.  Without workers nothing is added to the batch: the main process fetches it
right after the sampler yields its indices.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from torch.utils.data import BatchSampler, Dataset, Sampler, default_collate, default_convert


class IndexedDataset(Dataset):
    """Fetches whole batches and tags each with the indices it was fetched for.

    The DataLoader's fetcher calls ``__getitems__`` with a batch's indices when a dataset has it
    and hands the result straight to the collate function, so the tag rides along as a plain
    ``(samples, indices)`` pair into :class:`IndexedCollate`: one tuple per batch, nothing per sample.
    Used with workers only (see the module's docstring).
    """

    def __init__(self, dataset: Dataset, prebatched: bool = False):
        self.dataset = dataset
        self._getitems = getattr(dataset, "__getitems__", None)
        self.prebatched = prebatched  # batch_size=None: the fetcher asks for one item, a batch, at a time

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: int):
        return (self.dataset[index], [index]) if self.prebatched else self.dataset[index]

    def __getitems__(self, indices: list[int]) -> tuple[list, list[int]]:
        dataset = self.dataset
        samples = self._getitems(indices) if self._getitems else [dataset[i] for i in indices]
        return samples, indices


class IndexedCollate:
    """``(indices, batch)``: the user's batch exactly as their collate function (default_collate
    unless ``loader.collate_fn`` names one) makes it, plus its indices packed as int64 bytes.
    Bytes are what the pin-memory thread passes through untouched (it rebuilds a list element by
    element, a tensor it pins) and what pickles fastest between processes: the main process
    unpickles one blob, not an object per index."""

    def __init__(self, collate: Callable[[list], Any] = default_collate):
        self.collate = collate

    def __call__(self, fetched: tuple[list, list[int]]) -> tuple[bytes, Any]:
        samples, indices = fetched
        return array("q", indices).tobytes(), self.collate(samples)


class IndexLog:
    """The indices of one epoch, written into a list sized up front.

    A list that grows as it goes is reallocated a few dozen times an epoch, and each time its
    new block can land between two batch-sized buffers; the allocator then places later batches
    in fresh pages, a cost the loader would not have without the harness.  Writing past the
    size still works (the list grows): that is how a sampler that breaks its promise shows.
    """

    __slots__ = ("values", "size", "batches")
    MAX_CAPACITY = 1 << 22  # 32 MiB of list up front at most; a longer epoch grows past it

    def __init__(self, capacity: int):
        self.values: Any = [0] * min(capacity, self.MAX_CAPACITY)
        self.size = 0  # items written (indices here, bytes in PackedIndexLog)
        self.batches = 0

    def add(self, indices: Any) -> None:
        start = self.size
        self.values[start : start + len(indices)] = indices
        self.size = start + len(indices)
        self.batches += 1

    def recorded(self) -> list[int]:
        found = self.values[: self.size]
        return found.tolist() if isinstance(found, array) else found

    def held_bytes(self) -> int:
        """The memory its buffer holds (a list's slots; the int objects in them the sampler made anyway)."""
        values = self.values
        if isinstance(values, list):
            return 8 * len(values)
        return len(values) * (values.itemsize if isinstance(values, array) else 1)

    def compact(self) -> None:
        """Its epoch is over: its indices as int64s (8 bytes each, where a list holds an int object and a
        pointer): what waits for the check then takes a fifth of the memory (the harness's memory is in
        the tree's figures)."""
        if isinstance(self.values, list):
            self.values = array("q", self.values[: self.size])


class PackedIndexLog(IndexLog):
    """An :class:`IndexLog` of the int64 bytes the tags carry: each batch's tag is copied into a
    bytearray sized up front (a memcpy) and freed with its batch; unpacked only for the check."""

    __slots__ = ()
    ITEM = array("q").itemsize

    def __init__(self, capacity: int):
        super().__init__(0)
        self.values = bytearray(self.ITEM * min(capacity, self.MAX_CAPACITY))

    def recorded(self) -> list[int]:
        return array("q", self.values[: self.size]).tolist()

    def compact(self) -> None:
        pass  # already bytes


class RecordingBatchSampler(Sampler):
    """Batches of the wrapped sampler's indices, recording the current epoch's as they go out.

    Records per batch, not per index: a generator step per index would cost more than the
    rest of the harness together on a fast dataset.
    """

    def __init__(self, sampler: Sampler, batch_size: Optional[int], drop_last: bool):
        self.sampler = sampler
        # batch_size=None: each index is an item that is a batch already; it is yielded alone, as
        # DataLoader's sampler yields it then.
        self.prebatched = batch_size is None
        self.batches = BatchSampler(sampler, batch_size or 1, drop_last)
        self.log = IndexLog(0)
        self.epoch = 0

    def __iter__(self) -> Iterator[Any]:
        # As a training loop does: DistributedSampler reshuffles only when told the epoch.
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self.epoch)
        self.epoch += 1
        self.log = IndexLog(_length(self.sampler))
        record = self.log.add
        for batch in self.batches:
            record(batch)
            yield batch[0] if self.prebatched else batch

    def __len__(self) -> int:
        return len(self.batches)


def _length(sampler: Any) -> int:
    try:
        return len(sampler)
    except TypeError:  # no length, or one that raises: the log grows instead
        return 0


def tags_batches(num_workers: int) -> bool:
    """Whether batches carry their indices: only when they cross from worker processes."""
    return num_workers > 0


@dataclass
class Instrumented:
    """The dataset and the DataLoader arguments that let :class:`DeliveryTracker` check delivery: the
    recorder as the sampler (batch_size=None) or the batch sampler, and a collate that tags each batch."""

    dataset: Dataset
    sampler: Optional[Sampler] = None
    batch_sampler: Optional[Sampler] = None
    collate_fn: Optional[Callable] = None  # None: the loader's own

    def arguments(self) -> dict[str, Any]:
        """The DataLoader keyword arguments it sets."""
        given = {"sampler": self.sampler, "batch_sampler": self.batch_sampler, "collate_fn": self.collate_fn}
        return {name: value for name, value in given.items() if value is not None}


def instrumented(
    dataset: Dataset, recorder: RecordingBatchSampler, num_workers: int, collate: Optional[Callable] = None
) -> Instrumented:
    prebatched = recorder.prebatched  # batch_size=None: the recorder is the sampler, collate only converts
    sampled = Instrumented(dataset, sampler=recorder) if prebatched else Instrumented(dataset, batch_sampler=recorder)
    if tags_batches(num_workers):
        sampled.dataset = IndexedDataset(dataset, prebatched)
        sampled.collate_fn = IndexedCollate(collate or (default_convert if prebatched else default_collate))
    return sampled
