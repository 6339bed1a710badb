"""Did the loader deliver what the sampler promised?  A fast loader that loses data is not fast.

The dataset is wrapped so each batch travels with the indices it was fetched for, and the
sampler is wrapped so the main process records every index it hands out.  At the end of each
epoch (or of a partial one, when the measured budget ends first) the delivered indices are
compared with the recorded ones and with the sampler's promise: every index exactly once for
samplers without replacement, ``num_samples`` indices for samplers with replacement, and the
last short batch missing under ``drop_last``.  Iterable datasets order themselves, so for them
only the count is checked against ``len(dataset)``: a dataset that does not shard across
workers delivers every sample once per worker.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sized

import torch
from torch.utils.data import Dataset, Sampler, default_collate
from torch.utils.data.distributed import DistributedSampler

from loaderexp.transfer import tensors_of


class IndexedDataset(Dataset):
    """Fetches whole batches and tags each with the indices it was fetched for.

    The DataLoader's fetcher calls ``__getitems__`` with a batch's indices when a dataset has it;
    the tag rides on the sample list into :func:`indexed_collate`, so the cost is one small
    tensor per batch, not a wrapper per sample.
    """

    def __init__(self, dataset: Dataset):
        self.dataset = dataset
        self._getitems = getattr(dataset, "__getitems__", None)

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: int):
        return self.dataset[index]

    def __getitems__(self, indices: list[int]) -> "_TaggedSamples":
        samples = self._getitems(indices) if self._getitems else [self.dataset[i] for i in indices]
        return _TaggedSamples(samples, indices)


class _TaggedSamples(list):
    def __init__(self, samples: list, indices: list[int]):
        super().__init__(samples)
        self.indices = indices


def indexed_collate(samples: _TaggedSamples) -> tuple[torch.Tensor, Any]:
    """``(indices, batch)``: the user's batch exactly as default_collate makes it, plus its indices."""
    return torch.as_tensor(samples.indices, dtype=torch.int64), default_collate(samples)


class RecordingSampler(Sampler):
    """Passes the wrapped sampler's indices through, keeping the ones of the current epoch."""

    def __init__(self, sampler: Sampler):
        self.sampler = sampler
        self.indices: list[int] = []

    def __iter__(self) -> Iterator[int]:
        self.indices = []
        record = self.indices.append
        for index in self.sampler:
            record(int(index))
            yield index

    def __len__(self) -> int:
        return len(self.sampler)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Promise:
    """What a sampler promises for one full epoch."""

    count: Optional[int]  # indices per epoch (None: unknown)
    unique: bool  # each index at most once
    universe: int  # valid indices are 0 .. universe-1


def promise_of(sampler: Any, dataset_length: int) -> Promise:
    if isinstance(sampler, DistributedSampler):
        # DistributedSampler pads by repeating indices only when the data set is smaller
        # than the padding, so within one rank every index is unique otherwise.
        padding = sampler.total_size - dataset_length
        return Promise(count=sampler.num_samples, unique=padding <= dataset_length, universe=dataset_length)
    replacement = bool(getattr(sampler, "replacement", False))
    count = len(sampler) if isinstance(sampler, Sized) else None
    return Promise(count=count, unique=not replacement, universe=dataset_length)


@dataclass
class EpochDelivery:
    complete: bool
    delivered: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_epoch(
    promise: Promise,
    sampled: list[int],
    delivered: list[int],
    *,
    complete: bool,
    batch_size: int,
    drop_last: bool,
    in_order: bool,
) -> EpochDelivery:
    """Compare one epoch's delivered indices with the sampled ones and the promise."""
    problems: list[str] = []
    if complete and promise.count is not None and len(sampled) != promise.count:
        problems.append(f"sampler yielded {len(sampled)} indices, its length promises {promise.count}")
    out_of_range = [i for i in sampled if not 0 <= i < promise.universe]
    if out_of_range:
        problems.append(f"{len(out_of_range)} sampled indices outside 0..{promise.universe - 1}")
    if promise.unique:
        repeated = len(sampled) - len(set(sampled))
        if repeated:
            problems.append(f"sampler repeated {repeated} indices although it samples without replacement")
    expected = sampled
    if complete and drop_last:
        expected = sampled[: len(sampled) // batch_size * batch_size]
    if complete:
        if Counter(delivered) != Counter(expected):
            missing = sum((Counter(expected) - Counter(delivered)).values())
            extra = sum((Counter(delivered) - Counter(expected)).values())
            problems.append(f"delivered {len(delivered)} samples: {missing} missing, {extra} unexpected")
        elif in_order and delivered != expected:
            problems.append("delivered out of the sampler's order although in_order=true")
    else:
        # The epoch was cut by the budget: what arrived must be part of what was sampled.
        extra = sum((Counter(delivered) - Counter(sampled)).values())
        if extra:
            problems.append(f"{extra} delivered samples were never sampled")
        elif in_order and delivered != sampled[: len(delivered)]:
            problems.append("delivered out of the sampler's order although in_order=true")
    return EpochDelivery(complete=complete, delivered=len(delivered), problems=problems)


def check_iterable_epoch(dataset_length: Optional[int], delivered: int, complete: bool, num_workers: int) -> EpochDelivery:
    """Iterable datasets: only the count can be checked, and only for a whole epoch."""
    problems: list[str] = []
    if complete and dataset_length is not None and delivered != dataset_length:
        problems.append(f"delivered {delivered} samples for a dataset of length {dataset_length}")
        if num_workers > 1 and delivered == dataset_length * num_workers:
            problems.append(
                f"every sample arrived {num_workers} times: the IterableDataset does not shard across workers "
                "(split its stream with torch.utils.data.get_worker_info())"
            )
    return EpochDelivery(complete=complete, delivered=delivered, problems=problems)


def split_indexed(batch: Any) -> tuple[Optional[torch.Tensor], Any]:
    """``(indices, payload)`` of a batch collated from :class:`IndexedDataset` samples."""
    return batch[0], batch[1]


class DeliveryTracker:
    """Follows one loader's epochs: strips the indices off each batch and checks each epoch."""

    def __init__(
        self,
        *,
        recorder: Optional[RecordingSampler],
        dataset_length: Optional[int],
        batch_size: int,
        drop_last: bool,
        in_order: bool,
        num_workers: int,
    ):
        self.recorder = recorder
        self.indexed = recorder is not None
        self.dataset_length = dataset_length
        self.promise = promise_of(recorder.sampler, dataset_length or 0) if recorder is not None else None
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.in_order = in_order
        self.num_workers = num_workers
        self.epochs: list[EpochDelivery] = []
        self._ids: list[torch.Tensor] = []
        self._count = 0

    def start_epoch(self) -> None:
        self._ids = []
        self._count = 0

    def take(self, batch: Any) -> Any:
        """The batch as the user's dataset made it (indices removed); counts its samples."""
        if self.indexed:
            ids, payload = split_indexed(batch)
            self._ids.append(ids)
            self._count += len(ids)
            return payload
        self._count += batch_length(batch)
        return batch

    def end_epoch(self, complete: bool) -> EpochDelivery:
        if self.indexed:
            delivered = torch.cat(self._ids).tolist() if self._ids else []
            epoch = check_epoch(
                self.promise,  # type: ignore[arg-type]
                list(self.recorder.indices),  # type: ignore[union-attr]
                delivered,
                complete=complete,
                batch_size=self.batch_size,
                drop_last=self.drop_last,
                in_order=self.in_order,
            )
        else:
            epoch = check_iterable_epoch(self.dataset_length, self._count, complete, self.num_workers)
        self.epochs.append(epoch)
        return epoch

    @property
    def ok(self) -> Optional[bool]:
        """True/False once an epoch was checked; None when nothing could be checked."""
        checked = [e for e in self.epochs if e.complete or self.indexed]
        if not checked or (not self.indexed and self.dataset_length is None):
            return None
        return all(e.ok for e in checked)

    @property
    def problems(self) -> list[str]:
        return [p for e in self.epochs for p in e.problems]


def batch_length(batch: Any) -> int:
    """Samples in a collated batch: the leading size of its first tensor."""
    tensors = tensors_of(batch)
    return int(tensors[0].shape[0]) if tensors and tensors[0].dim() > 0 else 1
