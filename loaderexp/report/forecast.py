"""The settings a sweep predicted instead of measuring (``bench.predict``): whether its measured runs confirm
the model the figures came from, and their memory, each forecast from the measured runs of its group (the same
settings but ``num_workers``), marked as a forecast, and warned about when it would not fit in the memory the job
may use."""

from __future__ import annotations

from typing import Optional, Sequence

from loaderexp.model.knee import misses
from loaderexp.model.memory import MemoryForecast, forecast
from loaderexp.result import RunResult, Status
from loaderexp.result import metrics as M
from loaderexp.result.ceiling import refit_of, refit_words, refitted_error


def prediction_note(results: Sequence[RunResult]) -> str:
    """Whether every measured run agrees with the model the predicted figures came from: the profile's, or the one
    ``bench.predict`` refitted on the runs (as its jobs recorded it: :func:`loaderexp.model.knee.refit`)."""
    refits = {r.setting_but_workers: refit for r in results if r.status is Status.PREDICTED and (refit := refit_of(r))}
    missed = {}
    for r in results:
        refit = refits.get(r.setting_but_workers)
        error = (refitted_error(r, refit) if refit else r.metrics.get(M.MODEL_ERROR)) if r.finished else None
        if error is not None and misses(1 + error, 1.0, r.metrics.get(M.THROUGHPUT_IQR, 0.0)):
            missed[r.workers] = error
    said = sorted({refit_words(**refit) for refit in refits.values()})
    refitted = ("; the profile's short loops disagreed with the runs, so the model was refitted on them: "
                + "; ".join(said) if said else "")
    return "PREDICTED: bench.predict took the model's figure (in parentheses) instead of measuring: " + (
        f"the measured runs agree with the model within 10% (beyond half their windows' spread){refitted}"
        if not missed else
        "NOT confirmed: the model missed the runs measured after them by " + ", ".join(
            f"{100 * e:+.0f}% at num_workers={w}" for w, e in sorted(missed.items()))
        + "; measure those settings (bench.predict=false) before relying on their figures")


def memory_forecasts(results: Sequence[RunResult]) -> dict[int, MemoryForecast]:
    """id(result) -> its forecast, for each predicted run whose group has runs measured at two worker counts."""
    measured: dict[tuple, dict[int, float]] = {}
    for r in results:
        if r.finished and r.metrics.get(M.PSS):
            measured.setdefault(r.setting_but_workers, {})[r.workers] = r.metrics[M.PSS]
    found = {}
    for r in results:
        if r.status is Status.PREDICTED:
            made = forecast(measured.get(r.setting_but_workers, {}), r.workers)
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
    near = min(forecasts.values(), key=lambda f: f.uncertainty)
    far = max(forecasts.values(), key=lambda f: f.uncertainty)
    off = f"+-{100 * near.uncertainty:.0f}%" + (f" at num_workers={near.workers} to +-{100 * far.uncertainty:.0f}% at "
                                                f"{far.workers}" if far.uncertainty - near.uncertainty >= 0.01 else "")
    why = (f"; they held {made.fell_mb:,.0f} MB less with more workers: their peaks move more than a worker adds, "
           "so the line is taken flat, and its slope is known to no better than that" if made.fell_mb else
           "; the first worker's own cost is in that slope, so each later one adds between nothing and that: the "
           "forecast is the middle" if made.first_worker else "")
    itself = next((f for f in forecasts.values() if f.loads_itself), None)
    alone = (f"; without workers the main process loads itself: between the line at 0 and the fewest workers' level, "
             f"{itself.mb:,.0f} MB +-{100 * itself.uncertainty:.0f}%" if itself else "")
    notes = [f"PSS MB in parentheses: a forecast, not measured: each worker adds about {made.per_worker_mb:,.0f} MB "
             f"(a line through the runs measured at num_workers={', '.join(map(str, made.measured_at))}{why}; "
             f"{off}{alone})"]
    for r in results:
        f = forecasts.get(id(r))
        if f is not None and usable_mb and f.mb * (1 - f.uncertainty) > 0.9 * usable_mb:
            notes.append(f"num_workers={r.workers} (predicted) would hold ~{f.mb:,.0f} MB over an epoch by the "
                         f"forecast, against {usable_mb:,.0f} MB this job may use: the kernel's OOM killer would end "
                         "it; use fewer workers, or keep the dataset where workers do not copy it")
    return notes
