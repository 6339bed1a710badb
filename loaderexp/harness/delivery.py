"""Did the loader deliver what the sampler promised?  A fast loader that loses data is not fast.

What each batch delivered is known from the wrappers of :mod:`.tagging`: its tag (the indices it was
fetched for, with workers), the recording sampler (without workers, what it yielded is what was
fetched), or only its size (iterable datasets).  After each epoch (or a partial one, when the
measured budget ends first) the delivered indices are compared with the recorded ones and with the
sampler's promise: every index exactly once for samplers without replacement, ``num_samples``
indices for samplers with replacement, and the last short batch missing under ``drop_last``.
Iterable datasets order themselves, so for them only the count is checked against
``len(dataset)``: a dataset that does not shard across workers delivers every sample once per worker.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sized

from torch.utils.data.distributed import DistributedSampler

from loaderexp.harness.records import DeliveryRecord
from loaderexp.harness.tagging import IndexLog, PackedIndexLog, RecordingBatchSampler, tags_batches
from loaderexp.harness.transfer import batch_size_and_bytes


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
    if complete and promise.count is not None:
        # Under drop_last the batch sampler holds back the last short batch's indices.
        promised = promise.count // batch_size * batch_size if drop_last else promise.count
        if len(sampled) != promised:
            problems.append(f"sampler yielded {len(sampled)} indices, its length promises {promised}")
    out_of_range = [i for i in sampled if not 0 <= i < promise.universe]
    if out_of_range:
        problems.append(f"{len(out_of_range)} sampled indices outside 0..{promise.universe - 1}")
    if promise.unique:
        repeated = len(sampled) - len(set(sampled))
        if repeated:
            problems.append(f"sampler repeated {repeated} indices although it samples without replacement")
    expected = sampled
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


class DeliveryTracker:
    """Follows one loader's epochs: logs what each batch delivered and checks each epoch.

    Three ways to know what a batch delivered: its tag (map-style data with workers), the
    recorder (map-style data without workers: the batch is the one the sampler just yielded),
    or only its size (iterable data, which orders itself).

    An epoch's check (counting tens of thousands of indices) is deferred until :attr:`epochs` is
    read, after the measurement: run at the epoch boundary it would land inside the measured
    window and cost a fast loader several percent.  Only when the unchecked indices pile up past
    ``PENDING_LIMIT`` (a long seconds budget over a small data set) is one checked on the spot.
    """

    PENDING_LIMIT = 5_000_000

    def __init__(
        self,
        *,
        recorder: Optional[RecordingBatchSampler],
        dataset_length: Optional[int],
        batch_size: Optional[int],
        drop_last: bool,
        in_order: bool,
        num_workers: int,
        tagged: Optional[bool] = None,  # batches carry their indices (default: with worker processes)
    ):
        self.recorder = recorder
        self.indexed = recorder is not None  # each index is known, not only the count
        self.tagged = self.indexed and (tags_batches(num_workers) if tagged is None else tagged)
        self.dataset_length = dataset_length
        self.promise = promise_of(recorder.sampler, dataset_length or 0) if recorder is not None else None
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.in_order = in_order
        self.num_workers = num_workers
        self._checked: list[EpochDelivery] = []
        self._pending: list[tuple[bool, IndexLog, Optional[IndexLog], int, int]] = []
        self._pending_size = 0
        self._delivered: Optional[IndexLog] = None
        self._count = 0  # samples delivered in the current epoch (iterable data: counted per batch)
        self._ended = 0  # samples delivered in ended epochs
        self._in_epoch = False
        # batch_size=None: an index (an item) is a batch of its own size, counted as it arrives.
        self.prebatched = batch_size is None
        self._samples = 0
        # Called by the measured loop for each batch; None when the recorder already knows it all.
        self.take: Optional[Callable[[Any], None]] = self._take_prebatched if self.prebatched else (
            self._take_tagged if self.tagged else None if self.indexed else self._take_counted)

    def start_epoch(self) -> None:
        # One log per epoch, sized up front, not one object kept per batch: a small allocation
        # kept alive between two batch-sized ones fragments the heap, and later batches then
        # land in fresh pages (measured: 3-4% of a fast loader's throughput).
        promised = self.promise.count if self.promise is not None else None
        self._delivered = PackedIndexLog(promised or 0) if self.tagged else None
        self._count = 0
        self._in_epoch = True

    def _take_tagged(self, batch: Any) -> None:
        self._delivered.add(batch[0])  # type: ignore[union-attr]

    def _take_counted(self, batch: Any) -> None:
        self._count += batch_size_and_bytes(batch)[0]

    def _take_prebatched(self, batch: Any) -> None:
        if self.tagged:
            self._delivered.add(batch[0])  # type: ignore[union-attr]
        elif not self.indexed:
            self._count += 1  # an iterable's item
        self._samples += batch_size_and_bytes(self.payload(batch))[0]

    def _epoch_count(self) -> int:
        if self.tagged:
            return self._delivered.size // PackedIndexLog.ITEM  # type: ignore[union-attr]
        if self.indexed:
            # Without workers the sampler yields a batch's indices just before the batch is
            # fetched: every index recorded so far this epoch was delivered.
            return self.recorder.log.size  # type: ignore[union-attr]
        return self._count

    def delivered(self) -> int:
        """Indices (items) delivered so far, across epochs."""
        return self._ended + (self._epoch_count() if self._in_epoch else 0)

    def delivered_samples(self) -> int:
        """Samples delivered so far, across epochs (the measured loop counts its window's from this):
        the items, or with batch_size=None the samples in them."""
        return self._samples if self.prebatched else self.delivered()

    def payload(self, batch: Any) -> Any:
        """The batch as the user's dataset made it (indices removed)."""
        return batch[1] if self.tagged else batch

    def end_epoch(self, complete: bool, batches: int) -> None:
        """Set this epoch, of ``batches`` batches taken, aside for checking (the recorder starts a
        new log for the next one)."""
        count = self._epoch_count()
        self._ended += count
        self._in_epoch = False
        sampled = self.recorder.log if self.recorder is not None else IndexLog(0)
        sampled.compact()
        self._pending.append((complete, sampled, self._delivered, count, batches))
        self._pending_size += sampled.size + count
        if self._pending_size > self.PENDING_LIMIT:
            self._check_pending()

    def held_bytes(self) -> int:
        """What the tracker's own logs hold now (the harness's memory, not the loader's): the epochs waiting
        for their check and the current one's."""
        logs = [log for _, sampled, delivered, _, _ in list(self._pending) for log in (sampled, delivered)]
        logs += [self._delivered, self.recorder.log if self.recorder is not None else None]
        unique = {id(log): log for log in logs if log is not None}  # an ended epoch's logs are still current
        return sum(log.held_bytes() for log in unique.values())

    def _check_pending(self) -> None:
        for epoch in self._pending:
            self._checked.append(self._check(*epoch))
        self._pending, self._pending_size = [], 0

    def _check(self, complete: bool, sampled: IndexLog, delivered: Optional[IndexLog], count: int,
               batches: int) -> EpochDelivery:
        if not self.indexed:
            return check_iterable_epoch(self.dataset_length, count, complete, self.num_workers)
        recorded = sampled.recorded()
        # Without tags the delivered indices are the first ``count`` sampled, if no batch was lost.
        result = check_epoch(
            self.promise,  # type: ignore[arg-type]
            recorded,
            recorded[:count] if delivered is None else delivered.recorded(),
            complete=complete,
            batch_size=self.batch_size,
            drop_last=self.drop_last,
            in_order=self.in_order,
        )
        if delivered is None and complete and batches != sampled.batches:
            result.problems.insert(0, f"delivered {batches} of the {sampled.batches} batches the sampler yielded")
        return result

    @property
    def epochs(self) -> list[EpochDelivery]:
        """Every ended epoch, checked."""
        self._check_pending()
        return self._checked

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

    def record(self) -> DeliveryRecord:
        """The check's verdict, once the measurement is over."""
        return DeliveryRecord(ok=self.ok, problems=self.problems, epochs_checked=len(self.epochs))
