"""The torchdata.nodes graph of ``nodes_thread`` and ``nodes_process``; imported only when one runs.

torchdata starts the mapper's reader thread, which draws from the sampler, before it forks the
worker processes.  A fork that lands while that thread is inside torch's first call of an
operator copies glibc's atexit lock held (torch registers each operator's handle with atexit on
first use), and the worker hangs in its own first call of an operator: 3 runs in 25 here, with
the default fork.  The sampler is held until the workers have started, so no fork meets it.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, Optional

import torchdata.nodes as tn

from loaderexp.config.schema import LoaderConfig
from loaderexp.harness.tagging import RecordingBatchSampler


class NodesLoader:
    """SamplerWrapper -> ParallelMapper (a whole batch per call) -> PinMemory (with CUDA) ->
    Prefetcher -> Loader, rebuilt each epoch; ``len`` is the batch sampler's."""

    def __init__(self, recorder: RecordingBatchSampler, fetch: Any, loader: LoaderConfig, method: str, pin: bool):
        self.recorder, self.fetch, self.loader, self.method, self.pin = recorder, fetch, loader, method, pin

    def __len__(self) -> int:
        return len(self.recorder)

    def __iter__(self) -> Iterator[Any]:
        started = threading.Event()
        node: Any = HeldSource(tn.SamplerWrapper(self.recorder), started)
        context = self.loader.multiprocessing_context
        node = tn.ParallelMapper(node, self.fetch, num_workers=self.loader.num_workers, in_order=self.loader.in_order,
                                 method=self.method, multiprocessing_context=context.value if context else None)
        node = ReleaseWhenStarted(node, started)
        if self.pin:
            node = tn.PinMemory(node)
        node = tn.Prefetcher(node, prefetch_factor=self.loader.prefetch_factor or 2)
        try:
            yield from tn.Loader(node)
        finally:  # the epoch ended or the loop left it: stop the threads and processes now, not at GC
            shut_down(node)


class HeldSource(tn.BaseNode):
    """``source``, whose items wait for ``started``: the mapper's reader thread draws nothing
    while the mapper is still starting its workers."""

    def __init__(self, source: tn.BaseNode, started: threading.Event):
        super().__init__()
        self.source, self.started = source, started

    def reset(self, initial_state: Optional[dict] = None) -> None:
        super().reset(initial_state)
        self.source.reset(initial_state)

    def next(self) -> Any:
        self.started.wait()
        return next(self.source)

    def get_state(self) -> dict:
        return self.source.state_dict()


class ReleaseWhenStarted(tn.BaseNode):
    """The mapper, whose reset (reader thread, then worker processes) sets ``started`` once done."""

    def __init__(self, source: tn.BaseNode, started: threading.Event):
        super().__init__()
        self.source, self.started = source, started

    def reset(self, initial_state: Optional[dict] = None) -> None:
        super().reset(initial_state)
        self.started.clear()
        try:
            self.source.reset(initial_state)
        finally:
            self.started.set()

    def next(self) -> Any:
        return next(self.source)

    def get_state(self) -> dict:
        return self.source.state_dict()


def shut_down(node: Any) -> None:
    """Stop a torchdata.nodes graph's threads and processes: each node's live iterator has
    ``_shutdown`` (torchdata otherwise leaves it to ``__del__``, which a reference cycle delays)."""
    seen = set()
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        it = getattr(node, "_it", None)
        while it is not None and id(it) not in seen:
            seen.add(id(it))
            if hasattr(it, "_shutdown"):
                it._shutdown()
            it = getattr(it, "_it", None)
        node = getattr(node, "source", None)
