"""The ceiling model against measurements: the predicted curve and ceiling beside the measured rates.

    python benchmarks/ceiling.py                    # sleep and burn at 0..4x the cores, CIFAR-10 and JPEGs at 0..4
    python benchmarks/ceiling.py --only sleep burn  # the checked ones only
    python benchmarks/ceiling.py --checks           # the ceiling as a bound, stage costs, what-ifs, memory forecast
                                                    # (benchmarks/ceiling_checks.py; about 25 minutes)
    python benchmarks/ceiling.py --checks --back-to-back  # the two identical sweeps one after the other
    python benchmarks/ceiling.py --checks cpu_op tensor_op --parts what_if  # one part, on two pipelines

Each dataset is swept as a user sweeps it (``python -m loaderexp -m dataset=... loader.num_workers=...``,
``bench.confirm_s=0``); every run records the model's prediction for its own setting
(``predicted_samples_per_s``, from the sweep's one profiling pass) beside what it measured.

- ``dataset=sleep`` (2 ms a sample, no CPU): the true curve is workers x 500 samples/s, whatever the cores;
- ``dataset=burn`` (1 ms of CPU a sample): the curve rises to about the usable cores x 1,000 samples/s.

Target on those two: the prediction within 10% of the measured rate at every worker count from 0 to 4x the
cores, and the stages adding up to within 10% of a single-process loop's CPU per sample.  CIFAR-10 and the
generated JPEG folder are printed, not held to a target (their costs are what this host makes of them); so
is the profiling pass's cost against its sweep's time (target: under 10% of a default sweep's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ceiling_checks import CASES as CHECKED, PARTS, run_checks  # noqa: E402
from benchmarks.common import sweep  # noqa: E402
from loaderexp.result import NUM_WORKERS  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402

CORES = len(os.sched_getaffinity(0))
CASES = {
    "sleep": (["dataset=sleep", "dataset.sleep_ms=2", "loader.batch_size=16"], list(range(0, 4 * CORES + 1)), True),
    "burn": (["dataset=burn", "dataset.burn_ms=1", "loader.batch_size=16"], list(range(0, 4 * CORES + 1)), True),
    "cifar10": (["dataset=cifar10"], list(range(0, 5)), False),
    "imagefolder": (["dataset=imagefolder"], list(range(0, 5)), False),
}


def measure(name: str, folder: Path) -> tuple[list, float]:
    overrides, workers, _ = CASES[name]
    done = sweep([*overrides, f"loader.num_workers={','.join(map(str, workers))}", "bench.confirm_s=0"], folder,
                 env={"LOADEREXP_DATA_ROOT": os.environ.get("LOADEREXP_DATA_ROOT", str(Path.cwd() / "data"))})
    return sorted(done.results, key=lambda r: r.params[NUM_WORKERS]), done.seconds


def show(name: str, results: list, seconds: float, checked: bool) -> int:
    profile = next(r.profile for r in results if r.profile)
    cpu = sum(s.cpu_s for s in profile.stages)
    adds_up = cpu / profile.single_cpu_s - 1
    print(f"{name}: {profile.split}")
    print(f"  stages' CPU {1000 * cpu:.4f} ms/sample, a 0-worker loop's {1000 * profile.single_cpu_s:.4f}: "
          f"{100 * adds_up:+.1f}%; profiling took {profile.seconds:.2f} s of the sweep's {seconds:.1f} s "
          f"({100 * profile.seconds / seconds:.1f}%)")
    print(f"  {'workers':>7}  {'measured':>10}  {'predicted':>10}  {'ratio':>6}  ceiling")
    failed = checked and abs(adds_up) > 0.10
    for r in results:
        measured, predicted = r.metrics[M.THROUGHPUT], r.metrics[M.PREDICTED]
        ratio = predicted / measured
        failed += checked and abs(ratio - 1) > 0.10
        print(f"  {r.params[NUM_WORKERS]:>7}  {measured:>10,.0f}  {predicted:>10,.0f}  {ratio:>6.3f}  "
              f"{r.metrics[M.CEILING]:,.0f} ({r.info.ceiling_binding})")
    best = max(r.metrics[M.THROUGHPUT] for r in results)
    print(f"  highest measured {best:,.0f} against the ceiling {results[-1].metrics[M.CEILING]:,.0f}: "
          f"{best / results[-1].metrics[M.CEILING]:.2f}")
    if checked:
        print(f"  target (prediction within 10% everywhere, stages within 10%): {'met' if not failed else 'NOT met'}")
    print()
    return int(bool(failed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--checks", nargs="*", choices=sorted(CHECKED), default=None,
                        help="the bound, stage, what-if and memory checks, on these pipelines (none named: all)")
    parser.add_argument("--back-to-back", action="store_true",
                        help="with --checks: the two identical sweeps one after the other (default: interleaved)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="with --checks: which checks (default: all)")
    args = parser.parse_args()
    print(f"host: {CORES} CPUs\n")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="loaderexp-ceiling-") as tmp:
        if args.checks is None:
            for name in args.only:
                results, seconds = measure(name, Path(tmp) / name)
                failed += show(name, results, seconds, CASES[name][2])
                (Path(tmp) / f"{name}.json").write_text(json.dumps([r.metrics for r in results]))
        else:
            failed += run_checks(Path(tmp), args.checks or list(CHECKED), not args.back_to_back, tuple(args.parts))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
