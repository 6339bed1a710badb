"""Measure until precise: a loaderexp sweep against the naive whole-epoch loop it replaces, side by side.

    python benchmarks/adaptive_vs_epochs.py            # num_workers 0..3 on CIFAR-10, 2 rounds (about 3 minutes)
    python benchmarks/adaptive_vs_epochs.py --rounds 3 --workers 0 1 2 3 4

The naive loop is what people write by hand: for each num_workers, a DataLoader over the same CIFAR-10
data set and transform, one whole epoch timed with ``for batch in loader: pass``, run as its own
script (imports included, as a user runs it). The sweep is ``python -m loaderexp -m
loader.num_workers=...`` with the default bench settings (adaptive repeats), MLflow included, less the
side-by-side confirmation of its pick (``bench.confirm_s=0``: a step after the answer, which
benchmarks/predict_vs_grid.py leaves out too). The
two alternate, round by round, so both see the same machine. Target: the sweep takes at most half
the naive loop's time and recommends the same num_workers (both judged by loaderexp's rule:
the fewest workers within 5%, or within the measured spread, of the best).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import REPO, sweep  # noqa: E402
from loaderexp.report import recommend  # noqa: E402
from loaderexp.result import NUM_WORKERS, RunResult  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402

NAIVE = r"""
import json, sys, time
import torch
from torch.utils.data import DataLoader
from loaderexp.data.cifar import cifar10
from loaderexp.data.transforms import cifar_train

torch.manual_seed(0)
dataset = cifar10(root=sys.argv[1], transform=cifar_train())
rates = {}
for workers in json.loads(sys.argv[2]):
    loader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=workers)
    start = time.perf_counter()
    for batch in loader:
        pass
    rates[workers] = len(dataset) / (time.perf_counter() - start)
print(json.dumps(rates))
"""


def run_naive(data_root: Path, workers: list[int]) -> tuple[float, dict[int, float]]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", NAIVE, str(data_root), json.dumps(workers)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    rates = {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    return elapsed, rates


def run_sweep(data_root: Path, workers: list[int], folder: Path) -> tuple[float, list[RunResult]]:
    done = sweep([f"loader.num_workers={','.join(map(str, workers))}", "bench.confirm_s=0"], folder / "sweep",
                 env={"LOADEREXP_DATA_ROOT": str(data_root)})
    return done.seconds, done.results


def naive_pick(rates: dict[int, float]) -> int:
    results = [RunResult("FINISHED", {NUM_WORKERS: w}, {M.THROUGHPUT: r}, info={"delivery_ok": True})
               for w, r in rates.items()]
    return recommend(results).result.workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    data_root = Path(os.environ.get("LOADEREXP_DATA_ROOT", REPO / "data")).resolve()
    subprocess.run([sys.executable, "-c", "import sys; from loaderexp.data.cifar import cifar10; cifar10(root=sys.argv[1])",
                    str(data_root)], cwd=REPO, check=True)  # generated once, outside both timings
    print(f"host: {len(os.sched_getaffinity(0))} CPUs; CIFAR-10 (generated copy) in {data_root}; "
          f"num_workers {args.workers}; {args.rounds} rounds, sweep and naive loop alternating\n")
    ratios, same = [], []
    for round_index in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            order = ("sweep", "naive") if round_index % 2 == 0 else ("naive", "sweep")
            for which in order:
                if which == "sweep":
                    sweep_s, results = run_sweep(data_root, args.workers, Path(tmp))
                else:
                    naive_s, rates = run_naive(data_root, args.workers)
        rec = recommend(results)
        sweep_pick = rec.result.workers
        pick = naive_pick(rates)
        ratios.append(sweep_s / naive_s)
        same.append(sweep_pick == pick)
        ordered = sorted(results, key=lambda r: r.workers)
        print(f"round {round_index + 1}: sweep {sweep_s:.1f} s, naive whole-epoch loop {naive_s:.1f} s: "
              f"{100 * sweep_s / naive_s:.0f}% of its time")
        print("   workers  sweep samples/s  ±IQR%  repeats  batches  rounds   naive samples/s")
        for r in ordered:
            w, m = r.workers, r.metrics
            print(f"   {w:7d}  {m[M.THROUGHPUT]:15,.0f}  {100 * m[M.THROUGHPUT_IQR]:5.1f}  "
                  f"{m[M.REPEATS]:7.0f}  {m[M.BATCHES]:7.0f}  {m.get(M.ROUNDS, float('nan')):6.0f}"
                  f"   {rates[w]:15,.0f}")
        print(f"   recommended num_workers: sweep {sweep_pick}, naive loop {pick} (the fastest epoch: "
              f"{max(rates, key=rates.get)})\n")
    median = statistics.median(ratios)
    met = median <= 0.5 and all(same)
    print(f"sweep time / naive loop time: median {100 * median:.0f}% (rounds: {', '.join(f'{100 * r:.0f}%' for r in ratios)}); "
          f"same pick in {sum(same)} of {len(same)} rounds: target (at most 50%, same pick) "
          f"{'met' if met else 'NOT met'}")
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
