"""The search against the full grid on the same space, in one invocation on this machine.

    python benchmarks/search_vs_grid.py                    # num_workers 0..11 x pin_memory x batch 64/128/256
    python benchmarks/search_vs_grid.py --workers 7 --sampler gp

Both are ``python -m loaderexp -m ...`` runs on CIFAR-10 (the generated copy), MLflow included,
each with its own sweep folder and store: the grid with Hydra's basic sweeper over every point,
the search with ``hydra/sweeper=search`` over the same space.  Printed: both recommendations (the
same rule), their throughputs, the wall time of each and the ratio.  Targets: the search's pick
within the grid's noise of the grid's pick, judged on the grid's own measurement of both
configurations; the search in at most a third of the grid's time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.common import REPO  # noqa: E402
from loaderexp.report import recommend  # noqa: E402
from loaderexp.result import NUM_WORKERS, RunResult  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402

KEYS = (NUM_WORKERS, "loader.pin_memory", "loader.batch_size")


def sweep(args: list[str], folder: Path, data_root: str) -> tuple[float, list[RunResult]]:
    done = common.sweep(args, folder / "sweep", env={"LOADEREXP_DATA_ROOT": data_root})
    return done.seconds, done.results


def settings(result: RunResult) -> tuple:
    return tuple(result.params.get(k) for k in KEYS)


def text(result: RunResult) -> str:
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in zip(KEYS, settings(result)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=11, help="num_workers 0..this")
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one search per sampler seed")
    parser.add_argument("--data-root", default=os.environ.get("LOADEREXP_DATA_ROOT", str(REPO / "data")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loaderexp-search-") as tmp:
        grid_dir = Path(tmp) / "grid"
        grid_dir.mkdir()
        grid_s, grid = sweep([f"loader.num_workers=range(0,{args.workers + 1})", "loader.pin_memory=true,false",
                              "loader.batch_size=64,128,256"], grid_dir, args.data_root)
        searches = []
        for seed in args.seeds:
            search_dir = Path(tmp) / f"search{seed}"
            search_dir.mkdir()
            searches.append((seed, *sweep(["hydra/sweeper=search", f"loader.num_workers=int(0,{args.workers})",
                                           "loader.pin_memory=true,false", "loader.batch_size=choice(64,128,256)",
                                           f"hydra.sweeper.sampler={args.sampler}", f"hydra.sweeper.seed={seed}"],
                                          search_dir, args.data_root)))
    grid_rec = recommend(grid)
    by_settings = {settings(r): r for r in grid}
    grid_pick = grid_rec.result
    rate = lambda r: r.metrics[M.THROUGHPUT]  # noqa: E731
    print(f"grid:   {len(grid)} jobs in {grid_s:.1f} s; pick {text(grid_pick)}: {rate(grid_pick):,.0f} samples/s "
          f"(best {text(grid_rec.best)}: {rate(grid_rec.best):,.0f})")
    failed = 0
    for seed, search_s, searched in searches:
        search_pick = recommend(searched).result
        as_grid_saw = by_settings[settings(search_pick)]  # the grid's own measurement of the search's pick
        gap = 1 - rate(as_grid_saw) / rate(grid_pick)
        noise = max(grid_pick.metrics.get(M.THROUGHPUT_IQR, 0), as_grid_saw.metrics.get(M.THROUGHPUT_IQR, 0), 0.05)
        pruned = sum(1 for r in searched if r.metrics.get(M.PRUNED))
        fast, close = search_s <= grid_s / 3, gap <= noise
        failed += not (fast and close)
        print(f"search (seed {seed}): {len(searched)} trials ({pruned} pruned) in {search_s:.1f} s = "
              f"{search_s / grid_s:.2f} of the grid's time (target <= 0.33: {'PASS' if fast else 'FAIL'}); pick "
              f"{text(search_pick)}: {rate(search_pick):,.0f} samples/s as the search measured it, "
              f"{rate(as_grid_saw):,.0f} as the grid did, {100 * gap:+.1f}% from the grid's pick against its noise "
              f"{100 * noise:.1f}% (the two runs' IQR, at least the 5% tolerance): {'PASS' if close else 'FAIL'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
