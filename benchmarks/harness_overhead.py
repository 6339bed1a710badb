"""Does loaderexp distort what it measures, and is a short sweep as good as timing whole epochs?

    python benchmarks/harness_overhead.py            # about 4 minutes on 2 cores
    python benchmarks/harness_overhead.py --quick    # a smaller version, for a smoke test

Prints three ratios, each measured side by side in this one run:

1. harness cost: loaderexp's measured loop (index tagging, delivery check, copy/step hooks, resource
   sampling thread) against a bare ``for batch in loader: pass`` on the same dataset and DataLoader
   settings, interleaved round by round, on the synthetic dataset where per-batch work is smallest and
   overhead shows most.  Target: under 2% of throughput.
2. per-job overhead of a real multirun (Hydra compose, output folders, MLflow logging, dataset set-up)
   beyond the loading time itself: the marginal cost of one more job.  Target: under 1 s per job.
3. fixed budget vs whole epochs: a num_workers 0..4 sweep on the default CIFAR-10 data, with the default
   measured budget and with whole epochs; both should pick the same num_workers, the budget in a fraction
   of the time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from loaderexp.config import compose, resolve_auto_transform, to_plain  # noqa: E402
from loaderexp.data.build import build_dataset, build_loader, build_sampler, build_transform  # noqa: E402
from loaderexp.job import measure_job  # noqa: E402
from loaderexp.report import recommend  # noqa: E402
from loaderexp.result import RunResult  # noqa: E402


def plain_config(overrides: list[str]) -> dict:
    return resolve_auto_transform(to_plain(compose(overrides)))


class Clocks:
    """Wall and CPU time at the first and the last measured batch: rates over the same window."""

    def __init__(self, batches: int):
        self.batches = batches
        self.start = self.end = (0.0, 0.0)

    def __call__(self, done: int, total=None) -> None:
        if done == 1:
            self.start = (time.perf_counter(), time.process_time())
        if done == self.batches:
            self.end = (time.perf_counter(), time.process_time())

    def rates(self, batch_size: int) -> tuple[float, float]:
        samples = (self.batches - 1) * batch_size
        return samples / (self.end[0] - self.start[0]), samples / (self.end[1] - self.start[1])


def bare_loop(loader, warmup: int, batches: int) -> Clocks:
    """``for batch in loader`` after ``warmup`` batches: nothing but the loop and the two clocks."""
    clocks, seen = Clocks(batches), 0
    while True:
        for batch in loader:
            seen += 1
            if seen > warmup:
                clocks(seen - warmup)
            if seen == warmup + batches:
                return clocks


def harness_cost(rounds: int, batches: int, workers: int) -> dict[str, float]:
    """Paired, interleaved rounds of a bare loop and loaderexp's measurement on one dataset.

    Wall-clock rates are what a user sees but move with everything else on the machine; with
    num_workers=0 all work is in this process, so its CPU time per sample is a steadier measure.
    """
    batch_size = 64
    cfg = plain_config(["dataset=synthetic", "tracking=none", f"loader.num_workers={workers}",
                        f"loader.batch_size={batch_size}", "bench.warmup_batches=10", f"bench.batches={batches}",
                        "bench.repeats=1"])
    dataset = build_dataset(cfg["dataset"], build_transform(cfg["transform"]))

    def bare() -> tuple[float, float]:
        loader = build_loader(dataset, build_sampler(cfg["sampler"], dataset), cfg["loader"])
        return bare_loop(loader, 10, batches).rates(batch_size)

    def harness() -> tuple[float, float]:
        clocks = Clocks(batches)
        own.append(measure_job(cfg, on_batch=clocks, dataset=dataset).metrics["loop_overhead_fraction"])
        return clocks.rates(batch_size)

    wall, cpu, own = [], [], []
    for i in range(rounds):
        # Paired and interleaved, alternating which goes first: drift on the machine hits both alike.
        if i % 2:
            h = harness()
            b = bare()
        else:
            b = bare()
            h = harness()
        wall.append(h[0] / b[0])
        cpu.append(h[1] / b[1])

    def iqr(values):
        q = statistics.quantiles(values, n=4)
        return q[2] - q[0]

    return {"wall": statistics.median(wall), "wall_iqr": iqr(wall), "cpu": statistics.median(cpu), "cpu_iqr": iqr(cpu),
            "own": statistics.median(own)}


def sweep_wall(jobs: int, store: str, folder: Path) -> tuple[float, list[RunResult]]:
    """Wall time of a real multirun of ``jobs`` small jobs (distinct seeds), and their results."""
    seeds = ",".join(str(i) for i in range(jobs))
    args = [sys.executable, "-m", "loaderexp", "-m", "dataset=synthetic", "dataset.num_samples=2048",
            "loader.batch_size=64", "bench=quick", f"bench.seed={seeds}", f"tracking.uri={store}",
            "tracking.experiment=overhead", f"hydra.sweep.dir={folder}"]
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, cwd=folder.parent)
    wall = time.perf_counter() - start
    results = [RunResult.read(p) for p in sorted(folder.glob("*/result.json"))]
    assert len(results) == jobs, f"{len(results)} of {jobs} jobs recorded"
    return wall, results


def per_job_overhead(jobs: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/mlflow.db"
        sweep_wall(1, store, Path(tmp) / "warm")  # creates the store: a one-off cost, not per job
        one_wall, one = sweep_wall(1, store, Path(tmp) / "one")
        many_wall, many = sweep_wall(jobs, store, Path(tmp) / "many")

    def loading(results):
        return sum(r.metrics["measured_seconds"] + r.metrics["warmup_seconds"] for r in results)

    marginal = (many_wall - one_wall) / (jobs - 1)
    marginal_loading = (loading(many) - loading(one)) / (jobs - 1)
    return marginal, marginal - marginal_loading


def budget_vs_epochs(workers: list[int]) -> None:
    rows = {}
    # The budget: 5 warm-up batches, then 3 repeats of 40 batches (about a third of an epoch in all).
    budget = ["bench=default", "bench.warmup_batches=5", "bench.batches=40", "bench.repeats=3"]
    for mode, overrides in (("budget", budget), ("epochs", ["bench=epochs"])):
        results, start = [], time.perf_counter()
        for n in workers:
            cfg = plain_config(["tracking=none", f"loader.num_workers={n}", *overrides])
            metrics = measure_job(cfg).metrics
            results.append(RunResult(status="FINISHED", params={"loader.num_workers": n}, metrics=metrics))
        rows[mode] = (results, time.perf_counter() - start)
    print("\n3. fixed budget vs whole epochs, CIFAR-10 (generated copy), num_workers", workers)
    print(f"   {'workers':>7}  {'budget samples/s':>16}  {'epoch samples/s':>15}  {'epoch time s':>12}")
    for b, e in zip(rows["budget"][0], rows["epochs"][0]):
        print(f"   {b.params['loader.num_workers']:>7}  {b.metrics['throughput_samples_per_s']:>16,.0f}"
              f"  {e.metrics['throughput_samples_per_s']:>15,.0f}  {e.metrics['epoch_time_s']:>12.2f}")
    for mode in ("budget", "epochs"):
        results, seconds = rows[mode]
        fastest = max(results, key=lambda r: r.metrics["throughput_samples_per_s"]).params["loader.num_workers"]
        rec = recommend(results)
        print(f"   {mode:>7}: fastest num_workers={fastest}, recommended (fewest within 5%) "
              f"num_workers={rec.result.params['loader.num_workers']}, sweep took {seconds:.1f} s")
    ratio = rows["budget"][1] / rows["epochs"][1]
    print(f"   ratio: the budgeted sweep took {100 * ratio:.0f}% of the whole-epoch sweep's time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and batches (a smoke test)")
    args = parser.parse_args()
    os.environ.setdefault("LOADEREXP_DATA_ROOT", str(REPO / "data"))
    rounds, batches, jobs = (3, 50, 3) if args.quick else (15, 250, 9)
    print(f"host: {os.cpu_count()} CPUs; torch threads {__import__('torch').get_num_threads()}")
    print("\n1. harness cost on the synthetic dataset (target < 2%), interleaved rounds:", rounds)
    for workers in (0, 2):
        r = harness_cost(rounds, batches, workers)
        line = (f"   num_workers={workers}: throughput ratio loaderexp/bare, wall clock {r['wall']:.3f} (IQR {r['wall_iqr']:.3f})"
                f" -> harness costs {100 * (1 - r['wall']):+.1f}%")
        if workers == 0:  # all work in this process: CPU time per sample is the steadier figure
            line += f"; CPU time {r['cpu']:.3f} (IQR {r['cpu_iqr']:.3f}) -> {100 * (1 - r['cpu']):+.1f}%"
        print(line)
        print(f"      the loop's own time inside the measured window, timed per batch in the same runs: "
              f"{100 * r['own']:.2f}% (an upper bound: it includes freeing the previous batch, as a bare loop does)")
    marginal, overhead = per_job_overhead(jobs)
    print(f"\n2. per-job overhead in a real multirun (target < 1 s): one more job costs {marginal:.2f} s of wall time,"
          f" of which {overhead:.2f} s is not loading (compose, folders, MLflow logging, set-up)")
    budget_vs_epochs([0, 1, 2, 3, 4] if not args.quick else [0, 2])


if __name__ == "__main__":
    main()
