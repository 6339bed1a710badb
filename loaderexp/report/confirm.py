"""The pick confirmed side by side: which runs are its rivals, what the paired windows said of each, and the
pick that stands (the sweep's rule, on paired differences instead of figures measured minutes apart)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from loaderexp.report.params import short_key
from loaderexp.result import CONTROL_PARAMS, NUM_WORKERS, RunResult, param_text
from loaderexp.result import metrics as M
from loaderexp.result.paired import Difference, Verdict

CONFIRMATION_FILE = "confirmation.json"
DATASET_PREFIXES = ("dataset.", "transform.", "data_root")


def setting_text(params: dict[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{short_key(k)}={param_text(params.get(k))}" for k in keys) or "the defaults"


def same_data(a: RunResult, b: RunResult) -> bool:
    """Both read the same dataset with the same transform: one dataset holder can serve both."""
    keys = {k for k in (*a.params, *b.params) if k.startswith(DATASET_PREFIXES)}
    return all(a.params.get(k) == b.params.get(k) for k in keys)


def fastest_rival(pick: RunResult, finished: Sequence[RunResult], best: RunResult) -> Optional[RunResult]:
    return best if best is not pick and same_data(best, pick) else None


def _others(r: RunResult) -> dict[str, Any]:
    """Its settings but its workers (and how it was driven: a search's trials each carry another bar)."""
    return {k: v for k, v in r.params.items() if k != NUM_WORKERS and k not in CONTROL_PARAMS}


def ties(pick: RunResult, finished: Sequence[RunResult], tolerance: float) -> list[RunResult]:
    """The runs that differ from the pick in a knob besides its workers (the same data, its workers at most the
    pick's) and that the jobs, measured one after another, cannot tell from it (within the tolerance or either run's
    spread), fastest first: a sweep over backends picked nodes_process at 2 workers, 12,453 samples/s, beside
    DataLoader's 12,372 (-0.6%), and only the worker counts were raced.  With more workers the pick stands unless
    shown slower, and the race has the pick's own next more workers for that."""
    if M.THROUGHPUT not in pick.metrics:
        return []
    found = [r for r in finished if r is not pick and M.THROUGHPUT in r.metrics and same_data(r, pick)
             and _others(r) != _others(pick) and r.workers <= pick.workers and cannot_tell(r, pick, tolerance)]
    return sorted(found, key=lambda r: -r.metrics[M.THROUGHPUT])


def cannot_tell(run: RunResult, other: RunResult, tolerance: float) -> bool:
    """The jobs, measured one after another, cannot tell ``run`` from ``other``: their rates lie within the
    tolerance or either run's measured spread (IQR / median) of each other."""
    noise = max(run.metrics.get(M.THROUGHPUT_IQR, 0.0), other.metrics.get(M.THROUGHPUT_IQR, 0.0))
    return abs(run.metrics[M.THROUGHPUT] / other.metrics[M.THROUGHPUT] - 1) <= max(noise, tolerance)


def close_rival(pick: RunResult, finished: Sequence[RunResult], tolerance: float) -> Optional[RunResult]:
    """The fastest of the pick's :func:`ties`: raced beside it, so the jobs' order does not choose between them."""
    return next(iter(ties(pick, finished, tolerance)), None)


def fewer_workers_rival(pick: RunResult, finished: Sequence[RunResult]) -> Optional[RunResult]:
    """The run with the most workers below the pick's, the same in everything else."""
    fewer = [r for r in finished if r.workers < pick.workers and _others(r) == _others(pick)]
    return max(fewer, key=lambda r: r.workers, default=None)


def more_workers_rival(pick: RunResult, finished: Sequence[RunResult]) -> Optional[RunResult]:
    """The run with the fewest workers above the pick's, the same in everything else."""
    more = [r for r in finished if r.workers > pick.workers and _others(r) == _others(pick)]
    return min(more, key=lambda r: r.workers, default=None)


@dataclass
class Comparison:
    base: dict[str, Any]  # the race's leader (the fastest side by side)
    rival: dict[str, Any]
    why: str  # "raced 6 rounds", "out after 3 rounds"
    difference: Difference  # the rival against the leader
    accepted: bool  # the rival is the pick (the cheapest not shown slower than the leader)
    kept: bool = False  # ... and was the jobs' pick already: it stays, rather than becomes, the pick

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "rival": self.rival, "why": self.why, "difference": self.difference.to_dict(),
                "accepted": self.accepted, "kept": self.kept}


def names(result: RunResult, params: dict[str, Any]) -> bool:
    """``params`` are the run's (a key it does not have, an inert one merged away, left out)."""
    return all(result.params.get(k) == v for k, v in params.items() if k in result.params)


@dataclass(frozen=True)
class RaceVerdicts:
    """What the race said of the runs beside the pick: the params of those it could not tell from the pick, and
    of those it put out against the pick (shown slower beyond the tolerance, side by side)."""

    untold: tuple[dict[str, Any], ...] = ()
    slower: tuple[dict[str, Any], ...] = ()


@dataclass
class Confirmation:
    comparisons: list[Comparison] = field(default_factory=list)
    pick: Optional[dict[str, Any]] = None  # the params of the pick that stands
    note: str = ""  # why it was not (fully) confirmed
    seconds: float = 0.0
    ended: str = ""  # why the (last) race ended, in words
    whole_epochs: bool = False  # its windows were whole epochs, each from its start to its end (short epochs)

    def to_dict(self) -> dict[str, Any]:
        return {"comparisons": [c.to_dict() for c in self.comparisons], "pick": self.pick, "note": self.note,
                "seconds": self.seconds, "ended": self.ended, "whole_epochs": self.whole_epochs}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Confirmation":
        comparisons = [Comparison(c["base"], c["rival"], c["why"], Difference(**c["difference"]), c["accepted"],
                                  bool(c.get("kept", False))) for c in data.get("comparisons", [])]
        return cls(comparisons, data.get("pick"), data.get("note", ""), data.get("seconds", 0.0), data.get("ended", ""),
                   bool(data.get("whole_epochs", False)))

    def picked(self, results: Sequence[RunResult]) -> Optional[RunResult]:
        """The run of ``results`` the pick names (its params, inert ones left out on both sides); None without
        a pick or such a run."""
        if not self.pick:
            return None
        return next((r for r in results if names(r, self.pick)), None)

    def beside(self, pick: Optional[RunResult], tolerance: float) -> RaceVerdicts:
        """The race's verdicts on the runs it compared with ``pick``.  A run put out against another leader is
        in neither: the race said nothing of its gap to the pick."""
        untold, slower = [], []
        for c in self.comparisons if pick is not None else ():
            verdict = c.difference.verdict(tolerance)
            if verdict is Verdict.SLOWER and names(pick, c.base):
                slower.append(c.rival)
            elif verdict in (Verdict.SAME, Verdict.CANNOT_TELL) and names(pick, c.base):
                untold.append(c.rival)
            elif verdict in (Verdict.SAME, Verdict.CANNOT_TELL) and names(pick, c.rival):
                untold.append(c.base)
        return RaceVerdicts(tuple(untold), tuple(slower))

    @classmethod
    def read(cls, folder: Path) -> Optional["Confirmation"]:
        import json

        try:
            return cls.from_dict(json.loads((Path(folder) / CONFIRMATION_FILE).read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def text(self, keys: Sequence[str], tolerance: float) -> str:
        if not self.comparisons:
            return f"Not confirmed side by side: {self.note}" if self.note else ""
        ended = f"; it ended when {self.ended}" if self.ended else ""
        timed = ("whole epochs on this host, each from its start to its end, as training pays it: an epoch is short "
                 "against a window;" if self.whole_epochs else "windows on this host,")
        lines = [f"Confirmed side by side (interleaved {timed} {self.seconds:.0f} s{ended}):"]
        for c in self.comparisons:
            d = c.difference
            lines.append(f"  {setting_text(c.rival, keys)} ({c.why}) against {setting_text(c.base, keys)}: "
                         f"{d.text()}: {d.words(tolerance)}{_accepted(c)}")
        lines.append(f"Confirmed pick: {setting_text(self.pick or {}, keys)}." + (f" ({self.note})" if self.note else ""))
        return "\n".join(lines)

    def unraced_ties(self, pick: Optional[RunResult], finished: Sequence[RunResult], keys: Sequence[str],
                     tolerance: float) -> str:
        """The pick's :func:`ties` the race did not run: said, with how to race them, not left to the jobs' order."""
        raced = [params for c in self.comparisons for params in (c.base, c.rival)]
        left = [r for r in (ties(pick, finished, tolerance) if pick is not None else [])
                if not any(names(r, params) for params in raced)]
        if not left or not self.comparisons:
            return ""
        rate = pick.metrics[M.THROUGHPUT]
        runs = "; ".join(f"{setting_text(r.params, keys)} ({100 * (r.metrics[M.THROUGHPUT] / rate - 1):+.1f}%)"
                         for r in left)
        return (f"Not raced, and the jobs (measured one after another) cannot tell from the pick: {runs}; a sweep of "
                "just those settings and the pick races them side by side.")


def _accepted(c: Comparison) -> str:
    return "" if not c.accepted else "; it stays the pick" if c.kept else "; it becomes the pick"


def confirmed_pick(confirmation: Optional[Confirmation], results: Sequence[RunResult]) -> Optional[RunResult]:
    """The finished run of ``results`` that the race left standing: what the sweep answers with in place of the
    jobs' recommendation; None without a race, or when it names none of them."""
    return confirmation.picked([r for r in results if r.finished]) if confirmation is not None else None
