"""The rules of a race (:mod:`loaderexp.track.confirm`): after each pass of interleaved rounds, who is out, which
side is the pick, and whether more rounds could still change it.  Pure: rates in, decisions out, so the same
rules run on synthetic windows (``benchmarks/race_stopping.py``, the tests) as on the host.

When a race ends (:meth:`Race.stop`): one side is left; every side still in is within the tolerance of the leader;
none can put the pick out any more; the rounds the budget still holds could not put it out were a rival's true
lead the high end of today's interval (:meth:`Race.out_of_reach`), or are unlikely to at the lead read so far
(:meth:`Race.futile`); the budget is spent and the pick is not undecided; or ``EXTEND`` x the budget is.
"""

from __future__ import annotations

import math
import statistics
from typing import Iterator, Optional, Sequence

from loaderexp.report.confirm import Comparison
from loaderexp.result import RunResult
from loaderexp.result.paired import Difference, Verdict, paired_difference, t95

EXTEND = 3  # a pick still too wide to decide gets more passes, up to this many times bench.confirm_s in all
PASS_ROUNDS = 4  # a pass: rounds in alternating order, so a steady drift favours no side; then who is out
# The futility rule reads the lead after this many rounds, not before: the first pass's 0.25 s windows vary 9%, and
# on them alone it kept the pick in 14% of simulated races against a rival truly 15% ahead (3% from 8 rounds on)
FUTILE_AFTER = 2 * PASS_ROUNDS
FUTILE_BELOW = 0.10  # the chance that the rounds left put the pick out, below which they are not run
# Why a race ended (:meth:`Race.stop`), in the report's words
ENDED = {
    "one left": "every rival was shown slower",
    "settled": "every setting still in was shown within the tolerance of the leader",
    "pick stands": "no setting still in could put the pick out",
    "budget": "its budget (bench.confirm_s) was spent",
    "out of reach": "the rounds its budget still held could not have put the pick out",
    "futile": "the rounds its budget still held were unlikely to put the pick out at the lead read so far",
    "bound": f"it reached its bound ({EXTEND}x bench.confirm_s)",
}


class Race:
    """The sides' rates round by round, which are still in, and each one's difference from the leader."""

    def __init__(self, sides: Sequence[RunResult], tolerance: float):
        self.sides, self.tolerance = list(sides), tolerance
        self.rates: list[list[float]] = [[] for _ in sides]
        self.alive = list(range(len(sides)))
        self.out_after: dict[int, int] = {}  # side -> rounds it ran before it was out
        self.differences: dict[int, tuple[int, Difference]] = {}  # side -> (the leader it was read against, it)
        self.leader = 0
        self.ended = ""  # why it ended: a key of ENDED, set by whoever ran it (:meth:`stop` says)
        self.whole_epochs = False  # its windows were whole epochs (an epoch short against a window)

    def add(self, rates: Sequence[Sequence[float]]) -> None:
        """One pass's rates of the sides still in; then the leader, the differences, and who is out."""
        for index, side_rates in zip(self.alive, rates):
            self.rates[index].extend(side_rates)
        self.leader = max(self.alive, key=lambda i: statistics.median(self.rates[i]))
        for index in self.alive:
            if index != self.leader:
                self.differences[index] = self.leader, paired_difference(self.rates[self.leader], self.rates[index])
        out = [i for i in self.alive if i != self.leader
               and self.differences[i][1].verdict(self.tolerance) is Verdict.SLOWER]
        for index in out:
            self.out_after[index] = len(self.rates[index])
        self.alive = [i for i in self.alive if i not in out]

    @property
    def pick(self) -> int:
        """The cheapest side still in: fewest workers; among as many, the jobs' pick (side 0) while it is in, as it
        stands unless shown slower (DataLoader and nodes_process at 2 workers, -11.7% .. +1.0% after 4 rounds, had
        the pick follow the faster median: the rounds' noise); then the faster."""
        return min(self.alive, key=lambda i: (self.sides[i].workers, i != 0, -statistics.median(self.rates[i])))

    def undecided(self) -> bool:
        """The pick's interval cannot tell it from the leader's, is wider than the tolerance, and its mean lies
        beyond the tolerance: more rounds may show it slower and change the pick.  A mean within the tolerance
        would leave the pick standing however narrow the interval grew (the rule puts a side out only when
        its whole interval is beyond): more rounds could not change the answer."""
        if self.pick == self.leader:
            return False
        difference = self.differences[self.pick][1]
        return difference.verdict(self.tolerance) is Verdict.CANNOT_TELL and \
            difference.high - difference.low > 2 * self.tolerance and difference.mean < -self.tolerance

    def settled(self) -> bool:
        """Every side still in is within the tolerance of the leader: more rounds would not change the pick."""
        return all(self.differences[i][1].verdict(self.tolerance) is Verdict.SAME
                   for i in self.alive if i != self.leader)

    def pick_stands(self) -> bool:
        """Every other side still in is shown, with 95% confidence, not to beat the pick by the tolerance, or has
        more workers and reads no faster than the pick: none can put it out (the rule puts a side out only when
        shown slower beyond the tolerance), and none is cheaper (the pick is the cheapest still in).  A costlier
        side reading no faster would need later rounds to move its mean past the tolerance to change the answer;
        racing it to tell a tie apart cost 8-16 rounds (3 against 2 workers on 2 cores vary 3-9% a window)."""
        pick = self.sides[self.pick]
        for index, difference, _ in self._against_pick():
            no_faster = self.sides[index].workers > pick.workers and difference.mean >= 0 \
                and difference.pairs >= PASS_ROUNDS  # a pass of rounds: two are too few to read a mean on
            if difference.low <= -self.tolerance and not no_faster:
                return False
        return True

    def out_of_reach(self, rounds_left: int) -> bool:
        """The rounds the budget still holds cannot put the pick out: were each rival's true lead over it the
        high end of today's interval, the pick's interval after those rounds (today's spread, t for all the rounds)
        would still reach inside the tolerance.  A tie (3 workers against 2 on 2 cores: +1.2%, CI -7.6..+10.0
        after 12 rounds) otherwise races on to the budget only to say "cannot tell" of a pick that stands."""
        for _, difference, spread in self._against_pick():
            if math.isnan(spread):
                return False
            total = difference.pairs + rounds_left
            if difference.low + t95(total - 1) * spread / math.sqrt(total) <= -self.tolerance:
                return False
        return True

    def futile(self, rounds_left: int) -> bool:
        """At the lead each rival still in has over the pick so far, the rounds left would put the pick out with a
        chance below ``FUTILE_BELOW`` (conditional power): the pick's final mean, drawn about today's with the
        rounds' spread, would have to land beyond the tolerance by its interval's half.  Read from ``FUTILE_AFTER``
        rounds on, and only while that lead lies within the tolerance.  :meth:`out_of_reach` takes the interval's far
        end as the lead and so runs ties on to the budget (``benchmarks/race_stopping.py``: 3 against 2 workers on 2
        cores, simulated, 8.6-13.8 s of race at a 0-5% lead without this rule, 7.8-11.2 s with it, the same picks
        within 3 points at leads up to 20%)."""
        if rounds_left <= 0:
            return True
        for _, difference, spread in self._against_pick():
            if difference.pairs < FUTILE_AFTER or math.isnan(spread) or difference.mean <= -self.tolerance:
                return False  # a lead read beyond the tolerance is for more rounds to show, or not
            if spread <= 0:
                continue  # every round read the same lead, within the tolerance: no round left can move it
            total = difference.pairs + rounds_left
            beyond = -self.tolerance - t95(total - 1) * spread / math.sqrt(total)  # the final mean that puts it out
            z = (beyond - difference.mean) / (spread * math.sqrt(rounds_left) / total)
            if 0.5 * math.erfc(-z / math.sqrt(2)) >= FUTILE_BELOW:
                return False
        return True

    def _against_pick(self) -> Iterator[tuple[int, Difference, float]]:
        """Each other side still in: its index, the pick against it over the rounds so far, and the standard
        deviation of the rounds' differences (nan under two rounds)."""
        pick = self.pick
        for index in self.alive:
            if index == pick:
                continue
            difference = paired_difference(self.rates[index], self.rates[pick])  # the pick against the rival
            rounds = difference.pairs
            bounded = rounds >= 2 and math.isfinite(difference.low)
            yield index, difference, \
                (difference.mean - difference.low) / t95(rounds - 1) * math.sqrt(rounds) if bounded else math.nan

    def stop(self, elapsed: float, pass_s: float, racing: int, seconds: float) -> Optional[str]:
        """Why the race ends after this pass (None: it goes on).  ``elapsed``: the race's seconds so far, ``pass_s``
        this pass's, which ``racing`` sides ran; ``seconds`` the budget (``bench.confirm_s``)."""
        if len(self.alive) == 1:
            return "one left"
        if self.settled():
            return "settled"
        if self.pick_stands():
            return "pick stands"
        if elapsed >= seconds and not self.undecided():
            return "budget"
        budget = (EXTEND if self.undecided() else 1) * seconds
        next_pass_s = pass_s * len(self.alive) / racing  # a pass of the sides still in costs what this one did a side
        rounds_left = PASS_ROUNDS * max(math.ceil((budget - elapsed) / max(next_pass_s, 1e-9)), 0)
        if self.out_of_reach(rounds_left):
            return "out of reach"
        if self.futile(rounds_left):
            return "futile"
        if elapsed + pass_s > EXTEND * seconds:
            return "bound"
        return None

    def comparisons(self) -> list[Comparison]:
        """Each side against the leader it was last read against (a side put out keeps the leader of its pass); the
        pick's marked accepted when it is not the leader."""
        found = []
        for index, side in enumerate(self.sides):
            if index == self.leader:
                continue
            leader, difference = self.differences[index]
            rounds = self.out_after.get(index)
            why = f"out after {rounds} rounds" if rounds else f"raced {len(self.rates[index])} rounds"
            found.append(Comparison(self.sides[leader].params, side.params, why, difference, index == self.pick,
                                    kept=index == self.pick == 0))
        return found
