"""The recommendation: the fewest workers whose throughput the sweep cannot tell from the best."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from loaderexp.report.ceiling import beyond, ceiling_for, sweep_ceilings
from loaderexp.report.confirm import more_workers_rival
from loaderexp.report.params import X_AXIS, short_key, varying_params
from loaderexp.result import NUM_WORKERS, RANKS, TOLERANCE, Bound, RunResult, param_text
from loaderexp.result import metrics as M
from loaderexp.result.ceiling import model_of


LEAD = "Recommendation: "
# Where the race at a sweep's end named another pick: the jobs' one is what they read one after another
RACED_LEAD = "Recommendation from the jobs, each measured in turn (the race below decides): "


@dataclass
class Recommendation:
    result: RunResult
    best: RunResult
    within_noise: bool
    said: str  # the pick and why, after the lead

    @property
    def text(self) -> str:
        return LEAD + self.said

    def text_overruled(self) -> str:
        """The same, where the race at the sweep's end named another pick."""
        return RACED_LEAD + self.said


NOISE_ALLOWANCE_CAP = 3  # a measured spread widens the tolerance to at most 3x itself


def recommend(results: Sequence[RunResult], tolerance: float = TOLERANCE) -> Optional[Recommendation]:
    """The fewest workers whose throughput the sweep cannot tell from the best: each worker costs
    memory and a core.

    A run is close to the best when it is within ``tolerance`` of it, or within the spread
    measured across its repeats (IQR/median of either run, up to 3x ``tolerance``): a gap
    smaller than the noise is not a measured difference.  When the dataset's files cannot stay in
    the page cache (``bench.cache=both``), every epoch is a cold one: the cold figures decide.
    """
    finished = [r for r in results if r.finished and r.info.delivery_ok is not False
                and not r.metrics.get(M.PRUNED)]  # a pruned trial stopped early: its figures are partial
    if not finished:
        return None
    figure = M.COLD if any(r.info.cache_stays_warm is False and M.COLD in r.metrics for r in finished) \
        else M.THROUGHPUT

    def rate(run: RunResult) -> float:
        return run.metrics.get(figure, run.metrics[M.THROUGHPUT])

    best = max(finished, key=rate)

    def noise(run: RunResult) -> float:
        return max(best.metrics.get(M.THROUGHPUT_IQR, 0.0), run.metrics.get(M.THROUGHPUT_IQR, 0.0))

    def gap(run: RunResult) -> float:
        return 1 - rate(run) / rate(best) if rate(best) else 0.0

    close = [r for r in finished if gap(r) <= max(tolerance, min(noise(r), NOISE_ALLOWANCE_CAP * tolerance))]
    chosen = min(close, key=lambda r: (r.params.get(NUM_WORKERS, 0), -rate(r)))
    within_noise = chosen is not best and gap(chosen) <= noise(chosen)
    # named by every axis the sweep or search varied: a search whose trials at batch 64 were all pruned picked
    # "num_workers=2" where its confirmation said "batch_size=256, num_workers=2"
    text = _text(chosen, best, results, rate, gap(chosen), noise(chosen), tolerance, within_noise)
    text += _untold(chosen, close, finished, rate, tolerance)
    if figure is M.COLD:
        text += (f" (From the cold-cache figures: the dataset's {chosen.metrics.get(M.FILE_MB, 0):,.0f} MB of files "
                 f"do not fit in the {chosen.metrics.get(M.AVAILABLE, 0):,.0f} MB available, so every epoch reads "
                 "them from storage.)")
    text += _bound_text(chosen, best, finished, gap(chosen)) + _ceiling_text(chosen, finished)
    return Recommendation(chosen, best, within_noise, text)


def _ceiling_text(chosen: RunResult, finished: Sequence[RunResult]) -> str:
    """How far the pick is from this machine's ceiling as the sweep shows it, what binds it and what would lift it."""
    bound = ceiling_for(chosen, sweep_ceilings(finished))
    if bound is None or M.CEILING_FRACTION not in chosen.metrics:
        return ""
    binding, ceiling = bound.limit.name, bound.high
    fraction = min(chosen.metrics[M.THROUGHPUT] / ceiling, 1.0)
    if beyond(chosen, bound):  # faster than the model's bound allows: the model is off, never "104%"
        return (f" It runs faster than the model's bound for this machine ({binding}): the model is off here (its "
                "profile may have met a slower moment of this host); see where it disagrees below.")
    return (f" It runs at {100 * fraction:.0f}% of this machine's ceiling (at most {ceiling:,.0f} samples/s, {binding} "
            f"binds; what would lift it: {_more_workers(chosen, finished) or bound.limit.lift}).")


def _more_workers(chosen: RunResult, finished: Sequence[RunResult]) -> str:
    """Where the pick's own worker count holds it below the ceiling and the sweep measured no more: more workers,
    at the model's knee.  `python -m loaderexp` (0 workers) ran at 63% of a ceiling that CPU bound, and was told
    "what would lift it: more cores", where the model put 2 workers within 5% of it."""
    model = model_of(chosen, finished)
    if model is None or more_workers_rival(chosen, finished) is not None:
        return ""
    grid = list(range(chosen.workers, chosen.workers + 4 * max(int(model.machine.cores), 1) + 1))
    knee = model.knee(grid, TOLERANCE)
    if knee <= chosen.workers:
        return ""
    return (f"more workers: the model puts num_workers={knee} at {model.predict(knee):,.0f} samples/s, within "
            f"{100 * TOLERANCE:.0f}% of the most it predicts (not measured: sweep {NUM_WORKERS} to see it)")


def _text(chosen: RunResult, best: RunResult, swept_over: Sequence[RunResult], rate, gap: float, noise: float,
          tolerance: float, within_noise: bool) -> str:
    ranks = chosen.ranks
    swept = [k for k in varying_params(swept_over) if k != RANKS]
    if ranks > 1 and X_AXIS not in swept:
        swept.insert(0, X_AXIS)  # "num_workers=N per rank" is the answer with ranks, swept or not
    settings = ", ".join(f"{short_key(k)}={param_text(chosen.params.get(k))}" for k in swept) or "the defaults"
    if ranks > 1:  # what each training process sets, and for how many of them it holds
        settings = f"{settings} per rank with {ranks} ranks"
    text = f"{settings}: {rate(chosen):,.0f} samples/s" + (" across the ranks" if ranks > 1 else "")
    if chosen is best:
        return text + " (the fastest run)."
    text += (f", {100 * gap:.1f}% below the fastest ({rate(best):,.0f} samples/s, "
             f"num_workers={best.params.get(NUM_WORKERS)}) with fewer workers")
    if gap <= tolerance:
        text += f", inside the {100 * tolerance:.0f}% tolerance"
        return text + ("; the difference is inside the measured noise." if within_noise else ".")
    return text + (f": the difference is inside the measured noise (IQR {100 * noise:.1f}% of the median),"
                   " so the sweep cannot tell them apart.")


def _untold(chosen: RunResult, close: Sequence[RunResult], finished: Sequence[RunResult], rate,
            tolerance: float) -> str:
    """The runs with the pick's workers that differ in another knob and read within the tolerance of it: the sweep
    cannot tell them from the pick, so the pick's value of that knob is not a measured choice (persistent_workers
    true against false over single epochs: 2.5% apart, and "false" was "the fastest run")."""
    swept = [k for k in varying_params(finished) if k not in (X_AXIS, RANKS)]
    others = sorted((r for r in close if r is not chosen and r.workers == chosen.workers), key=rate, reverse=True)
    if not swept or not others:
        return ""

    def named(r: RunResult) -> str:
        differs = ", ".join(f"{short_key(k)}={param_text(r.params.get(k))}" for k in swept
                            if r.params.get(k) != chosen.params.get(k))
        return f"{differs} ({100 * (rate(r) / rate(chosen) - 1):+.1f}%)"

    return (f" The sweep cannot tell it from {'; '.join(named(r) for r in others[:2])}, within the "
            f"{100 * tolerance:.0f}% tolerance or the runs' spread: its value there is not a measured choice.")


def _bound_text(chosen: RunResult, best: RunResult, finished: Sequence[RunResult], gap: float) -> str:
    """With a training step: what limits the recommended run, and what that means for the workers."""
    bound = chosen.info.bound
    waiting = chosen.metrics.get(M.STALL)
    waited = f", {100 * waiting:.0f}% of its time waiting for data" if waiting is not None else ""
    if bound in (Bound.COMPUTE, Bound.TRANSFER):
        part = "step" if bound is Bound.COMPUTE else "copy to the device"
        return (f" It is {bound}{waited}: the {part}, not loading, sets the pace, so more workers would not train "
                f"faster; num_workers={chosen.params.get(NUM_WORKERS)} is enough for this training.")
    computing = [r for r in finished if r.info.bound is Bound.COMPUTE]
    if bound is Bound.LOADER and computing:
        fewest = min(r.params.get(NUM_WORKERS, 0) for r in computing)
        return (f" It is loader-bound{waited}; from num_workers={fewest} on the step sets the pace, for at most "
                f"{100 * gap:.1f}% more.")
    if bound is Bound.LOADER and best.info.bound is Bound.LOADER:
        return (f" Even the fastest run is loader-bound{waited if chosen is best else ''}: the step waits for data, "
                "so faster loading (more workers or cores, a lighter transform, a faster format) would train faster.")
    return ""
