"""The race's stopping rules on synthetic windows whose true rates are known: how long a race takes, and how often
it keeps the cheaper setting, with and without the futility rule (:meth:`loaderexp.track.race_rules.Race.futile`).

    python benchmarks/race_stopping.py                 # 400 races per row
    python benchmarks/race_stopping.py --races 100 --quick

Four sides as on the quickstart's 2-core host: the pick (2 workers), a rival with 3 whose true lead over it is the
row's, and 1 and 0 workers far behind (-45%, -38%).  Each window's rate is its side's true rate times a drift that
every side of the round shares (it cancels in their paired differences) and its own noise: 9% a 0.25 s window,
4.5% a 0.5 s one, as 3 against 2 workers read on this host (``--noise`` scales it).  The race runs as
:func:`loaderexp.track.confirm.race` does (a first pass of 0.25 s windows, then 0.5 s ones, four rounds a pass,
each side's start paid once), its rules the real ones; time is simulated, so the figures are the rules', not this
host's.  The same seed drives both rules: their rows differ only by the rule.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loaderexp.result import TOLERANCE  # noqa: E402
from loaderexp.track import race_rules  # noqa: E402
from loaderexp.track.confirm import FIRST_WINDOW_S, WINDOW_S  # noqa: E402

NOISE = {FIRST_WINDOW_S: 0.09, WINDOW_S: 0.045}
START_S, RESUME_S = 0.3, 0.03  # a side's stream start (workers, warm-up), and taking its banked batches
DRIFT = 0.05  # the host's speed from one round to the next, shared by the round's sides
BUDGET_S = 15.0  # bench.confirm_s's default


def one_race(lead: float, rng: random.Random, futility: bool, noise: float) -> tuple[float, int]:
    """(simulated seconds, the pick's workers) of one race."""
    sides = [SimpleNamespace(workers=w, params={"loader.num_workers": w}, rate=r)
             for w, r in ((2, 1.0), (3, 1.0 + lead), (1, 0.55), (0, 0.62))]
    standing, started, elapsed = race_rules.Race(sides, TOLERANCE), set(), 0.0
    race_rules.FUTILE_AFTER = 2 * race_rules.PASS_ROUNDS if futility else 10 ** 9
    while True:
        window_s = WINDOW_S if any(standing.rates) else FIRST_WINDOW_S
        racing, begun = len(standing.alive), elapsed
        rates: list[list[float]] = [[] for _ in standing.alive]
        for _ in range(race_rules.PASS_ROUNDS):
            shared = 1 + rng.gauss(0, DRIFT)
            for slot, index in enumerate(standing.alive):
                if index not in started:
                    started.add(index)
                    elapsed += START_S
                rates[slot].append(sides[index].rate * shared * (1 + rng.gauss(0, NOISE[window_s] * noise)))
                elapsed += window_s + RESUME_S
        standing.add(rates)
        if standing.stop(elapsed, elapsed - begun, racing, BUDGET_S) is not None:
            return elapsed, sides[standing.pick].workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--races", type=int, default=400)
    parser.add_argument("--noise", type=float, nargs="+", default=[1.0, 1.5])
    parser.add_argument("--quick", action="store_true", help="three leads, one noise level")
    args = parser.parse_args()
    leads = [0.0, 0.05, 0.15] if args.quick else [0.0, 0.03, 0.05, 0.07, 0.10, 0.15, 0.20]
    saved = race_rules.FUTILE_AFTER
    try:
        for noise in args.noise[:1] if args.quick else args.noise:
            print(f"window noise x{noise:g} ({args.races} races a row; tolerance {TOLERANCE:.0%}, "
                  f"budget {BUDGET_S:g} s)")
            print("  3's true lead   without the futility rule: mean / p90 s, 2 kept   with it: mean / p90 s, 2 kept"
                  "   time saved")
            for lead in leads:
                row = []
                for futility in (False, True):
                    rng = random.Random(11)
                    races = [one_race(lead, rng, futility, noise) for _ in range(args.races)]
                    times = sorted(t for t, _ in races)
                    kept = sum(1 for _, w in races if w == 2) / len(races)
                    row.append((statistics.fmean(times), times[int(0.9 * len(times))], kept))
                (m0, p0, k0), (m1, p1, k1) = row
                print(f"  {lead:+14.0%}   {m0:22.1f} / {p0:4.1f}, {k0:4.0%}   {m1:14.1f} / {p1:4.1f}, {k1:4.0%}"
                      f"   {1 - m1 / m0:+9.0%}")
    finally:
        race_rules.FUTILE_AFTER = saved


if __name__ == "__main__":
    main()
