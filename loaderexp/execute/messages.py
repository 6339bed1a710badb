"""What travels on the one pipe between the app, the dataset holder and the measuring process.

    app -> holder:                RunJob (measure this spec on the held dataset, or compare specs on it)
    holder -> app:                Started (the measuring process's pid), then Exited once it is gone
    measuring process -> app:     Profiling (the profiling pass starts, and ends: no batches meanwhile),
                                  Planned (the batches it will measure, for the progress bar), then
                                  Done (the measurement) or Failed (what went wrong)
    holder -> app:                Failed, when it could not build the dataset (it has ended then)

After anything but a clean job the holder is discarded, so no stale message reaches the next job.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional


class RunJob(NamedTuple):
    spec: Any  # loaderexp.config.schema.Config
    profile: bool = False  # profile the stages first (the sweep has no profile of this dataset yet)
    paired: tuple = ()  # other specs on the same dataset: compare them with ``spec`` side by side instead
    paired_rounds: int = 0  # in this many interleaved rounds
    paired_window_s: float = 0.5  # of windows this long each
    profile_only: bool = False  # only the profiling pass (bench.predict: the job may not need measuring)


class Started(NamedTuple):
    pid: int


class Exited(NamedTuple):
    pid: int
    status: int  # os.waitstatus_to_exitcode: negative for a signal


class Planned(NamedTuple):
    total: Optional[int]


class Profiling(NamedTuple):
    started: bool  # True as the profiling pass starts, False once it is done


class Done(NamedTuple):
    measurement: Any  # a Measurement or, with ranks, a NodeMeasurement; PairedRates for a comparison


class Failed(NamedTuple):
    kind: str  # the exception's class name
    message: str
    details: str  # its traceback


def failure(error: BaseException) -> Failed:
    import traceback

    return Failed(type(error).__name__, str(error), traceback.format_exc(limit=20))
