"""Memory for the settings a sweep predicted instead of measuring (``bench.predict``): each is forecast from the
measured runs of its group (the same settings but ``num_workers``), marked as a forecast, and warned about when
it would not fit in the memory the job may use."""

from __future__ import annotations

from typing import Optional, Sequence

from loaderexp.model.memory import MemoryForecast, forecast
from loaderexp.result import IGNORED_PARAMS, NUM_WORKERS, RunResult, Status
from loaderexp.result import metrics as M


def _group(result: RunResult) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in result.params.items()
                        if k != NUM_WORKERS and not k.startswith(IGNORED_PARAMS)))


def memory_forecasts(results: Sequence[RunResult]) -> dict[int, MemoryForecast]:
    """id(result) -> its forecast, for each predicted run whose group has runs measured at two worker counts."""
    measured: dict[tuple, dict[int, float]] = {}
    for r in results:
        if r.finished and r.metrics.get(M.PSS):
            measured.setdefault(_group(r), {})[r.workers] = r.metrics[M.PSS]
    found = {}
    for r in results:
        if r.status is Status.PREDICTED:
            made = forecast(measured.get(_group(r), {}), r.workers)
            if made is not None:
                found[id(r)] = made
    return found


def fill_forecasts(results: Sequence[RunResult]) -> list[RunResult]:
    """Each predicted run gets its forecast as a metric (``pss_forecast_mb``); the runs it changed."""
    changed, forecasts = [], memory_forecasts(results)
    for r in results:
        made = forecasts.get(id(r))
        if made is not None and r.metrics.get(M.PSS_FORECAST) != round(made.mb, 1):
            r.metrics[M.PSS_FORECAST] = round(made.mb, 1)
            changed.append(r)
    return changed


def forecast_notes(results: Sequence[RunResult], usable_mb: Optional[float]) -> list[str]:
    """How the forecasts were made, and each that would not fit in ``usable_mb``."""
    forecasts = memory_forecasts(results)
    if not forecasts:
        return []
    made = next(iter(forecasts.values()))
    notes = [f"PSS MB in parentheses: a forecast, not measured: each worker adds about {made.per_worker_mb:,.0f} MB "
             f"(a line through the runs measured at num_workers={', '.join(map(str, made.measured_at))}; "
             f"+-{100 * made.uncertainty:.0f}%)"]
    for r in results:
        f = forecasts.get(id(r))
        if f is not None and usable_mb and f.mb * (1 - f.uncertainty) > 0.9 * usable_mb:
            notes.append(f"num_workers={r.workers} (predicted) would hold ~{f.mb:,.0f} MB over an epoch by the "
                         f"forecast, against {usable_mb:,.0f} MB this job may use: the kernel's OOM killer would end "
                         "it; use fewer workers, or keep the dataset where workers do not copy it")
    return notes
