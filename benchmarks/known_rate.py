"""loaderexp's reported rate against a known one, at every worker count up to 8x the CPUs.

    python benchmarks/known_rate.py                  # num_workers 0..8xCPUs, default bench settings
    python benchmarks/known_rate.py --workers 0 4 16

Samples cost a 5 ms sleep and no CPU (``dataset=sleep``), so the true rate grows with the
workers on any machine; a long, well-warmed bare loop measures it. Each row runs loaderexp as a
sweep job does (``run(cfg)``, measured in its child process) and prints the reported rate, its
error against the bare loop, and what the measurement took. tests/test_known_rate.py asserts the
same within 3%.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bare_loop_rate, sleep_overrides  # noqa: E402
from loaderexp.config import compose  # noqa: E402
from loaderexp.data.calibration import SleepDataset  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402
from loaderexp.runner import JobContext, run  # noqa: E402


def main() -> None:
    cpus = len(os.sched_getaffinity(0))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=list(range(0, 8 * cpus + 1)))
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--sleep-ms", type=float, default=5.0)
    args = parser.parse_args()
    print(f"host: {cpus} CPUs; batch_size {args.batch_size}, {args.sleep_ms:g} ms per sample\n")
    print("workers   bare loop  loaderexp   error  repeats  batches  rounds  job s")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for workers in args.workers:
            known = bare_loop_rate(SleepDataset(sleep_ms=args.sleep_ms), args.batch_size, workers)
            cfg = compose(sleep_overrides(workers, args.batch_size, args.sleep_ms))
            start = time.perf_counter()
            result = run(cfg, JobContext(output_dir=Path(tmp) / str(workers)))
            job_s = time.perf_counter() - start
            if result.status != "FINISHED":
                print(f"{workers:7d}  {known:10,.1f}  {result.status}: {result.error}")
                continue
            m = result.metrics
            error = m[M.THROUGHPUT] / known - 1
            worst = max(worst, abs(error))
            print(f"{workers:7d}  {known:10,.1f}  {m[M.THROUGHPUT]:9,.1f}  {100 * error:+5.1f}%  "
                  f"{m[M.REPEATS]:7.0f}  {m[M.BATCHES]:7.0f}  {m.get(M.ROUNDS, float('nan')):6.0f}  "
                  f"{job_s:5.1f}")
    print(f"\nlargest error: {100 * worst:.1f}% (target: within 3% at every worker count)")


if __name__ == "__main__":
    main()
