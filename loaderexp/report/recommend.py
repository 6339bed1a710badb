"""The recommendation: the fewest workers whose throughput the sweep cannot tell from the best."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from loaderexp.report.params import X_AXIS, short_key, varying_params
from loaderexp.result import NUM_WORKERS, RANKS, RunResult, param_text
from loaderexp.result import metrics as M


@dataclass
class Recommendation:
    result: RunResult
    best: RunResult
    within_noise: bool
    text: str


RANKS_KEY = RANKS
NOISE_ALLOWANCE_CAP = 3  # a measured spread widens the tolerance to at most 3x itself


def recommend(results: Sequence[RunResult], tolerance: float = 0.05) -> Optional[Recommendation]:
    """The fewest workers whose throughput the sweep cannot tell from the best: each worker costs
    memory and a core.

    A run is close to the best when it is within ``tolerance`` of it, or within the spread
    measured across its repeats (IQR/median of either run, up to 3x ``tolerance``): a gap
    smaller than the noise is not a measured difference.
    """
    finished = [r for r in results if r.status == "FINISHED" and r.info.get(M.DELIVERY) is not False
                and not r.metrics.get(M.PRUNED)]  # a pruned trial stopped early: its figures are partial
    if not finished:
        return None
    best = max(finished, key=lambda r: r.metrics[M.THROUGHPUT])
    best_rate = best.metrics[M.THROUGHPUT]

    def noise(run: RunResult) -> float:
        return max(best.metrics.get(M.THROUGHPUT_IQR, 0.0), run.metrics.get(M.THROUGHPUT_IQR, 0.0))

    def gap(run: RunResult) -> float:
        return 1 - run.metrics[M.THROUGHPUT] / best_rate if best_rate else 0.0

    close = [r for r in finished if gap(r) <= max(tolerance, min(noise(r), NOISE_ALLOWANCE_CAP * tolerance))]
    chosen = min(close, key=lambda r: (r.params.get(NUM_WORKERS, 0), -r.metrics[M.THROUGHPUT]))
    rate = chosen.metrics[M.THROUGHPUT]
    within_noise = chosen is not best and gap(chosen) <= noise(chosen)
    ranks = chosen.params.get(RANKS_KEY) or 1
    swept = [k for k in varying_params(finished) if k != RANKS_KEY]
    if ranks > 1 and X_AXIS not in swept:
        swept.insert(0, X_AXIS)  # "num_workers=N per rank" is the answer with ranks, swept or not
    settings = ", ".join(f"{short_key(k)}={param_text(chosen.params.get(k))}" for k in swept) or "the defaults"
    if ranks > 1:  # what each training process sets, and for how many of them it holds
        settings = f"{settings} per rank with {ranks} ranks"
    text = f"Recommendation: {settings}: {rate:,.0f} samples/s" + (" across the ranks" if ranks > 1 else "")
    if chosen is best:
        text += " (the fastest run)."
    else:
        text += (
            f", {100 * gap(chosen):.1f}% below the fastest ({best_rate:,.0f} samples/s, "
            f"num_workers={best.params.get(NUM_WORKERS)}) with fewer workers"
        )
        if gap(chosen) <= tolerance:
            text += f", inside the {100 * tolerance:.0f}% tolerance"
            text += "; the difference is inside the measured noise." if within_noise else "."
        else:
            text += (f": the difference is inside the measured noise (IQR {100 * noise(chosen):.1f}% of the median),"
                     " so the sweep cannot tell them apart.")
    return Recommendation(chosen, best, within_noise, text + _bound_text(chosen, best, finished, gap(chosen)))


def _bound_text(chosen: RunResult, best: RunResult, finished: Sequence[RunResult], gap: float) -> str:
    """With a training step: what limits the recommended run, and what that means for the workers."""
    bound = chosen.info.get("bound", "")
    waiting = chosen.metrics.get(M.STALL)
    waited = f", {100 * waiting:.0f}% of its time waiting for data" if waiting is not None else ""
    if bound in ("compute-bound", "transfer-bound"):
        part = "step" if bound == "compute-bound" else "copy to the device"
        return (f" It is {bound}{waited}: the {part}, not loading, sets the pace, so more workers would not train "
                f"faster; num_workers={chosen.params.get(NUM_WORKERS)} is enough for this training.")
    computing = [r for r in finished if r.info.get("bound") == "compute-bound"]
    if bound == "loader-bound" and computing:
        fewest = min(r.params.get(NUM_WORKERS, 0) for r in computing)
        return (f" It is loader-bound{waited}; from num_workers={fewest} on the step sets the pace, for at most "
                f"{100 * gap:.1f}% more.")
    if bound == "loader-bound" and best.info.get("bound") == "loader-bound":
        return (f" Even the fastest run is loader-bound{waited if chosen is best else ''}: the step waits for data, "
                "so faster loading (more workers or cores, a lighter transform, a faster format) would train faster.")
    return ""
