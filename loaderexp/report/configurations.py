"""Runs as configurations in the report: settings that cannot change anything on the host that measured them are
left out, and runs that differ only in them (:mod:`loaderexp.result.repeats`) are one row, their spread the host's
noise."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Sequence

from loaderexp.report.busy import run_pace
from loaderexp.report.params import short_key
from loaderexp.result import RunResult
from loaderexp.result import metrics as M
from loaderexp.result.ceiling import cpu_spread_of_repeats
from loaderexp.result.repeats import configuration_key, inert_keys


def _merged(group: list[tuple[Path, RunResult]], inert: list[str]) -> tuple[Path, RunResult]:
    """One configuration's runs as one: the median run's figures, its rate the runs' median, its spread at
    least theirs."""
    ordered = sorted(group, key=lambda item: item[1].metrics.get(M.THROUGHPUT, 0.0))
    folder, middle = ordered[len(ordered) // 2]
    params = {k: v for k, v in middle.params.items() if k not in inert}
    if len(group) == 1 or not middle.finished:
        return folder, dataclasses.replace(middle, params=params)
    rates = [r.metrics[M.THROUGHPUT] for _, r in group if M.THROUGHPUT in r.metrics]
    median = statistics.median(rates)
    spread = (max(rates) - min(rates)) / median if median else 0.0
    metrics = {**middle.metrics, M.THROUGHPUT: median,
               M.THROUGHPUT_IQR: max(spread, *(r.metrics.get(M.THROUGHPUT_IQR, 0.0) for _, r in group))}
    # the pace column says what the configuration's runs met: its slowest run's readings
    slowest = max((r for _, r in group), key=lambda r: run_pace(r) or 0.0)
    metrics.update({k: slowest.metrics[k] for k in (M.PACE_BEFORE, M.PACE_AFTER) if k in slowest.metrics})
    info = middle.info.but(repeats_of_one_configuration=len(group), configuration_rates=rates,
                           configuration_cpu_spread=cpu_spread_of_repeats([r for _, r in group]) or None)
    return folder, dataclasses.replace(middle, params=params, metrics=metrics, info=info)


def as_configurations(items: Sequence[tuple[Path, RunResult]]) -> tuple[list[tuple[Path, RunResult]], list[str]]:
    """(the runs as configurations, a note on what was merged and why)."""
    inert = inert_keys([r for _, r in items])
    if not inert:
        return list(items), []
    groups: dict[str, list[tuple[Path, RunResult]]] = {}
    for folder, result in items:
        groups.setdefault(configuration_key(result, inert), []).append((folder, result))
    merged = [_merged(group, inert) for group in groups.values()]
    names = ", ".join(short_key(k) for k in inert)
    repeated = [r for _, r in merged if r.info.repeats_of_one_configuration]
    spreads = [r.metrics[M.THROUGHPUT_IQR] for r in repeated]
    note = (f"{names}: no effect on this host (no CUDA device: nothing is pinned for a copy, or copied), so runs that "
            f"differ only in {'it' if len(inert) == 1 else 'them'} are repeats of one configuration: "
            f"{len(items)} runs, {len(merged)} configurations")
    if spreads:
        note += f"; the repeats' spread ({100 * min(spreads):.0f}-{100 * max(spreads):.0f}%) is the host's noise"
    return merged, [note]
