"""One decision rule, on intervals: the words follow the 95% interval against the tolerance, never the
midpoint alone (an interval that spans zero is not "slower")."""

from __future__ import annotations

from loaderexp.report.confirm import Comparison, Confirmation
from loaderexp.result import TOLERANCE
from loaderexp.result.paired import Difference, Verdict


def test_an_interval_that_spans_zero_cannot_tell():
    spanning = Difference(mean=-0.073, low=-0.381, high=0.235, pairs=5)  # the quickstart's, on a busy host
    assert spanning.verdict(TOLERANCE) is Verdict.CANNOT_TELL


def test_the_verdict_follows_the_interval():
    assert Difference(-0.40, -0.45, -0.35, 5).verdict(TOLERANCE) is Verdict.SLOWER
    assert Difference(0.30, 0.20, 0.40, 5).verdict(TOLERANCE) is Verdict.FASTER
    assert Difference(0.01, -0.02, 0.03, 5).verdict(TOLERANCE) is Verdict.SAME
    assert Difference(-0.08, -0.12, -0.01, 5).verdict(TOLERANCE) is Verdict.CANNOT_TELL  # mean below, not wholly


def test_the_confirmation_says_cannot_tell_and_keeps_the_cheaper_pick():
    spanning = Difference(mean=-0.073, low=-0.381, high=0.235, pairs=5)
    confirmation = Confirmation([Comparison({"loader.num_workers": 4}, {"loader.num_workers": 3},
                                            "the next fewer workers", spanning, accepted=True)],
                                pick={"loader.num_workers": 3}, seconds=8)
    text = confirmation.text(["loader.num_workers"], TOLERANCE)
    assert "cannot tell apart on this host now" in text and ": slower" not in text
    assert text.endswith("Confirmed pick: num_workers=3.")
