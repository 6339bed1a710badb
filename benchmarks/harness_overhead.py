"""Does loaderexp distort what it measures, and is a short sweep as good as timing whole epochs?

    python benchmarks/harness_overhead.py            # about 16 minutes on 2 cores
    python benchmarks/harness_overhead.py --quick    # a smaller version, for a smoke test (about 2 minutes)

Prints three comparisons, each measured side by side in one run:

1. harness cost: loaderexp's measurement (the delivery check's instrumentation, the resource
   sampling thread, the timed loop) against a bare ``for batch in loader: pass`` on the same dataset
   and DataLoader settings, on the synthetic dataset where per-batch work is smallest and overhead
   shows most: at the default settings (batch_size 128, no workers), with 2 workers, and at
   batch_size 64.  Without workers the two loops take turns batch by batch, so that both see the same
   machine (a shared VM's speed moves by tens of percent within seconds); with workers, whole
   loops alternate round by round.  Each setting runs in several fresh processes (a process's
   memory layout moves the ratio by a percent or more), with a control: a bare loop against a bare
   loop.  The median of the paired ratios and its 95% confidence interval across processes and
   rounds.  Target: under 2% of throughput.
2. per-job overhead of a real multirun (Hydra compose, output folders, MLflow logging, the measuring
   process) beyond the loading time itself: the marginal cost of one more job.  Target: under 1 s.
3. fixed budget vs whole epochs: a num_workers 0..4 sweep on the default CIFAR-10 data with a
   fixed budget (twice), against whole epochs timed three times per setting; the budgeted sweeps
   should recommend the same num_workers as the epochs, in a fraction of the time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import REPO, sweep  # noqa: E402
from loaderexp.config import Config, compose, to_spec  # noqa: E402
from loaderexp.data.build import build_dataset, build_loader, build_sampler, build_transform  # noqa: E402
from loaderexp.execute.holder import heartbeat  # noqa: E402
from loaderexp.execute.job import BuiltDataset, measure_job, measured_loader, seed_everything  # noqa: E402
from loaderexp.harness.records import spread  # noqa: E402
from loaderexp.report import recommend  # noqa: E402
from loaderexp.result import NUM_WORKERS, RunResult  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402
from loaderexp.result.figures import figures  # noqa: E402


def spec_of(overrides: list[str]) -> Config:
    return to_spec(compose(overrides))


class Clocks:
    """Wall time at the first and the last measured batch: both loops' rates over the same window."""

    def __init__(self, batches: int):
        self.batches = batches
        self.start = self.end = 0.0

    def __call__(self, done: int, total=None) -> None:
        if done == 1:
            self.start = time.perf_counter()
        if done == self.batches:
            self.end = time.perf_counter()

    def rate(self, batch_size: int) -> float:
        return (self.batches - 1) * batch_size / (self.end - self.start)


class Passenger:
    """A bare ``for batch in loader: pass`` that another loop, the driver, advances one batch at a time.

    The driver (loaderexp's measurement, or a bare loop) calls it after each of its measured
    batches: the passenger fetches one batch of its own, timed, and the driver's batch is the
    time between two calls.  Paired batch by batch, both loops see the same machine: on a shared
    VM its speed moves by tens of percent from one second to the next, which rounds of whole
    loops only average out over many processes.  Each loop keeps its batch until its next one is
    made, as a bare loop does: then each fetch finds the same batches alive (its own and the
    other loop's), and neither writes into memory the other has just warmed.  (Freeing the
    passenger's batch at once, the control read +1% to +4% at batch_size 128.)
    """

    def __init__(self, loader, warmup: int):
        self.loader = loader
        self.iterator = iter(loader)
        for _ in range(warmup):
            self._fetch()
        self.batch: Any = None
        self.own = self.driver = 0.0
        self.left: float | None = None  # when the previous call returned

    def _fetch(self) -> Any:
        try:
            return next(self.iterator)
        except StopIteration:  # the next epoch, as a bare loop's `for` would start it
            self.iterator = iter(self.loader)
            return next(self.iterator)

    def __call__(self, done: int, total=None) -> None:
        entered = time.perf_counter()
        self.batch = self._fetch()  # the previous batch freed after the next is made, as in a bare loop
        left = time.perf_counter()
        if self.left is not None:  # from the second call: one driver batch and one passenger batch each
            self.driver += entered - self.left
            self.own += left - entered
        self.left = left

    def ratio(self) -> float:
        """The driver's throughput relative to the passenger's."""
        return self.own / self.driver


class _Discard:
    """The heartbeat's pipe, with nobody at the other end."""

    def send(self, message: Any) -> None:
        pass


def bare_loop(loader, warmup: int, batches: int, on_batch: Callable[[int], None]) -> None:
    """``for batch in loader`` for ``warmup`` + ``batches`` batches, calling ``on_batch`` after each measured one."""
    seen = 0
    while True:
        for batch in loader:
            seen += 1
            if seen > warmup:
                on_batch(seen - warmup)
            if seen == warmup + batches:
                return


def median_ci(groups: list[list[float]], confidence: float = 0.95, draws: int = 2000) -> tuple[float, float, float]:
    """Median of the pooled values and a cluster-bootstrap confidence interval for it.

    Each group is one process's rounds.  A process's memory layout (which physical pages its
    batches land on) moves a ratio by a percent or more, the same way for all of its rounds:
    resampling the processes as well as their rounds puts that spread into the interval
    instead of hiding it.
    """
    rng = random.Random(0)
    medians = []
    for _ in range(draws):
        sample: list[float] = []
        for group in rng.choices(groups, k=len(groups)):
            sample += rng.choices(group, k=len(group))
        medians.append(statistics.median(sample))
    medians.sort()
    tail = int(draws * (1 - confidence) / 2)
    return statistics.median([v for g in groups for v in g]), medians[tail], medians[draws - 1 - tail]


def cost_rounds(rounds: int, batches: int, workers: int, batch_size: int) -> dict[str, list[float]]:
    """Section 1's paired throughput ratios in this process, one per round, for each comparison:
    ``total`` (loaderexp against a bare loop over the plain DataLoader), ``instrumented`` (a bare
    loop over the DataLoader as loaderexp builds it for the delivery check: its sampler recorded
    and, with workers, each batch tagged with its indices), ``loop`` (loaderexp against that bare
    loop) and ``control`` (a bare loop against a bare loop: how large a difference the method
    reads when there is none).

    Without workers the loops are paired batch by batch (:class:`Passenger`).  With workers the
    batches are made in the background, and two loops taking turns would run both pipelines in
    lockstep (the slower one's wait absorbing the difference), so loops run whole, in rounds,
    alternating their order.
    """
    cfg = spec_of(["dataset=synthetic", "tracking=none", f"loader.num_workers={workers}",
                   f"loader.batch_size={batch_size}", "bench.warmup_batches=10", f"bench.batches={batches}",
                   "bench.repeats=1"])
    dataset = build_dataset(cfg.dataset, build_transform(cfg.transform))
    seed, warmup = cfg.bench.seed, cfg.bench.warmup_batches  # bare loops skip as many as loaderexp

    def plain() -> Any:
        return build_loader(dataset, build_sampler(cfg.sampler, dataset), cfg.loader)

    def instrumented() -> Any:
        return measured_loader(cfg, dataset)[0]

    def measure(on_batch: Callable[[int], None], loader: Callable[[], Any] | None) -> None:
        """One loop with ``on_batch`` after each measured batch: loaderexp's, or a bare one over ``loader()``.
        loaderexp runs as in a real job: its child's heartbeat (a store to shared memory) in the loop."""
        if loader is None:
            beat = heartbeat(multiprocessing.RawValue("q", 0), _Discard())

            def production(done: int, total: Any = None) -> None:
                beat(done, total)
                on_batch(done)

            measure_job(cfg, on_batch=production, built=BuiltDataset(dataset))  # seeds itself
        else:
            seed_everything(seed)  # as measure_job does: the same sample order
            bare_loop(loader(), warmup, batches, on_batch)

    drivers = {"bare": plain, "instrumented": instrumented, "harness": None}

    def batch_by_batch(order: list[str]) -> dict[str, float]:
        """Each driver against a bare passenger of its own; the bare driver's ratio is the control."""
        paired = {}
        for name in order:
            seed_everything(seed + 1)  # another sample order: no rows shared in cache with the driver's
            passenger = Passenger(plain(), warmup)
            measure(passenger, drivers[name])
            paired[name] = passenger.ratio()
        return paired

    def whole_loops(order: list[str]) -> dict[str, float]:
        """Each loop's rate, as a ratio to the first bare loop's; a second bare loop is the control."""
        rates = {}
        for name in order:
            clocks = Clocks(batches)
            measure(clocks, drivers[name.removesuffix("_again")])
            rates[name] = clocks.rate(batch_size)
        return {"harness": rates["harness"] / rates["bare"], "instrumented": rates["instrumented"] / rates["bare"],
                "bare": rates["bare_again"] / rates["bare"]}

    run_round, order = (batch_by_batch, list(drivers)) if workers == 0 else (whole_loops, [*drivers, "bare_again"])
    ratios: dict[str, list[float]] = {"total": [], "instrumented": [], "loop": [], "control": []}
    for i in range(rounds):
        # Alternating the order: a drift of the machine, or a trace one loop leaves, hits all alike.
        paired = run_round(order if i % 2 else order[::-1])
        ratios["total"].append(paired["harness"])
        ratios["instrumented"].append(paired["instrumented"])
        ratios["loop"].append(paired["harness"] / paired["instrumented"])
        ratios["control"].append(paired["bare"])
    return ratios


def harness_cost(processes: int, rounds: int, batches: int, workers: int, batch_size: int) -> dict[str, Any]:
    """:func:`cost_rounds` in ``processes`` fresh processes (as each job of a sweep is measured in
    one), pooled: the median of each comparison's ratios with its 95% confidence interval."""
    runs = []
    for _ in range(processes):
        args = [sys.executable, __file__, "--rounds-in-process", f"{rounds},{batches},{workers},{batch_size}"]
        done = subprocess.run(args, check=True, capture_output=True, text=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    pooled: dict[str, Any] = {name: median_ci([run[name] for run in runs]) for name in runs[0]}
    pooled["per_process"] = [statistics.median(run["total"]) for run in runs]
    return pooled


def sweep_wall(jobs: int, store: str, folder: Path) -> tuple[float, list[RunResult]]:
    """Wall time of a real multirun of ``jobs`` small jobs (distinct seeds), and their results."""
    seeds = ",".join(str(i) for i in range(jobs))
    done = sweep(["dataset=synthetic", "dataset.num_samples=2048", "loader.batch_size=64", "bench=quick",
                  f"bench.seed={seeds}", "tracking.experiment=overhead"], folder, store=store)
    assert len(done.results) == jobs, f"{len(done.results)} of {jobs} jobs recorded"
    return done.seconds, done.results


def per_job_overhead(jobs: int, pairs: int) -> list[tuple[float, float]]:
    """Marginal wall time of one more job, from ``pairs`` interleaved (1 job, ``jobs`` jobs) multiruns.

    Each multirun is a fresh process (Python, torch, Hydra and MLflow start-up), paid once by
    both sides of a pair and cancelled by the difference; what is left is per job.
    """
    marginals = []
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/mlflow.db"
        sweep_wall(1, store, Path(tmp) / "warm")  # creates the store: a one-off cost, not per job

        def loading(results):
            return sum(r.metrics[M.SECONDS] + r.metrics[M.WARMUP] for r in results)

        for pair in range(pairs):
            one_wall, one = sweep_wall(1, store, Path(tmp) / f"one{pair}")
            many_wall, many = sweep_wall(jobs, store, Path(tmp) / f"many{pair}")
            marginal = (many_wall - one_wall) / (jobs - 1)
            marginals.append((marginal, marginal - (loading(many) - loading(one)) / (jobs - 1)))
    return sorted(marginals)


def sweep_workers(workers: list[int], overrides: list[str]) -> tuple[list[RunResult], float]:
    """One num_workers sweep through ``measure_job`` (what each job of a multirun runs), and its wall time."""
    results, start = [], time.perf_counter()
    for n in workers:
        metrics = figures(measure_job(spec_of(["tracking=none", f"loader.num_workers={n}", *overrides]))).metrics
        results.append(RunResult(status="FINISHED", params={NUM_WORKERS: n}, metrics=metrics))
    return results, time.perf_counter() - start


def budget_vs_epochs(workers: list[int], epoch_rounds: int, data: list[str]) -> None:
    """Two budgeted num_workers sweeps against whole-epoch timing, ``epoch_rounds`` epochs per setting.

    The reference times whole epochs the way a hand-written loop does, a few per setting, in
    rounds across the settings (alternating their order) so that a slow spell of the machine
    hits them all alike; its median per setting decides.  Each budgeted sweep is what the tool
    runs: setting after setting, its default 3 repeats.  Both recommend by the tool's own rule:
    the fewest workers within 5% of the fastest, or within the measured spread (the budgeted
    runs' repeats; the reference's rounds).
    """
    # The budget: 5 warm-up batches, then 3 repeats of 40 batches (about a third of an epoch in all).
    budget = ["bench=default", "bench.warmup_batches=5", "bench.batches=40", "bench.repeats=3"]
    budget_runs = [sweep_workers(workers, [*data, *budget])]
    epoch_runs = []
    for i in range(epoch_rounds):
        # Settings in alternating order, round by round: a machine that slows down over the
        # reference would otherwise always favour the settings it measures first.
        order = workers if i % 2 == 0 else workers[::-1]
        results, wall = sweep_workers(order, [*data, "bench=epochs"])
        epoch_runs.append((sorted(results, key=lambda r: r.workers), wall))
    budget_runs.append(sweep_workers(workers, [*data, *budget]))

    def whole_epochs(index: int, n: int) -> RunResult:
        # The median over the rounds, and their spread: the reference is judged by the same rule
        # as a sweep of bench.repeats whole epochs.
        rounds = spread([r[0][index].metrics[M.THROUGHPUT] for r in epoch_runs])
        return RunResult(status="FINISHED", params={NUM_WORKERS: n},
                         metrics={M.THROUGHPUT: rounds.median, M.THROUGHPUT_IQR: rounds.relative})

    reference = [whole_epochs(i, n) for i, n in enumerate(workers)]
    print(f"\n3. fixed budget vs whole epochs, CIFAR-10 (generated copy{', a subset' if data else ''}), "
          f"num_workers {workers}: budgeted sweep, {epoch_rounds} rounds of one epoch per setting, budgeted sweep")
    epochs_header = "".join(f"  epoch {i + 1}" for i in range(epoch_rounds))
    print(f"   {'workers':>7}  budget 1{epochs_header}  epochs median  budget 2   (samples/s)")
    for row, n in enumerate(workers):
        epochs = "".join(f"  {r[0][row].metrics[M.THROUGHPUT]:>7,.0f}" for r in epoch_runs)
        print(f"   {n:>7}  {budget_runs[0][0][row].metrics[M.THROUGHPUT]:>8,.0f}{epochs}"
              f"  {reference[row].metrics[M.THROUGHPUT]:>13,.0f}"
              f"  {budget_runs[1][0][row].metrics[M.THROUGHPUT]:>8,.0f}")

    def pick(results: list[RunResult]) -> int:
        return recommend(results).result.workers

    budget_picks = [pick(results) for results, _ in budget_runs]
    single_epoch_picks = [pick(results) for results, _ in epoch_runs]
    best = pick(reference)
    budget_s = statistics.median(wall for _, wall in budget_runs)
    epoch_s = statistics.median(wall for _, wall in epoch_runs)
    print(f"   recommended num_workers (the tool's rule): whole epochs, median of {epoch_rounds}: {best};"
          f" each budgeted sweep: {budget_picks}; each single-epoch sweep alone: {single_epoch_picks}")
    verdict = "met" if set(budget_picks) == {best} else "not met"
    print(f"   time: a budgeted sweep {budget_s:.1f} s, one epoch per setting {epoch_s:.1f} s ({100 * budget_s / epoch_s:.0f}%),"
          f" the {epoch_rounds}-epoch reference {epoch_s * epoch_rounds:.1f} s"
          f" ({100 * budget_s / (epoch_s * epoch_rounds):.0f}%): same best num_workers, in a fraction of the time: {verdict}")


# (num_workers, batch_size, what it shows): the default settings, with workers, and half the batch.
COST_SETTINGS = [(0, 128, "the default settings"), (2, 128, "with workers"),
                 (0, 64, "half the batch: twice the per-batch overhead")]


def cost_plan(workers: int, quick: bool) -> tuple[int, int, int]:
    """(processes, rounds per process, samples per loop).  Without workers, loops paired batch by
    batch agree within a process, and processes differ by their memory layout: many short
    processes.  With workers, longer loops (they cross epochs, paying each epoch's start-up)."""
    if quick:
        return 1, 2, 1_600
    return (16, 5, 19_200) if workers == 0 else (6, 10, 64_000)


def print_harness_cost(quick: bool) -> None:
    print("\n1. harness cost on the synthetic dataset (target < 2%): each setting in fresh processes; without workers"
          " loaderexp and a bare loop take turns batch by batch, with workers whole loops alternate round by round;"
          " medians of the paired throughput ratios, 95% CIs across processes and rounds")

    def cost(ratio: tuple[float, float, float]) -> str:
        median, low, high = ratio
        return f"{100 * (1 - median):+.1f}% (95% CI {100 * (1 - high):+.1f}%..{100 * (1 - low):+.1f}%)"

    for workers, batch_size, label in COST_SETTINGS:
        processes, rounds, samples = cost_plan(workers, quick)
        r = harness_cost(processes, rounds, samples // batch_size, workers, batch_size)
        low, high = r["total"][1:]
        verdict = "met" if 1 - low < 0.02 else "not met" if 1 - high > 0.02 else "not shown"
        per_process = ", ".join(f"{100 * (1 - m):+.1f}%" for m in r["per_process"])
        print(f"   num_workers={workers}, batch_size={batch_size} ({label}; {processes} processes x {rounds} rounds of"
              f" {samples:,} samples): loaderexp against a bare loop over the plain DataLoader costs {cost(r['total'])}:"
              f" target {verdict}; per process {per_process}")
        what = "recorded sampler, batches tagged with their indices" if workers else "recorded sampler, nothing tagged"
        print(f"      of which the delivery check's instrumentation ({what}; bare loops over both DataLoaders)"
              f" {cost(r['instrumented'])}, the measurement loop and resource sampling (loaderexp vs a bare loop over the"
              f" same DataLoader) {cost(r['loop'])}; the control, a bare loop against itself, reads {cost(r['control'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and batches (a smoke test)")
    parser.add_argument("--rounds-in-process", metavar="ROUNDS,BATCHES,WORKERS,BATCH_SIZE",
                        help="(internal) run section 1's rounds in this process and print their ratios as JSON")
    args = parser.parse_args()
    os.environ.setdefault("LOADEREXP_DATA_ROOT", str(REPO / "data"))
    if args.rounds_in_process:
        print(json.dumps(cost_rounds(*(int(v) for v in args.rounds_in_process.split(",")))))
        return
    jobs = 3 if args.quick else 9
    print(f"host: {os.cpu_count()} CPUs; torch threads {__import__('torch').get_num_threads()}")
    print_harness_cost(args.quick)
    pairs = 1 if args.quick else 3
    marginals = per_job_overhead(jobs, pairs)
    marginal, overhead = marginals[len(marginals) // 2]
    spread_text = ", ".join(f"{m:.2f}" for m, _ in marginals)
    print(f"\n2. per-job overhead in a real multirun (target < 1 s): one more job costs {marginal:.2f} s of wall time"
          f" (median of {pairs} pairs of 1- and {jobs}-job sweeps: {spread_text} s), of which {overhead:.2f} s is not"
          f" loading (compose, folders, MLflow logging, the measuring process): target {'met' if max(m for m, _ in marginals) < 1 else 'not met'}")
    # Section 3 sweeps past this machine's cores on purpose: the DataLoader's warning says so for each job.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    if args.quick:  # a tenth of the data set, so the smoke test times whole epochs quickly
        budget_vs_epochs([0, 2], 1, ["sampler=subset", "sampler.fraction=0.1"])
    else:
        budget_vs_epochs([0, 1, 2, 3, 4], 3, [])


if __name__ == "__main__":
    main()
