"""``backend=dataloader``: torch.utils.data.DataLoader with its worker processes (the default)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from loaderexp.loading.base import LoadingStack

if TYPE_CHECKING:  # torch's: imported where the loader is built (the registry reads the knobs without torch)
    from loaderexp.harness.tagging import RecordingBatchSampler


class DataLoaderStack(LoadingStack):
    """Every DataLoader knob; iterable datasets, ``batch_size: null``, no workers and ranks too.
    Batches carry their indices only when they cross from worker processes."""

    name = "dataloader"
    knobs = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "drop_last",
             "timeout", "multiprocessing_context", "in_order", "collate_fn", "worker_init_fn")
    pool = whole_batches = tags_batches = False
    ranks = processes = True

    def build(self, dataset: Any, sampler: Any, iterable: bool) -> tuple[Iterable, Optional[RecordingBatchSampler]]:
        from loaderexp.data.build import build_loader, collate_for
        from loaderexp.harness.tagging import RecordingBatchSampler, instrumented

        loader = self.loader_spec
        collate = collate_for(loader, dataset)
        if iterable:
            return build_loader(dataset, None, loader, collate), None
        recorder = RecordingBatchSampler(sampler, loader.batch_size, loader.drop_last)
        parts = instrumented(dataset, recorder, loader.num_workers, collate)
        return build_loader(parts.dataset, parts.sampler, loader, parts.collate_fn or collate,
                            batch_sampler=parts.batch_sampler), recorder


STACK = DataLoaderStack
