"""``backend=spdl``: an SPDL pipeline, the batch sampler as source -> one stage fetching and collating whole
batches with ``concurrency=num_workers`` -> pinning (with CUDA) -> a sink buffering ``prefetch_factor``.

``backend.num_threads`` sizes its thread pool (default: the stage's concurrency).  ``max_failures=0``:
a failed batch fails the run, it is not skipped; SPDL's failure names only the stage, so the stage's
first exception becomes the run's error.  A new pipeline is built each epoch, as a DataLoader
without persistent workers starts its workers each epoch.  spdl is imported only when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from loaderexp.config.schema import LoaderConfig
from loaderexp.loading.base import BatchFetch, LoadingStack, pin_batch

if TYPE_CHECKING:  # torch's: imported where the loader is built
    from loaderexp.harness.tagging import RecordingBatchSampler


class SpdlStack(LoadingStack):
    name = "spdl"
    requires = "spdl"

    def loader(self, fetch: BatchFetch, recorder: RecordingBatchSampler) -> Iterable:
        return SpdlLoader(recorder, fetch, self.loader_spec, self.spec.backend.num_threads, self.pin)


class SpdlLoader:
    """An SPDL pipeline per epoch; stopped when the epoch ends or the loop leaves it."""

    def __init__(self, recorder: RecordingBatchSampler, fetch: BatchFetch, loader: LoaderConfig,
                 num_threads: Optional[int], pin: bool):
        self.recorder, self.fetch, self.loader, self.pin = recorder, fetch, loader, pin
        self.num_threads = num_threads or loader.num_workers

    def __len__(self) -> int:
        return len(self.recorder)

    def __iter__(self) -> Iterator[Any]:
        from spdl.pipeline import PipelineBuilder, PipelineFailure

        fetch = FirstError(self.fetch)
        builder = PipelineBuilder().add_source(iter(self.recorder)).pipe(
            fetch, concurrency=self.loader.num_workers, output_order="input" if self.loader.in_order else "completion")
        if self.pin:
            builder = builder.pipe(pin_batch)
        pipeline = builder.add_sink(self.loader.prefetch_factor or 2).build(num_threads=self.num_threads,
                                                                            max_failures=0)
        try:
            with pipeline.auto_stop():
                yield from pipeline.get_iterator()
        except PipelineFailure as failure:  # it says a stage failed; the run wants why
            if fetch.error is None:
                raise
            raise fetch.error from failure


class FirstError:
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


STACK = SpdlStack
