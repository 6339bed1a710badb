"""The contract of a loading stack, and the one fetch its non-DataLoader stacks share.

A stack is built from the run's spec and gives the measured loop an iterable to start once per
epoch: :meth:`LoadingStack.build` returns it with the recording batch sampler the delivery check
reads.  What the batches look like is the same for every stack: with workers, ``(tag, batch)``,
the batch exactly as the user's collate function makes it and the int64 bytes of its indices
(:mod:`loaderexp.harness.tagging`).  The class attributes are the stack's declaration: the loader
knobs it has, the backend options it reads, the package it needs, what it refuses.
"""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Optional

from loaderexp.config.errors import ConfigError
from loaderexp.config.schema import Config

if TYPE_CHECKING:  # torch's: imported where a loader is built, never by the app checking a spec (4 s)
    from loaderexp.harness.tagging import RecordingBatchSampler

# The DataLoader knobs every stack has (in this order in its messages).
COMMON_KNOBS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "in_order", "drop_last", "collate_fn")


class LoadingStack:
    """One way of loading; subclasses set the declaration and :meth:`loader`."""

    name: ClassVar[str]
    knobs: ClassVar[tuple[str, ...]] = COMMON_KNOBS  # the loader knobs it has; others must stay at their default
    requires: ClassVar[Optional[str]] = None  # the package it imports when it runs
    extra: ClassVar[str] = "backends"  # the pip extra that installs it
    pool: ClassVar[bool] = True  # loads on a pool of num_workers >= 1 threads or processes
    whole_batches: ClassVar[bool] = True  # maps whole batches of indices: needs a batch_size
    ranks: ClassVar[bool] = False  # runs in every rank with dist.nproc_per_node > 1
    processes: ClassVar[bool] = False  # its workers are processes (how they start is recorded)
    tags_batches: ClassVar[bool] = True  # every batch carries its indices, also without workers

    def __init__(self, spec: Config):
        self.spec = spec
        self.loader_spec = spec.loader

    def build(self, dataset: Any, sampler: Any, iterable: bool) -> tuple[Iterable, Optional[RecordingBatchSampler]]:
        """The loader the measured loop iterates, and the recorder of what its sampler handed out."""
        if iterable:
            raise ConfigError([f"backend={self.name}: the dataset is an IterableDataset, which orders and batches "
                               "itself; the backends map batches of indices: use backend=dataloader"])
        from torch.utils.data import default_collate

        from loaderexp.data.build import collate_for
        from loaderexp.harness.tagging import RecordingBatchSampler

        recorder = RecordingBatchSampler(sampler, self.loader_spec.batch_size, self.loader_spec.drop_last)

        collate = collate_for(self.loader_spec, dataset) or default_collate
        return self.loader(BatchFetch(dataset, collate), recorder), recorder

    def loader(self, fetch: "BatchFetch", recorder: RecordingBatchSampler) -> Iterable:
        raise NotImplementedError

    @property
    def pin(self) -> bool:
        """Pinning as DataLoader does it: asked for, and an accelerator to pin for."""
        import torch

        return bool(self.loader_spec.pin_memory) and torch.cuda.is_available()

    def worker_start_method(self) -> Optional[str]:
        """How its worker processes start, when it has any."""
        if not self.processes or self.loader_spec.num_workers == 0:
            return None
        context = self.loader_spec.multiprocessing_context
        return context.value if context is not None else multiprocessing.get_start_method()


class BatchFetch:
    """indices -> (tag, batch): one call fetches and collates a whole batch (picklable: a process
    stack sends it to its workers)."""

    def __init__(self, dataset: Any, collate: Callable):
        from loaderexp.harness.tagging import IndexedCollate, IndexedDataset

        self.dataset = IndexedDataset(dataset)
        self.collate = IndexedCollate(collate)

    def __call__(self, indices: list[int]) -> tuple[bytes, Any]:
        return self.collate(self.dataset.__getitems__(indices))


def pin_batch(item: tuple[bytes, Any]) -> tuple[bytes, Any]:
    from torch.utils.data._utils.pin_memory import pin_memory

    tag, batch = item
    return tag, pin_memory(batch)
