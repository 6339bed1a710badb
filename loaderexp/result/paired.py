"""A difference between two settings with its confidence interval, from paired windows (each round's two
windows side by side) or from two runs' windows (independent samples): what a comparison on a noisy host
can honestly claim."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from loaderexp.harness.budget import epoch_is_short, round_and_depth
from loaderexp.result import BATCH_SIZE, BUDGET, PREFETCH_FACTOR, RunResult

# Two-sided 95% quantiles of Student's t by degrees of freedom (1..30); beyond, the normal's.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(degrees: float) -> float:
    if degrees < 1:
        return float("inf")
    whole = int(degrees)
    return T95[whole - 1] if whole <= len(T95) else 1.96


class Verdict(Enum):
    """What a difference's 95% interval shows against a tolerance."""

    FASTER = "faster beyond the tolerance"
    SLOWER = "slower beyond the tolerance"
    SAME = "cannot differ by more than the tolerance"
    CANNOT_TELL = "cannot tell apart on this host now (the interval reaches past the tolerance, but not wholly)"


@dataclass(frozen=True)
class Difference:
    """``other`` against ``base``: the mean relative difference (other / base - 1) and its 95% interval."""

    mean: float
    low: float
    high: float
    pairs: int  # rounds (paired) or windows in the smaller run (independent)

    def inside(self, tolerance: float) -> bool:
        """The interval lies within +-``tolerance``: the two cannot differ by more."""
        return -tolerance <= self.low and self.high <= tolerance

    def text(self) -> str:
        return f"{100 * self.mean:+.1f}% (95% CI {100 * self.low:+.1f}% .. {100 * self.high:+.1f}%, n={self.pairs})"

    def verdict(self, tolerance: float) -> "Verdict":
        """The one decision rule: what the interval, not its midpoint, shows against ``tolerance``."""
        if self.low > tolerance:
            return Verdict.FASTER
        if self.high < -tolerance:
            return Verdict.SLOWER
        if self.inside(tolerance):
            return Verdict.SAME
        return Verdict.CANNOT_TELL

    def words(self, tolerance: float) -> str:
        """The verdict in words.  One that cannot tell whose interval lies wholly on one side of zero says that
        direction is shown (-13.3% .. -2.0%: slower, but by the tolerance or less, or by more, the interval allows
        both): "cannot tell apart" alone read as if it showed no difference."""
        verdict = self.verdict(tolerance)
        if verdict is not Verdict.CANNOT_TELL or self.low <= 0 <= self.high:
            return verdict.value
        side = "slower" if self.high < 0 else "faster"
        return (f"{side} (the whole interval), but not shown {side} beyond the {100 * tolerance:.0f}% tolerance: "
                "cannot tell apart on this host now")

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "pairs": self.pairs}


def paired_difference(base: Sequence[float], other: Sequence[float]) -> Difference:
    """Round by round: each round's ``other / base - 1``; their mean, and t's interval over the rounds."""
    ratios = [o / b - 1 for b, o in zip(base, other) if b > 0]
    if not ratios:
        return Difference(0.0, float("-inf"), float("inf"), 0)
    mean = statistics.fmean(ratios)
    if len(ratios) < 2:
        return Difference(mean, float("-inf"), float("inf"), 1)
    half = t95(len(ratios) - 1) * statistics.stdev(ratios) / math.sqrt(len(ratios))
    return Difference(mean, mean - half, mean + half, len(ratios))


def independent_difference(base: Sequence[float], other: Sequence[float]) -> Difference:
    """Two runs' windows: the difference of their means relative to ``base``'s, Welch's interval."""
    if len(base) < 2 or len(other) < 2 or statistics.fmean(base) <= 0:
        mean = statistics.fmean(other) / statistics.fmean(base) - 1 if base and other and sum(base) else 0.0
        return Difference(mean, float("-inf"), float("inf"), min(len(base), len(other)))
    mean_b, mean_o = statistics.fmean(base), statistics.fmean(other)
    var_b, var_o = statistics.variance(base) / len(base), statistics.variance(other) / len(other)
    spread = math.sqrt(var_b + var_o)
    degrees = (var_b + var_o) ** 2 / ((var_b ** 2 / (len(base) - 1) + var_o ** 2 / (len(other) - 1)) or 1e-300)
    half = t95(degrees) * spread / mean_b
    mean = mean_o / mean_b - 1
    return Difference(mean, mean - half, mean + half, min(len(base), len(other)))


def runs_difference(base: Sequence[float], other: Sequence[float]) -> Difference:
    """Whole runs' rates (each run's median over its windows), ``other`` against ``base``: the ratio of their
    geometric means, with t's interval from the spread between runs (pooled on the log scale).  Windows of
    one run share its moment of the host; separate runs see how far the host's speed moves between them,
    which is what a comparison across time has to allow for."""
    logs_b = [math.log(r) for r in base if r > 0]
    logs_o = [math.log(r) for r in other if r > 0]
    if not logs_b or not logs_o:
        return Difference(0.0, float("-inf"), float("inf"), 0)
    mean_b, mean_o = statistics.fmean(logs_b), statistics.fmean(logs_o)
    mean = math.exp(mean_o - mean_b) - 1
    degrees = len(logs_b) + len(logs_o) - 2
    if degrees < 1:
        return Difference(mean, float("-inf"), float("inf"), len(logs_o))
    squares = sum((x - mean_b) ** 2 for x in logs_b) + sum((x - mean_o) ** 2 for x in logs_o)
    spread = math.sqrt(squares / degrees) * math.sqrt(1 / len(logs_b) + 1 / len(logs_o))
    half = t95(degrees) * spread
    return Difference(mean, math.exp(mean_o - mean_b - half) - 1, math.exp(mean_o - mean_b + half) - 1, len(logs_o))


def raced_whole(run: RunResult) -> bool:
    """Whether a race times this run's setting in whole epochs, read from its record as the measuring process
    decides it (:func:`loaderexp.harness.paired.short_epoch`): the app never imports torch."""
    length = run.info.dataset_length
    if not length:
        return False
    batches = -(-length // (run.params.get(BATCH_SIZE) or 1))
    round_size, depth = round_and_depth(run.workers, run.params.get(PREFETCH_FACTOR), batches,
                                        whole_epochs=run.params.get(BUDGET) == "epochs")
    return epoch_is_short(batches, depth, round_size)
