"""At a sweep's end, its pick raced against its rivals side by side (``bench.confirm_s``): the pick, the fastest run
and the runs with fewer workers, in interleaved windows on this host (:mod:`loaderexp.execute.paired`), so a host
whose speed drifted while the jobs ran one after another does not decide the answer.

A race: every pass is four rounds, each measuring every setting still in once (a window of each, its stream
resumed), every other one in the reverse order; after a pass, a setting shown slower than the leader beyond the
tolerance with 95% confidence is out.  The race ends as soon as one setting is left, or all still in are shown within
the tolerance of the leader, or none still in can put the pick out any more (each is shown not to beat it by the
tolerance, or reads no faster than it over a pass), or the rounds the budget still holds could not put it out
(:meth:`Race.out_of_reach`) or, at the lead read so far, are unlikely to (:meth:`Race.futile`); else after about
``bench.confirm_s`` (the rules: :mod:`loaderexp.track.race_rules`).  The pick is then the cheapest setting still in
(fewest workers), the rule of :meth:`Difference.verdict`: fewer workers stand unless shown slower.  While the
cheapest one's interval cannot tell, is wider than the tolerance and its mean lies beyond it (more rounds may put it
out), more passes, up to ``EXTEND`` x the budget; still undecided, the cheaper setting stands and the report says the
two cannot be told apart on this host now.

A look after every pass is a sequential test: each look is another chance to put out a setting that is in truth as
fast.  The rule only puts out a side whose whole interval lies beyond the tolerance, and t's intervals over a few
rounds are wide (x3.18 the standard error at four rounds), so a side that is out is slower by a wide margin.
The first pass is four rounds of 0.25 s windows, not two of 0.5 s: the same time measuring, but t at two rounds
is x12.7, and on CIFAR-10 two rounds put out 3 of 6 rivals 34-47% slower where four put out 6 of 6 (one pass of
4.0-4.1 s each).  Later passes, for the settings that are close, have 0.5 s windows (:data:`WINDOW_S`).
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
from loaderexp.report.confirm import (Comparison, Confirmation, close_rival, fastest_rival, fewer_workers_rival,
                                      more_workers_rival)
from loaderexp.result import TOLERANCE, RunFacts, RunResult
from loaderexp.result import metrics as M
from loaderexp.result.paired import raced_whole
from loaderexp.track.race_rules import ENDED, EXTEND, PASS_ROUNDS, Race

log = logging.getLogger("loaderexp")


MAX_SIDES = 5  # the pick, the fastest run, and the nearest fewer-workers runs
# The first pass's windows are short: it puts out the settings far behind.  Those that are close stay for passes of
# longer windows: 3 against 2 workers on 2 cores vary 9% from one 0.25 s window to the next, 3-5% at 0.5 s.
FIRST_WINDOW_S, WINDOW_S = 0.25, 0.5


def contenders(pick: RunResult, finished: Sequence[RunResult], best: RunResult) -> list[RunResult]:
    """The settings raced: the pick, the fastest run (same data), or when the pick is the fastest, the run with the
    next more workers (the same otherwise: measured after the pick, so a host that slowed as the grid went on read
    it slow), and the runs with fewer workers than the pick, nearest first."""
    sides = [pick]
    rival = fastest_rival(pick, finished, best) or more_workers_rival(pick, finished)
    if rival is not None:
        sides.append(rival)
    close = close_rival(pick, finished, TOLERANCE)
    if close is not None and all(close is not side for side in sides):
        sides.append(close)
    return sides + fewer_workers(pick, finished, MAX_SIDES - len(sides))


def first_pass_s(sides: Sequence[RunResult]) -> float:
    """The least the race's first pass takes: four windows of each side, or four whole epochs of each where an epoch
    is short against a window (a JPEG folder of 16 batches an epoch: 2 s an epoch)."""
    if not any(raced_whole(r) for r in sides):
        return PASS_ROUNDS * len(sides) * FIRST_WINDOW_S
    return PASS_ROUNDS * sum(r.metrics.get(M.EPOCH) or r.metrics.get(M.EPOCH_ESTIMATE) or FIRST_WINDOW_S for r in sides)


def fewer_workers(side: RunResult, finished: Sequence[RunResult], most: int) -> list[RunResult]:
    """Up to ``most`` runs with fewer workers than ``side`` (the same otherwise), nearest first."""
    found: list[RunResult] = []
    while len(found) < most:
        fewer = fewer_workers_rival(found[-1] if found else side, finished)
        if fewer is None:
            break
        found.append(fewer)
    return found


def race(sides: Sequence[RunResult], folders: Sequence[Path], seconds: float, tolerance: float = TOLERANCE) -> Race:
    """``sides`` (measured in ``folders``, as they were configured) raced in passes of a pair of interleaved rounds,
    a side shown slower put out after each: until one is left or all still in are within the tolerance of the
    leader; else for about ``seconds``, and on while the pick is undecided, up to ``EXTEND`` x ``seconds``."""
    specs = [spec_from_file(folder / RESOLVED_CONFIG) for folder in folders]
    standing = Race(sides, tolerance)
    started = time.monotonic()
    said = False
    with exclusive_host("confirmation", specs[0].bench.shared_host_ok, RunFacts(), specs[0].bench.host_wait_s):
        while True:
            begun = time.monotonic()
            window_s = WINDOW_S if any(standing.rates) else FIRST_WINDOW_S
            racing = len(standing.alive)
            paired = compare_specs([specs[i] for i in standing.alive], PASS_ROUNDS, window_s)
            standing.add(paired.rates)
            standing.whole_epochs |= paired.whole_epochs
            now = time.monotonic()
            why = standing.stop(now - started, now - begun, racing, seconds)
            if why in ("out of reach", "futile"):
                log.info("confirming the pick: the time left %s show num_workers=%d slower beyond the tolerance; "
                         "it stands", "cannot" if why == "out of reach" else "is unlikely to",
                         standing.sides[standing.pick].workers)
            if why is not None:
                standing.ended = why
                return standing
            if now - started >= seconds and not said:
                log.info("confirming the pick: %d settings still in, the cheapest cannot be told from the leader "
                         "yet; measuring on", len(standing.alive))
                said = True


def _skipped(results: Sequence[RunResult], pick: RunResult) -> str:
    here = socket.gethostname()
    if any(r.host.hostname not in (None, here) for r in results if r.finished):
        return "the jobs ran on other hosts: a comparison on this one would not be theirs"
    if pick.ranks > 1:
        return "runs with several ranks per node are not compared side by side"
    return ""


def confirm_pick(items: Sequence[tuple[Path, RunResult]], seconds: float,
                 tolerance: float = TOLERANCE) -> Optional[Confirmation]:
    """The pick confirmed (or replaced) by a race of it and its rivals side by side; None without a pick."""
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
    sides = contenders(chosen.result, finished, chosen.best)
    if len(sides) == 1:
        pruned = " measured whole (a trial stopped after its first window is no rival)" if any(
            r.metrics.get(M.PRUNED) for r in results) else ""
        return Confirmation(pick=chosen.result.params, note=f"no rival to race: no faster run, none with fewer or "
                                                            f"more workers otherwise the same{pruned}")
    if first_pass_s(sides) > EXTEND * seconds:  # a short epoch of minutes: a first pass of half an hour checks nothing
        return Confirmation(pick=chosen.result.params, note=(
            f"a pass of the race, four whole epochs of each of {len(sides)} settings (an epoch is short against a "
            f"window), would take about {first_pass_s(sides):.0f} s, past its bound of {EXTEND}x bench.confirm_s "
            f"({EXTEND * seconds:.0f} s): bench.confirm_s={first_pass_s(sides) / EXTEND:.0f} would race them"))
    log.info("confirming the pick: %d settings raced side by side (about %.0f s; a setting shown slower is out "
             "after each pass of %d rounds)", len(sides), seconds, PASS_ROUNDS)
    started = time.monotonic()
    found: list[Comparison] = []
    raced: set[int] = set()
    whole_epochs = False
    try:
        while True:
            standing = race(sides, [folder[id(r)] for r in sides], seconds, tolerance)
            raced.update(id(s) for s in sides)
            whole_epochs |= standing.whole_epochs
            found = [c for c in found if all(c.rival != s.params for s in sides)] + standing.comparisons()
            pick, leader = sides[standing.pick], sides[standing.leader]
            # Runs with fewer workers than the pick that were never raced stand unless shown slower, wherever they
            # lie: below the fewest raced (more settings than one race holds; 0 workers below 1 put out, since 1
            # worker is often slower than 0) or between the fewest raced and the pick (the jobs' pick put out by a
            # faster run: 2 out against 4 leaves 3 to race against 4)
            below = [r for r in fewer_workers(pick, finished, len(finished)) if id(r) not in raced][:MAX_SIDES - 2]
            # A pick the race moved up to more workers than the jobs' leads there: the next one up is raced too
            up = more_workers_rival(pick, finished) if pick is leader and pick.workers > chosen.result.workers \
                else None
            above = [up] if up is not None and id(up) not in raced else []
            if not (below or above) or time.monotonic() - started > EXTEND * seconds:
                break
            log.info("confirming the pick: num_workers=%d stands; racing the runs %s not raced yet", pick.workers,
                     "with fewer workers" if not above else "with more workers" if not below else "beside it")
            sides = [pick] + ([leader] if leader is not pick else []) + above + below
    except Exception as error:  # noqa: BLE001 - the sweep's answer stands unconfirmed, saying why
        return Confirmation(pick=chosen.result.params,
                            note=f"the comparison failed: {type(error).__name__}: {str(error).splitlines()[0]}")
    for comparison in found:  # only the last race's pick is the pick
        comparison.accepted = comparison.accepted and comparison.rival == pick.params
    return Confirmation(found, pick=pick.params, seconds=time.monotonic() - started,
                        ended=ENDED.get(standing.ended, ""), whole_epochs=whole_epochs)
