"""``backend=nodes_thread``: torchdata.nodes, a ParallelMapper fetching whole batches on threads.

The graph (:mod:`.nodes_graph`, which imports torchdata) is SamplerWrapper over the batch sampler
-> ParallelMapper (a whole batch per call) -> PinMemory (with CUDA) -> Prefetcher(prefetch_factor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from loaderexp.loading.base import BatchFetch, LoadingStack

if TYPE_CHECKING:  # torch's: imported where the loader is built
    from loaderexp.harness.tagging import RecordingBatchSampler


class NodesThreadStack(LoadingStack):
    name = "nodes_thread"
    requires = "torchdata"
    method = "thread"  # the ParallelMapper's

    def loader(self, fetch: BatchFetch, recorder: RecordingBatchSampler) -> Iterable:
        from loaderexp.loading.nodes_graph import NodesLoader

        return NodesLoader(recorder, fetch, self.loader_spec, self.method, self.pin)


STACK = NodesThreadStack
