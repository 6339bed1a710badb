"""Loading stacks besides DataLoader's worker processes: torchdata.nodes (threads or processes) and SPDL.

Every backend loads the same dataset, transform and sampler objects and hands the measured loop
the same items as a DataLoader with workers: ``(tag, batch)``, the batch as the user's collate
function makes it and the indices it was fetched for, so the delivery check, the device copy and
the step are the ones a DataLoader run gets.

Each runs the shape its authors recommend, not one map per sample (which through a thread pool
reaches a fraction of DataLoader's rate: the GIL and per-item overhead):

- ``nodes_thread`` / ``nodes_process``: torchdata.nodes' ``SamplerWrapper`` (over the recording
  batch sampler: one item per batch of indices) -> ``ParallelMapper`` fetching and collating a
  whole batch per call, on ``num_workers`` threads or processes -> ``PinMemory`` (with CUDA) ->
  ``Prefetcher`` (``prefetch_factor`` batches) -> ``Loader``.
- ``spdl``: an SPDL pipeline: the batch sampler as source -> a stage fetching and collating whole
  batches with ``concurrency=num_workers`` -> pinning (with CUDA) -> a sink buffering
  ``prefetch_factor`` batches; ``backend.num_threads`` sizes its thread pool (default: the
  stage's concurrency).  ``max_failures=0``: a failed batch fails the run, it is not skipped.

A new pipeline is built each epoch, as a DataLoader without persistent workers starts its workers
each epoch.  torchdata and spdl are imported only when their backend runs (``pip install -e
".[backends]"``); the torchdata.nodes pipeline is in execute/nodes.py.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Optional

from loaderexp.measure.delivery import IndexedCollate, IndexedDataset, RecordingBatchSampler


class BatchFetch:
    """indices -> (tag, batch): one call fetches and collates a whole batch (picklable: a process
    backend sends it to its workers)."""

    def __init__(self, dataset: Any, collate: Callable):
        self.dataset = IndexedDataset(dataset)
        self.collate = IndexedCollate(collate)

    def __call__(self, indices: list[int]) -> tuple[bytes, Any]:
        return self.collate(self.dataset.__getitems__(indices))


def _pin(item: tuple[bytes, Any]) -> tuple[bytes, Any]:
    from torch.utils.data._utils.pin_memory import pin_memory

    tag, batch = item
    return tag, pin_memory(batch)


class SpdlLoader:
    """An SPDL pipeline per epoch; stopped when the epoch ends or the loop leaves it."""

    def __init__(self, recorder: RecordingBatchSampler, fetch: BatchFetch, loader: Mapping[str, Any],
                 num_threads: Optional[int], pin: bool):
        self.recorder, self.fetch, self.loader, self.pin = recorder, fetch, loader, pin
        self.num_threads = num_threads or loader["num_workers"]

    def __len__(self) -> int:
        return len(self.recorder)

    def __iter__(self) -> Iterator[Any]:
        from spdl.pipeline import PipelineBuilder, PipelineFailure

        fetch = _FirstError(self.fetch)
        builder = PipelineBuilder().add_source(iter(self.recorder)).pipe(
            fetch, concurrency=self.loader["num_workers"],
            output_order="input" if self.loader["in_order"] else "completion")
        if self.pin:
            builder = builder.pipe(_pin)
        pipeline = builder.add_sink(self.loader["prefetch_factor"] or 2).build(num_threads=self.num_threads,
                                                                                max_failures=0)
        try:
            with pipeline.auto_stop():
                yield from pipeline.get_iterator()
        except PipelineFailure as failure:  # it says a stage failed; the run wants why
            if fetch.error is None:
                raise
            raise fetch.error from failure


class _FirstError:
    """A stage's function that keeps the first exception it raised: SPDL's failure names the stage only."""

    def __init__(self, function: Callable):
        self.function = function
        self.error: Optional[BaseException] = None

    def __call__(self, item: Any) -> Any:
        try:
            return self.function(item)
        except Exception as error:
            if self.error is None:
                self.error = error
            raise


def backend_loader(backend: Mapping[str, Any], dataset: Any, recorder: RecordingBatchSampler,
                   loader: Mapping[str, Any], collate: Callable) -> Any:
    """The configured non-DataLoader backend over ``recorder``'s batches of ``dataset``."""
    import torch

    pin = bool(loader["pin_memory"]) and torch.cuda.is_available()  # as DataLoader: no accelerator, no pinning
    fetch = BatchFetch(dataset, collate)
    if backend["name"] == "spdl":
        return SpdlLoader(recorder, fetch, loader, backend.get("num_threads"), pin)
    from loaderexp.execute.nodes import NodesLoader

    return NodesLoader(recorder, fetch, loader, "process" if backend["name"] == "nodes_process" else "thread", pin)
