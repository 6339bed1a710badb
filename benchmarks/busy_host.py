"""The quickstart sweep on a quiet host and beside a one-core burner: both picks, the other processes' load
loaderexp saw, and the confirmation's intervals.

    python benchmarks/busy_host.py [--rounds 1] [EXTRA override ...]

A burner is ``python -c 'while True: pass'``: about one core of another job.  What is expected: beside it the
sweep records others' CPU near 1 core (near 0 without), says the host was busy, and no verdict in the
confirmation claims more than its interval shows; the host's pace (a fixed piece of CPU work's thread CPU
around each run) does not move with the burner, which the others' figure counts.  The two conditions alternate
(quiet, busy, quiet, ...), so the host's own drift is common to both.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import sweep  # noqa: E402
from loaderexp.report.busy import pace_readings  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402

QUICKSTART = ["+experiment=workers"]


def one(folder: Path, busy: bool, extra: list[str]) -> dict:
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        done = sweep([*QUICKSTART, *extra], folder)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    loads = [r.metrics[M.OTHERS_CPU] for r in done.results if M.OTHERS_CPU in r.metrics]
    paces = [v for r in done.results for v in pace_readings(r)]
    pick = re.search(r"Confirmed pick: (.*)", done.stdout) or re.search(r"Recommendation: ([^:]*):", done.stdout)
    return {"busy": busy, "seconds": done.seconds, "pick": pick.group(1) if pick else "none",
            "others": statistics.fmean(loads) if loads else float("nan"), "others_max": max(loads, default=float("nan")),
            "intervals": re.findall(r"^  .* against .*$", done.stdout, flags=re.MULTILINE),
            "said_busy": "the host was busy" in done.stdout, "said_pace": "the host's pace moved" in done.stdout,
            "pace": f"{min(paces):.2f}-{max(paces):.2f}" if paces else "-"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1, help="quiet/busy pairs, alternated (default 1)")
    parser.add_argument("extra", nargs="*", help="overrides for every sweep")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="loaderexp-busy-") as scratch:
        for i in range(args.rounds):
            for busy in (False, True):
                rows.append(one(Path(scratch) / f"{i}-{'busy' if busy else 'quiet'}" / "sweep", busy, args.extra))
    print(f"{'host':>6}  {'others cores':>12}  {'max':>5}  {'said busy':>9}  {'pace ms':>9}  {'pace moved':>10}  "
          f"{'seconds':>7}  pick")
    for row in rows:
        print(f"{'busy' if row['busy'] else 'quiet':>6}  {row['others']:>12.2f}  {row['others_max']:>5.2f}  "
              f"{'yes' if row['said_busy'] else 'no':>9}  {row['pace']:>9}  {'yes' if row['said_pace'] else 'no':>10}  "
              f"{row['seconds']:>7.1f}  {row['pick']}")
        for line in row["intervals"]:
            print(f"        {line.strip()}")


if __name__ == "__main__":
    main()
