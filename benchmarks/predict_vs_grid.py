"""Answer sooner with the model: a num_workers grid cut short (``bench.predict=true``) against the full grid
and against the naive loop it replaces, side by side on CIFAR-10.

    python benchmarks/predict_vs_grid.py                      # grids 0..3 and 0..16, 2 rounds each
    python benchmarks/predict_vs_grid.py --grids 0-16 --rounds 1
    python benchmarks/predict_vs_grid.py --grids 0-3 --rounds 3 --keep /tmp/pvg   # the sweep folders kept

Each round runs, in an order that alternates round by round: the naive loop (one whole epoch per setting,
``for batch in loader: pass``, its own script, imports included: benchmarks/adaptive_vs_epochs.py's), the
full grid (``python -m loaderexp -m loader.num_workers=...``) and the predicted grid (the same with
``bench.predict=true``: the profile, the knee and its neighbours measured, the rest predicted).  Both sweeps
end as a user's does, with the race of the pick against its rivals side by side (``bench.confirm_s``, the
default): the race is how the sweep answers, so its time counts.  Time is the sweep's wall time as a user
sees it, a fresh MLflow store's creation included.  Targets: the full grid 0..3 in at most half the naive
loop's time, the predicted grid 0..16 in at most a fifth, each with the naive loop's pick (by loaderexp's
rule: the fewest workers that cannot be told from the best).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.adaptive_vs_epochs import naive_pick, run_naive  # noqa: E402
from benchmarks.common import REPO, sweep  # noqa: E402
from loaderexp.report import load_results  # noqa: E402
from loaderexp.report.confirm import Confirmation  # noqa: E402
from loaderexp.report.export import recommended  # noqa: E402
from loaderexp.result import Status  # noqa: E402


TARGETS = {"0-3": ("grid", 0.5), "0-16": ("predict", 0.2)}  # grid: (which sweep, its most time against naive)


def grid_sweep(data_root: Path, workers: list[int], folder: Path, predict: bool) -> dict:
    """The sweep's seconds, its pick, the jobs it measured, and where its time went: the jobs' measuring
    processes (profile and windows) and the race."""
    done = sweep([f"loader.num_workers={','.join(map(str, workers))}",
                  f"bench.predict={'true' if predict else 'false'}"], folder,
                 env={"LOADEREXP_DATA_ROOT": str(data_root)})
    measured = [r for r in done.results if r.status is not Status.PREDICTED]
    confirmation = Confirmation.read(folder)
    picks = recommended(load_results(folder), confirmation)  # the race's pick, as the export has it
    jobs_s = sum(r.info.measured_until - r.info.measured_from for r in measured
                 if r.info.measured_from is not None and r.info.measured_until is not None)
    return {"s": done.seconds, "pick": picks[0].result.workers, "measured": len(measured), "jobs_s": jobs_s,
            "race_s": confirmation.seconds if confirmation is not None else 0.0}


def parse_grid(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high) + 1))


def one_round(data_root: Path, workers: list[int], index: int, keep: Optional[Path] = None) -> dict:
    figures: dict = {}
    order = ["naive", "grid", "predict"]
    order = order[index % 3:] + order[: index % 3]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = scratch if keep is None else keep / f"{'-'.join(map(str, (workers[0], workers[-1])))}-round{index + 1}"
        for which in order:
            if which == "naive":
                figures["naive_s"], rates = run_naive(data_root, workers)
                figures["naive_pick"] = naive_pick(rates)
            else:
                done = grid_sweep(data_root, workers, Path(tmp) / which, which == "predict")
                figures.update({f"{which}_{key}": value for key, value in done.items()})
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grids", nargs="+", default=["0-3", "0-16"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep each sweep's folder under this one (to see why a round was slow)")
    args = parser.parse_args()
    if args.keep is not None and args.keep.is_dir() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: already holds sweeps (a sweep refuses a folder that holds one); "
                     "choose an empty or new folder")
    data_root = Path(os.environ.get("LOADEREXP_DATA_ROOT", REPO / "data")).resolve()
    subprocess.run([sys.executable, "-c", "import sys; from loaderexp.data.cifar import cifar10; cifar10(root=sys.argv[1])",
                    str(data_root)], cwd=REPO, check=True)  # generated once, outside every timing
    print(f"host: {len(os.sched_getaffinity(0))} CPUs; CIFAR-10 (generated copy); {args.rounds} rounds per grid\n")
    failed = 0
    for text in args.grids:
        workers = parse_grid(text)
        rounds = [one_round(data_root, workers, i, args.keep) for i in range(args.rounds)]
        print(f"num_workers {text} ({len(workers)} settings):")
        print("  round   naive s  grid s  predicted s  predicted/naive  grid/naive  measured jobs  "
              "picks naive/grid/predicted  jobs s grid/predicted  race s grid/predicted")
        for i, f in enumerate(rounds, 1):
            print(f"  {i:5d}  {f['naive_s']:8.1f}  {f['grid_s']:6.1f}  {f['predict_s']:11.1f}  "
                  f"{f['predict_s'] / f['naive_s']:15.2f}  {f['grid_s'] / f['naive_s']:10.2f}  "
                  f"{f['predict_measured']:6d} of {len(workers):<4d}  "
                  f"{f['naive_pick']:>10}/{f['grid_pick']}/{f['predict_pick']:<13}  "
                  f"{f['grid_jobs_s']:10.1f}/{f['predict_jobs_s']:<10.1f}  {f['grid_race_s']:8.1f}/{f['predict_race_s']:.1f}")
        which, most = TARGETS.get(text, ("predict", None))
        ratio = statistics.median(f[f"{which}_s"] / f["naive_s"] for f in rounds)
        same = sum(f[f"{which}_pick"] == f["naive_pick"] for f in rounds)
        verdict = "" if most is None else \
            f": target (at most {most:.2f}, same pick) {'met' if ratio <= most and same == len(rounds) else 'NOT met'}"
        failed += bool(verdict) and "NOT" in verdict
        print(f"  {'predicted grid' if which == 'predict' else 'full grid'} / naive loop: median {ratio:.2f}; same "
              f"pick as the naive loop in {same} of {len(rounds)} rounds{verdict}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
