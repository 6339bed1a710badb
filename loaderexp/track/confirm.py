"""At a sweep's end, its pick against its rivals side by side (``bench.confirm_s``): the fastest run, then the
next fewer workers, each pair in interleaved windows on this host (:mod:`loaderexp.execute.paired`), so a host
whose speed drifted while the jobs ran one after another does not decide the answer.

The rule is :meth:`Difference.verdict`'s, on paired differences: the fastest run replaces the pick when it is
faster beyond the tolerance with 95% confidence; fewer workers replace it unless they are shown slower beyond
the tolerance (then the next fewer are tried, while the budget lasts).  An interval too wide to tell gets
more windows (up to ``EXTEND`` x its share); still undecided, the cheaper setting stands, and the report
says the two cannot be told apart on this host now.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Optional, Sequence

from loaderexp.config import RESOLVED_CONFIG, spec_from_file
from loaderexp.execute.dispatch import compare_specs
from loaderexp.execute.host_lock import exclusive_host
from loaderexp.report import recommend
from loaderexp.report.configurations import as_configurations
from loaderexp.report.confirm import Comparison, Confirmation, fastest_rival, fewer_workers_rival
from loaderexp.result import TOLERANCE, RunFacts, RunResult
from loaderexp.result import metrics as M
from loaderexp.result.paired import Difference, Verdict, paired_difference

log = logging.getLogger("loaderexp")


EXTEND = 3  # an interval still too wide to decide gets up to this many times its share of bench.confirm_s


def compare_runs(base: Path, rival: Path, seconds: float, tolerance: float = TOLERANCE) -> Difference:
    """The rival's rate against the base's, from interleaved windows of the two as they were configured; while
    the interval cannot tell them apart and is wider than the tolerance, more windows, up to ``EXTEND`` x
    ``seconds`` in all."""
    specs = [spec_from_file(folder / RESOLVED_CONFIG) for folder in (base, rival)]
    rates: tuple[list[float], list[float]] = ([], [])
    started = time.monotonic()
    with exclusive_host("confirmation", specs[0].bench.shared_host_ok, RunFacts(), specs[0].bench.host_wait_s):
        while True:
            paired = compare_specs(specs, seconds)
            rates[0].extend(paired.rates[0])
            rates[1].extend(paired.rates[1])
            difference = paired_difference(*rates)
            wide = difference.high - difference.low > 2 * tolerance
            if difference.verdict(tolerance) is not Verdict.CANNOT_TELL or not wide or \
                    time.monotonic() - started + seconds > EXTEND * seconds:
                return difference
            log.info("confirming the pick: %s cannot tell them apart yet; measuring on", difference.text())


def _skipped(results: Sequence[RunResult], pick: RunResult) -> str:
    here = socket.gethostname()
    if any(r.host.hostname not in (None, here) for r in results if r.finished):
        return "the jobs ran on other hosts: a comparison on this one would not be theirs"
    if pick.ranks > 1:
        return "runs with several ranks per node are not compared side by side"
    return ""


def confirm_pick(items: Sequence[tuple[Path, RunResult]], seconds: float,
                 tolerance: float = TOLERANCE) -> Optional[Confirmation]:
    """The pick confirmed (or replaced) side by side within about ``seconds``; None without a pick."""
    items = as_configurations(items)[0]  # runs that differ only in what changes nothing here are one
    results = [r for _, r in items]
    chosen = recommend(results, tolerance)
    if chosen is None or seconds <= 0:
        return None
    skipped = _skipped(results, chosen.result)
    if skipped:
        return Confirmation(pick=chosen.result.params, note=skipped)
    folder = {id(r): path for path, r in items}
    finished = [r for r in results if r.finished and not r.metrics.get(M.PRUNED)]
    confirmation, current = Confirmation(pick=chosen.result.params), chosen.result
    per, started = seconds / 2, time.monotonic()

    def compare(rival: RunResult, why: str, accept) -> bool:
        nonlocal current
        log.info("confirming the pick: %s against it, side by side (%.0f s)", why, per)
        try:
            difference = compare_runs(folder[id(current)], folder[id(rival)], per, tolerance)
        except Exception as error:  # noqa: BLE001 - the sweep's answer stands unconfirmed, saying why
            confirmation.note = f"the comparison failed: {type(error).__name__}: {str(error).splitlines()[0]}"
            return False
        accepted = accept(difference)
        confirmation.comparisons.append(Comparison(current.params, rival.params, why, difference, accepted))
        current = rival if accepted else current
        return accepted

    fastest = fastest_rival(current, finished, chosen.best)
    if fastest is not None:
        compare(fastest, "the fastest run", lambda d: d.verdict(tolerance) is Verdict.FASTER)
    while time.monotonic() - started + per <= seconds * 1.2 and not confirmation.note:
        fewer = fewer_workers_rival(current, finished)
        # Fewer workers cost less: they stand unless shown slower beyond the tolerance.
        if fewer is None or not compare(fewer, "the next fewer workers", lambda d: d.verdict(tolerance) is not Verdict.SLOWER):
            break
    confirmation.pick, confirmation.seconds = current.params, time.monotonic() - started
    return confirmation
