"""Runs as configurations: settings that cannot change anything on the host that measured them (pin_memory
without an accelerator, non_blocking copies and copy prefetch without CUDA) make runs that differ only in them
repeats of one configuration, and how far those repeats read apart is this host's noise at the scale of runs."""

from __future__ import annotations

from typing import Sequence

from loaderexp.result import CONTROL_PARAMS, DEVICE_PREFETCH, NON_BLOCKING, PIN_MEMORY, RunResult

WITHOUT_CUDA = (PIN_MEMORY, NON_BLOCKING, DEVICE_PREFETCH)  # no effect where no CUDA device copies


def inert_keys(results: Sequence[RunResult]) -> list[str]:
    """The swept settings that could change nothing on any run's host."""
    finished = [r for r in results if r.finished]
    if not finished or any(r.host.cuda_available for r in finished):
        return []
    return [k for k in WITHOUT_CUDA if len({str(r.params.get(k)) for r in finished}) > 1]


def configuration_key(result: RunResult, inert: Sequence[str]) -> str:
    """The same for runs of one configuration: their settings but the inert ones and how they were driven
    (:data:`~loaderexp.result.CONTROL_PARAMS`), and their status."""
    return repr(sorted((k, str(v)) for k, v in result.params.items()
                       if k not in inert and k not in CONTROL_PARAMS)) + result.status


def repeat_groups(results: Sequence[RunResult]) -> list[list[RunResult]]:
    """The runs grouped by configuration (each run once, however often it is passed)."""
    runs = list({id(r): r for r in results}.values())
    inert = inert_keys(runs)
    groups: dict[str, list[RunResult]] = {}
    for result in runs:
        groups.setdefault(configuration_key(result, inert), []).append(result)
    return list(groups.values())
