"""One decision rule, on intervals: the words follow the 95% interval against the tolerance, never the
midpoint alone (an interval that spans zero is not "slower")."""

from __future__ import annotations

from loaderexp.report.confirm import Comparison, Confirmation
from loaderexp.result import TOLERANCE
from loaderexp.result.paired import Difference, Verdict, paired_difference


def test_an_interval_that_spans_zero_cannot_tell():
    spanning = Difference(mean=-0.073, low=-0.381, high=0.235, pairs=5)  # the quickstart's, on a busy host
    assert spanning.verdict(TOLERANCE) is Verdict.CANNOT_TELL


def test_the_verdict_follows_the_interval():
    assert Difference(-0.40, -0.45, -0.35, 5).verdict(TOLERANCE) is Verdict.SLOWER
    assert Difference(0.30, 0.20, 0.40, 5).verdict(TOLERANCE) is Verdict.FASTER
    assert Difference(0.01, -0.02, 0.03, 5).verdict(TOLERANCE) is Verdict.SAME
    assert Difference(-0.08, -0.12, -0.01, 5).verdict(TOLERANCE) is Verdict.CANNOT_TELL  # mean below, not wholly


def test_the_words_say_a_direction_the_interval_shows_even_where_they_cannot_tell():
    below = Difference(-0.077, -0.133, -0.020, 28)  # a race's 2 against 3 workers: slower, maybe within the tolerance
    assert below.verdict(TOLERANCE) is Verdict.CANNOT_TELL
    assert below.words(TOLERANCE).startswith("slower (the whole interval), but not shown slower beyond the 5% ")
    assert Difference(0.08, 0.01, 0.12, 9).words(TOLERANCE).startswith("faster (the whole interval)")
    assert Difference(-0.073, -0.381, 0.235, 5).words(TOLERANCE) == Verdict.CANNOT_TELL.value  # holds zero
    assert Difference(-0.40, -0.45, -0.35, 5).words(TOLERANCE) == Verdict.SLOWER.value


def test_the_confirmation_says_cannot_tell_and_keeps_the_cheaper_pick():
    spanning = Difference(mean=-0.073, low=-0.381, high=0.235, pairs=5)
    confirmation = Confirmation([Comparison({"loader.num_workers": 4}, {"loader.num_workers": 3},
                                            "the next fewer workers", spanning, accepted=True)],
                                pick={"loader.num_workers": 3}, seconds=8)
    text = confirmation.text(["loader.num_workers"], TOLERANCE)
    assert "cannot tell apart on this host now" in text and ": slower" not in text
    assert text.endswith("Confirmed pick: num_workers=3.")


def _run(workers: int, rate: float):
    from loaderexp.result import RunResult, Status

    return RunResult(status=Status.FINISHED, params={"loader.num_workers": workers},
                     metrics={"throughput_samples_per_s": rate})


def test_a_race_puts_out_the_slower_and_picks_the_cheapest_that_cannot_be_told_from_the_leader():
    """Three settings side by side: 1 worker is shown slower and is out after the first pass; 2 and 3 workers cannot
    be told apart within the tolerance, so 2 (cheaper) is the pick, its comparison marked as such."""
    from loaderexp.track.confirm import Race

    race = Race([_run(3, 1000), _run(2, 990), _run(1, 600)], TOLERANCE)
    race.add([[1000, 1010, 990], [995, 1005, 992], [600, 610, 590]])
    assert race.alive == [0, 1] and race.out_after == {2: 3} and race.leader == 0
    assert race.pick == 1 and not race.undecided()
    comparisons = {c.rival["loader.num_workers"]: c for c in race.comparisons()}
    assert comparisons[1].why == "out after 3 rounds" and comparisons[1].difference.verdict(TOLERANCE) is Verdict.SLOWER
    assert comparisons[2].accepted and comparisons[2].difference.verdict(TOLERANCE) is Verdict.SAME


def test_a_race_whose_cheapest_side_spans_the_tolerance_is_undecided_until_more_rounds_tell():
    from loaderexp.track.confirm import Race

    race = Race([_run(3, 1000), _run(2, 900)], TOLERANCE)
    race.add([[1000, 1000, 1000], [1000, 850, 950]])  # -6.7%, an interval from about -25% to +12%
    assert race.pick == 1 and race.undecided()
    race.add([[1000, 1000, 1000, 1000], [800, 820, 810, 805]])  # shown slower: out, the leader is the pick
    assert race.alive == [0] and race.pick == 0 and not race.undecided()


def test_a_side_put_out_keeps_the_leader_it_was_read_against_when_the_lead_changes():
    from loaderexp.track.confirm import Race

    race = Race([_run(3, 1000), _run(2, 990), _run(1, 600)], TOLERANCE)
    race.add([[1000, 1010, 1005, 1000], [990, 1000, 985, 995], [600, 610, 590, 605]])  # 3 leads; 1 is out
    race.add([[900, 910, 905, 900], [1000, 1005, 995, 1000]])  # then 2 leads
    comparisons = {c.rival["loader.num_workers"]: c for c in race.comparisons()}
    assert race.leader == 1 and comparisons[1].base == {"loader.num_workers": 3}
    assert comparisons[3].base == {"loader.num_workers": 2}


def test_a_race_is_settled_once_every_side_still_in_is_within_the_tolerance_of_the_leader():
    """After a pass, 1 worker is out and 2 reads within the tolerance of 3: nothing more rounds could change, so the
    race ends before its budget; a side whose interval still reaches past the tolerance keeps it going."""
    from loaderexp.track.confirm import Race

    race = Race([_run(3, 1000), _run(2, 995), _run(1, 500)], TOLERANCE)
    race.add([[1000, 1000], [998, 996], [500, 505]])
    assert race.alive == [0, 1] and race.settled() and race.pick == 1
    wide = Race([_run(3, 1000), _run(2, 950)], TOLERANCE)
    wide.add([[1000, 1000], [990, 930]])
    assert not wide.settled()


def test_a_race_ends_once_no_side_still_in_can_put_the_pick_out():
    """The pick leads and the rival with more workers reads 6% slower, its interval reaching past the tolerance on
    one side only: it cannot be shown faster than the pick by the tolerance, and it is not cheaper, so the race
    ends (not settled: the rival is not shown within the tolerance); a rival that might still beat the pick by
    the tolerance keeps it going."""
    from loaderexp.track.confirm import Race

    race = Race([_run(2, 1000), _run(3, 940)], TOLERANCE)
    race.add([[1000, 1000, 1000, 1000], [900, 960, 940, 960]])  # 3 against 2: -6.0%, CI about -10.5% .. -1.5%
    assert race.alive == [0, 1] and race.pick == 0 == race.leader
    assert not race.settled() and race.pick_stands()
    open_race = Race([_run(2, 1000), _run(3, 1000)], TOLERANCE)
    open_race.add([[1000, 1000], [960, 1040]])  # 3 might still be 10% faster
    assert open_race.pick == 0 and not open_race.pick_stands()


def test_a_tie_ends_once_the_rounds_the_budget_holds_could_not_put_the_pick_out():
    """3 workers against 2 on 2 cores, a tie read with 10% noise a round: after 8 rounds the pick's interval is
    about -8% .. +9%, so "cannot tell" yet.  Four more rounds could not put it out even were 3 truly 8% ahead (the
    interval's high end then still inside the tolerance): the race ends there.  Hundreds more could: it goes on.
    A rival 12% ahead keeps it going whatever the rounds left."""
    from loaderexp.track.confirm import Race

    noise = [1.12, 0.90, 1.10, 0.91, 1.11, 0.92, 1.09, 0.90]
    tie = Race([_run(2, 1000), _run(3, 1005)], TOLERANCE)
    tie.add([[1000.0] * 8, [1005.0 * f for f in noise]])  # 3 reads a hair faster: it might still beat the pick
    pick_vs_rival = paired_difference(tie.rates[1], tie.rates[0])
    assert pick_vs_rival.verdict(TOLERANCE) is Verdict.CANNOT_TELL and pick_vs_rival.low < -0.08
    assert tie.pick == 0 and not tie.pick_stands() and not tie.undecided()
    assert tie.out_of_reach(4) and not tie.out_of_reach(400)
    behind = Race([_run(2, 1000), _run(3, 1120)], TOLERANCE)
    behind.add([[1000.0] * 8, [1120.0 * f for f in noise]])
    assert behind.alive == [0, 1] and not behind.out_of_reach(4)


def test_a_tie_ends_once_the_rounds_left_are_unlikely_to_put_the_pick_out_at_the_lead_read_so_far():
    """3 workers read 3% ahead of the pick (2) with 10% noise a round: were 3 truly 9% ahead (the interval's far
    end), 24 more rounds could put the pick out, so the race would go on to its budget; at the 3% read so far they
    are unlikely to (conditional power under 10%): it ends.  Not on the first pass's 4 rounds (a lead read on 0.25 s
    windows is too rough), nor when the lead read is beyond the tolerance (6%, 12%): more rounds are to show it."""
    from loaderexp.track.race_rules import Race

    noise = [1.12, 0.90, 1.10, 0.91, 1.11, 0.92, 1.09, 0.90]

    def race(lead: float, rounds: int) -> Race:
        standing = Race([_run(2, 1000), _run(3, 1000 * (1 + lead))], TOLERANCE)
        standing.add([[1000.0] * rounds, [1000 * (1 + lead) * f for f in noise[:rounds]]])
        assert standing.alive == [0, 1] and standing.pick == 0 and not standing.pick_stands()
        return standing

    tie = race(0.03, 8)
    assert not tie.out_of_reach(24) and tie.futile(24)
    assert tie.stop(elapsed=9.0, pass_s=4.2, racing=2, seconds=15.0) == "futile"
    assert not race(0.03, 4).futile(24)
    assert not race(0.06, 8).futile(24) and not race(0.12, 8).futile(24)
    assert race(0.06, 8).stop(elapsed=9.0, pass_s=4.2, racing=2, seconds=15.0) is None


def test_the_confirmation_says_why_its_race_ended_and_keeps_it_in_its_record(tmp_path):
    """Each way a race ends has its words; the confirmation keeps them in confirmation.json (a record written before
    they existed reads as none) and its text says them beside the race's seconds."""
    import json

    from loaderexp.track.race_rules import ENDED, Race

    one_left = Race([_run(2, 1000), _run(1, 600)], TOLERANCE)
    one_left.add([[1000, 1010, 990, 1000], [600, 610, 590, 605]])
    assert one_left.stop(elapsed=4.0, pass_s=4.0, racing=2, seconds=15.0) == "one left"
    settled = Race([_run(3, 1000), _run(2, 995)], TOLERANCE)
    settled.add([[1000, 1000, 1000, 1000], [998, 996, 997, 995]])
    assert settled.stop(elapsed=4.0, pass_s=4.0, racing=2, seconds=15.0) == "settled"
    assert set(ENDED) >= {"one left", "settled", "pick stands", "budget", "out of reach", "futile", "bound"}

    done = Confirmation([], pick={"loader.num_workers": 2}, seconds=9.6, ended=ENDED["futile"])
    (tmp_path / "confirmation.json").write_text(json.dumps(done.to_dict()))
    assert Confirmation.read(tmp_path).ended == ENDED["futile"]
    older = done.to_dict()
    del older["ended"]
    assert Confirmation.from_dict(older).ended == ""
    shown = Confirmation([Comparison({"loader.num_workers": 3}, {"loader.num_workers": 2}, "raced 8 rounds",
                                     Difference(mean=-0.01, low=-0.12, high=0.10, pairs=8), accepted=True)],
                         pick={"loader.num_workers": 2}, seconds=9.6, ended=ENDED["futile"])
    assert "(interleaved windows on this host, 10 s; it ended when the rounds its budget still held were unlikely" \
        in shown.text(["loader.num_workers"], TOLERANCE)
    shown.whole_epochs = True  # a short epoch's race times whole epochs, and says so (a record before it: windows)
    again = Confirmation.from_dict(json.loads(json.dumps(shown.to_dict())))
    assert "(interleaved whole epochs on this host, each from its start to its end" in again.text(["loader.num_workers"],
                                                                                                 TOLERANCE)
    assert Confirmation.from_dict(older).whole_epochs is False


def _confirmed(monkeypatch, items, true_rate):
    """``confirm_pick`` on ``items`` with every race run on ``true_rate`` (workers -> rate, 1% noise): the sides of
    each race, and the confirmation."""
    from loaderexp.track import confirm

    raced: list[list[int]] = []

    def fake_race(sides, folders, seconds, tolerance):
        raced.append([s.workers for s in sides])
        standing = confirm.Race(sides, tolerance)
        standing.add([[true_rate[s.workers] * f for f in (1.0, 1.01, 0.99, 1.0)] for s in sides])
        return standing

    monkeypatch.setattr(confirm, "race", fake_race)
    monkeypatch.setattr(confirm, "_skipped", lambda results, pick: "")
    return raced, confirm.confirm_pick(items, seconds=15)


def test_when_the_fewest_workers_raced_still_stand_the_race_goes_on_down_to_the_runs_below(monkeypatch, tmp_path):
    """The jobs, read one after another on a drifting host, recommend 7 workers where 2 are as fast: the first race
    (7, the fastest run 9, 6, 5, 4) leaves 4 standing, the fewest raced; so 4 races the runs below it beside that
    race's leader, and 1 worker, truly slower, is out: the pick is 2.  0 workers, never raced, race 2 last."""
    true_rate = {0: 500.0, 1: 600.0, **{w: 1000.0 for w in range(2, 10)}, 7: 1001.0}  # 7 leads: no exact tie
    job_rate = {**true_rate, **{w: 900.0 for w in range(2, 7)}, 9: 1030.0}  # 2..6 read slow in their moment
    items = [(tmp_path / str(w), _run(w, job_rate[w])) for w in range(0, 10)]
    raced, confirmation = _confirmed(monkeypatch, items, true_rate)
    assert raced[0] == [7, 9, 6, 5, 4] and raced[1][0] == 4 and sorted(raced[1][1:]) == [1, 2, 3, 7]
    assert raced[2][0] == 2 and raced[2][-1] == 0 and len(raced) == 3
    assert confirmation.pick == {"loader.num_workers": 2}
    accepted = [c for c in confirmation.comparisons if c.accepted]
    assert [c.rival for c in accepted] == [{"loader.num_workers": 2}]
    out = next(c for c in confirmation.comparisons if c.rival == {"loader.num_workers": 1})
    assert out.difference.verdict(TOLERANCE) is Verdict.SLOWER


def test_the_table_marks_the_pick_the_race_confirmed_not_the_jobs_recommendation(tmp_path):
    """The jobs recommend 2 workers (within the tolerance of 3, the fastest); the race shows 2 slower and confirms
    3: the table's "vs pick" column, like the plot and the export, answers with 3."""
    from loaderexp.report.table import summary_table

    items = [(tmp_path / str(w), _run(w, rate)) for w, rate in {0: 500.0, 1: 900.0, 2: 980.0, 3: 1000.0}.items()]
    rows = {line.split()[0]: line for line in summary_table(items).splitlines() if line[:12].strip().isdigit()}
    assert " pick " in rows["2"] and " pick " not in rows["3"]  # without a race: the jobs' recommendation

    confirmation = Confirmation([], pick={"loader.num_workers": 3}, seconds=8)
    rows = {line.split()[0]: line for line in summary_table(items, confirmation).splitlines()
            if line[:12].strip().isdigit()}
    assert " pick " in rows["3"] and " pick " not in rows["2"]
    assert "-2.0%≈" in rows["2"]  # no verdict of the race on 2: a gap inside the tolerance is no measured difference
    # ... and the jobs' recommendation says it is theirs, the race's pick below deciding
    text = summary_table(items, confirmation)
    assert "Recommendation from the jobs, each measured in turn (the race below decides): num_workers=2" in text
    assert "Recommendation: num_workers=2" not in text
    agreed = summary_table(items, Confirmation([], pick={"loader.num_workers": 2}, seconds=8))
    assert "Recommendation: num_workers=2" in agreed  # the race kept it: one recommendation

    # The race could not tell 2 from 3 side by side: its gap in the jobs' figures is not a measured difference.
    untold = Comparison({"loader.num_workers": 3}, {"loader.num_workers": 2}, "raced 6 rounds",
                        Difference(mean=-0.001, low=-0.18, high=0.18, pairs=6), accepted=False)
    rows = {line.split()[0]: line for line in summary_table(items, Confirmation([untold], pick={"loader.num_workers": 3}))
            .splitlines() if line[:12].strip().isdigit()}
    assert "-2.0%≈" in rows["2"] and "-10.0% " in rows["1"]


def test_a_gap_the_race_showed_side_by_side_is_not_marked_as_inside_the_jobs_spread(tmp_path):
    """2 workers' job reads 3% under the pick (3), inside the jobs' 5% spread: ≈ when the race did not compare
    them.  The race put 2 out against 3 (slower beyond the tolerance, side by side): the cell drops the ≈.  Put out against a leader
    that is not the pick, the race said nothing of its gap to the pick: the jobs' spread still marks it."""
    from loaderexp.report.table import summary_table

    def rows(confirmation):
        items = [(tmp_path / str(w), _run(w, rate)) for w, rate in {2: 970.0, 3: 1000.0, 4: 1010.0}.items()]
        for _, r in items:
            r.metrics["throughput_iqr_rel"] = 0.05
        return {line.split()[0]: line for line in summary_table(items, confirmation).splitlines()
                if line[:12].strip().isdigit()}

    slower = Difference(mean=-0.08, low=-0.12, high=-0.06, pairs=4)
    assert "-3.0%≈" in rows(Confirmation([], pick={"loader.num_workers": 3}))["2"]
    out = Comparison({"loader.num_workers": 3}, {"loader.num_workers": 2}, "out after 4 rounds", slower, False)
    assert "-3.0% " in rows(Confirmation([out], pick={"loader.num_workers": 3}))["2"]
    elsewhere = Comparison({"loader.num_workers": 4}, {"loader.num_workers": 2}, "out after 4 rounds", slower, False)
    assert "-3.0%≈" in rows(Confirmation([elsewhere], pick={"loader.num_workers": 3}))["2"]


def test_a_race_whose_cheapest_side_reads_within_the_tolerance_is_not_extended_to_narrow_its_interval():
    """3 workers on 2 cores vary by ~5% a window: the pick (2) reads 2% under them with an interval of about
    +-10%.  However many rounds narrowed it, a mean within the tolerance never puts the pick out: the race does
    not go on past its budget for it (on a noisy host it ran 44 s of its 45 s bound), and the cheaper stands."""
    from loaderexp.track.confirm import Race

    race = Race([_run(3, 1000), _run(2, 980)], TOLERANCE)
    race.add([[1000, 1060, 950], [940, 1080, 930]])  # -2.1%, an interval from about -12% to +8%
    difference = race.differences[1][1]
    assert difference.verdict(TOLERANCE) is Verdict.CANNOT_TELL and difference.high - difference.low > 2 * TOLERANCE
    assert -TOLERANCE < difference.mean < 0
    assert race.pick == 1 and not race.undecided()


def test_a_sweeps_jobs_stop_at_fewer_windows_only_when_a_race_will_tell_its_close_settings_apart(tmp_path):
    from loaderexp.config.compose import compose, composed_spec
    from loaderexp.runner import JobContext, windows_before_a_race

    def most(overrides: list[str], job: JobContext) -> int:
        return windows_before_a_race(composed_spec(compose(overrides)), job).bench.max_repeats

    in_sweep, alone = JobContext(tmp_path / "0", index=0, total=4), JobContext(tmp_path)
    assert most([], in_sweep) == 3  # raced: bench.raced_max_repeats
    assert most([], alone) == 10  # a single run is not raced
    assert most([], JobContext(tmp_path / "0", index=0, total=1)) == 10  # a sweep of one has no rival
    assert most(["bench.confirm_s=0"], in_sweep) == 10  # no race
    assert most(["bench.raced_max_repeats=null"], in_sweep) == 10
    assert most(["bench.max_repeats=4", "bench.raced_max_repeats=6"], in_sweep) == 4  # never more than max_repeats
    assert most(["bench.raced_max_repeats=1", "bench.min_repeats=2"], in_sweep) == 2  # never fewer than min_repeats
    assert most(["bench.raced_max_repeats=5"], in_sweep) == 5
    fixed = windows_before_a_race(composed_spec(compose(["bench.repeats=7"])), in_sweep).bench
    assert (fixed.repeats, fixed.max_repeats) == (7, 10)  # a fixed count stays fixed


def test_a_pick_put_out_by_a_faster_run_leaves_the_runs_between_them_to_race(monkeypatch, tmp_path):
    """The jobs pick 2 (within the tolerance of 4, the fastest, in their moment); the race puts 2, 1 and 0 out
    against 4.  3 was never raced, and fewer workers stand unless shown slower: it races 4 next, and is as fast."""
    true_rate = {0: 500.0, 1: 600.0, 2: 800.0, 3: 1000.0, 4: 1000.0}
    job_rate = {**true_rate, 2: 970.0, 3: 900.0}
    items = [(tmp_path / str(w), _run(w, job_rate[w])) for w in range(0, 5)]
    raced, confirmation = _confirmed(monkeypatch, items, true_rate)
    assert raced == [[2, 4, 1, 0], [4, 3]]
    assert confirmation.pick == {"loader.num_workers": 3}


def test_runs_below_the_fewest_raced_race_the_pick_even_when_the_fewest_raced_are_out(monkeypatch, tmp_path):
    """A 0..5 grid whose jobs read 0 workers in a slow moment pick 4; the first race (4, the fastest run 5, 3, 2, 1)
    puts 3, 2 and 1 out.  0 workers were never raced, and 1 worker is often slower than 0 (the hand-written loop
    this tool replaces found just that): 0 races 4 next, is as fast, and becomes the pick."""
    true_rate = {0: 1000.0, 1: 600.0, 2: 800.0, 3: 850.0, 4: 1000.0, 5: 1000.0}
    job_rate = {**true_rate, 0: 700.0, 5: 1010.0}
    items = [(tmp_path / str(w), _run(w, job_rate[w])) for w in range(0, 6)]
    raced, confirmation = _confirmed(monkeypatch, items, true_rate)
    assert raced[0] == [4, 5, 3, 2, 1] and raced[1][0] == 4 and raced[1][-1] == 0
    assert confirmation.pick == {"loader.num_workers": 0}


def test_a_pick_that_is_the_fastest_races_the_run_with_the_next_more_workers(monkeypatch, tmp_path):
    """A host that slowed as the grid went on read 3 workers slower than 2 in its moment, and 2 became the pick and
    the fastest run.  3 is raced beside it (no faster run to race): side by side it is faster beyond the tolerance
    and is the pick; then 4, the next up, races it, and is as fast: 3 stands."""
    true_rate = {0: 500.0, 1: 600.0, 2: 800.0, 3: 1000.0, 4: 1000.0}
    job_rate = {**true_rate, 3: 780.0, 4: 760.0}
    items = [(tmp_path / str(w), _run(w, job_rate[w])) for w in range(0, 5)]
    raced, confirmation = _confirmed(monkeypatch, items, true_rate)
    assert raced[0] == [2, 3, 1, 0] and raced[1] == [3, 4]
    assert confirmation.pick == {"loader.num_workers": 3}


def test_a_pick_that_is_the_fastest_stands_when_the_next_more_workers_is_not_faster(monkeypatch, tmp_path):
    """The usual case: 2 workers the fastest run, 3 truly as fast: 3 is raced once, and 2 (fewer) stands."""
    true_rate = {0: 500.0, 1: 600.0, 2: 1000.0, 3: 990.0}
    items = [(tmp_path / str(w), _run(w, true_rate[w])) for w in range(0, 4)]
    raced, confirmation = _confirmed(monkeypatch, items, true_rate)
    assert raced == [[2, 3, 1, 0]]
    assert confirmation.pick == {"loader.num_workers": 2}


def test_a_costlier_rival_that_reads_no_faster_than_the_pick_leaves_it_standing_at_once():
    """3 workers against 2 on 2 cores: a tie, 3-9% apart window to window.  Reading no faster than the pick after a
    pass, 3 cannot put 2 out without later rounds moving its mean past the tolerance: the race ends.  Reading
    faster (inside a wide interval), it races on; so does one read over fewer rounds than a pass."""
    from loaderexp.track.confirm import Race

    noise = [1.09, 0.92, 1.07, 0.90]
    behind = Race([_run(2, 1000), _run(3, 1000)], TOLERANCE)
    behind.add([[1000.0] * 4, [980.0 * f for f in noise]])
    assert behind.pick == 0 and paired_difference(behind.rates[1], behind.rates[0]).low < -TOLERANCE
    assert behind.pick_stands()
    ahead = Race([_run(2, 1000), _run(3, 1000)], TOLERANCE)
    ahead.add([[1000.0] * 4, [1020.0 * f for f in noise]])
    assert not ahead.pick_stands()
    early = Race([_run(2, 1000), _run(3, 1000)], TOLERANCE)
    early.add([[1000.0] * 2, [980.0 * f for f in noise[:2]]])
    assert not early.pick_stands()  # two rounds: too few to read a mean on


def test_a_pick_that_another_knob_cannot_be_told_from_says_that_knob_is_not_a_measured_choice(tmp_path):
    """persistent_workers true and false at 2 workers, one epoch each: 18,024 and 18,494 samples/s. "false" was
    "the fastest run", the table's -2.5% unmarked, as if the sweep had measured that the knob matters."""
    from loaderexp.report import recommend
    from loaderexp.report.table import summary_table

    runs = [_run(2, 18024.0), _run(2, 18494.0), _run(1, 11000.0)]
    for r, persistent in zip(runs, (True, False, False)):
        r.params["loader.persistent_workers"] = persistent
    said = recommend(runs).text
    assert "persistent_workers=false" in said and "(the fastest run)" in said
    assert "cannot tell it from persistent_workers=true (-2.5%)" in said and "not a measured choice" in said
    rows = [line for line in summary_table([(tmp_path / str(i), r) for i, r in enumerate(runs)]).splitlines()
            if line.strip()[:1].isdigit()]
    assert any("-2.5%≈" in row for row in rows) and any("-40.5% " in row for row in rows)
    apart = [_run(2, 16000.0), _run(2, 18494.0)]  # 13.5% apart: a measured difference, said as before
    for r, persistent in zip(apart, (True, False)):
        r.params["loader.persistent_workers"] = persistent
    assert "cannot tell" not in recommend(apart).text


def test_a_race_whose_first_pass_of_whole_epochs_would_outlast_its_bound_is_not_run(monkeypatch, tmp_path):
    """5,000 video clips an epoch at batch 64 (79 batches), 4 minutes an epoch: a race of whole epochs would pass its
    45 s bound forty times over before its first look. The pick stands unraced, and the note says what would race it."""
    def clips(workers: int, rate: float, epoch_s: float):
        run = _run(workers, rate)
        run.params["loader.batch_size"] = 64
        run.metrics["epoch_time_est_s"] = epoch_s
        run.info.dataset_length = 5000
        return run

    items = [(tmp_path / str(w), clips(w, rate, 5000 / rate)) for w, rate in ((8, 20.0), (16, 21.0))]
    raced, confirmation = _confirmed(monkeypatch, items, {8: 20.0, 16: 21.0})
    assert raced == [] and confirmation.pick == {"loader.num_workers": 8, "loader.batch_size": 64}
    assert "would take about 1952 s, past its bound of 3x bench.confirm_s (45 s)" in confirmation.note
    long_epochs = [(p, r) for p, r in items]
    for _, r in long_epochs:
        r.info.dataset_length = 500_000  # 7,813 batches an epoch: windows, not epochs
    raced, _ = _confirmed(monkeypatch, long_epochs, {8: 20.0, 16: 21.0})
    assert raced == [[8, 16]]


def _backend(workers: int, rate: float, backend: str):
    made = _run(workers, rate)
    made.params["backend.name"] = backend
    return made


def test_a_close_setting_of_another_knob_is_raced_beside_the_pick_and_a_tie_keeps_the_pick(monkeypatch, tmp_path):
    """backend=dataloader,nodes_process at 2 workers: the jobs read 13,979 and 12,883 (-7.8%, their spread 14%), and
    only worker counts were raced: "no rival to race".  The close one is raced now; side by side they tie (within
    1%), and the pick stands: a tie follows no median."""
    from loaderexp.track import confirm
    from loaderexp.track.confirm import Race

    pick, other = _backend(2, 13979.0, "dataloader"), _backend(2, 12883.0, "nodes_process")
    pick.metrics["throughput_iqr_rel"] = 0.14
    far = _backend(2, 9000.0, "spdl")
    assert confirm.contenders(pick, [pick, other, far], pick) == [pick, other]
    race = Race([pick, other], TOLERANCE)
    race.add([[1000, 990, 1010, 1000], [1004, 1001, 1006, 1003]])  # the other's median 0.35% higher
    assert race.leader == 1 and race.pick == 0
    kept = race.comparisons()[0]
    assert kept.accepted and kept.kept
    said = Confirmation([kept], pick=pick.params).text(["backend.name"], TOLERANCE)
    assert "cannot differ by more than the tolerance; it stays the pick" in said and "becomes" not in said
    more = _backend(4, 13900.0, "spdl")  # more workers than the pick: it stands unless shown slower
    assert confirm.contenders(pick, [pick, more], pick) == [pick]


def test_a_tie_of_another_knob_the_race_left_out_is_said():
    """A sweep over backends at 1, 2 and 4 workers: the race moved the pick to nodes_process at 2 workers, where
    DataLoader's 12,372 (-0.6%) was never raced; the report said nothing of it beyond a ≈ in the table."""
    from loaderexp.report.confirm import Comparison, Confirmation
    from loaderexp.result.paired import paired_difference

    runs = [_backend(2, 12372.0, "dataloader"), _backend(4, 13108.0, "dataloader"),
            _backend(2, 12453.0, "nodes_process"), _backend(4, 16198.0, "nodes_process")]
    tie = paired_difference([1000, 1010, 990, 1000], [1001, 1012, 992, 1003])
    confirmation = Confirmation([Comparison(runs[3].params, runs[2].params, "raced 4 rounds", tie, True)],
                                pick=runs[2].params, seconds=5.0, ended="no setting still in could put the pick out")
    said = confirmation.unraced_ties(runs[2], runs, ["backend.name", "loader.num_workers"], TOLERANCE)
    assert said.startswith("Not raced, and the jobs (measured one after another) cannot tell from the pick: "
                           "backend=dataloader, num_workers=2 (-0.7%)")
    assert "dataloader, num_workers=4" not in said  # more workers than the pick: it stands unless shown slower
    assert confirmation.unraced_ties(runs[3], runs, ["backend.name"], TOLERANCE) == ""  # nothing close
