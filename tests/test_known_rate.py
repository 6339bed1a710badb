"""Acceptance: at every worker count up to 8x the CPUs, loaderexp reports a known rate within 3%.

Samples cost a sleep (``dataset=sleep``), so the true rate scales with the workers on any machine;
a long bare loop, written outside loaderexp (benchmarks/common.py), measures it. loaderexp runs with the default bench settings.
"""

from __future__ import annotations

import os

import pytest

from benchmarks.common import bare_loop_rate, sleep_overrides
from loaderexp.data.calibration import SleepDataset
from loaderexp.runner import JobContext, run

BATCH = 4
SLEEP_MS = 5.0
CPUS = len(os.sched_getaffinity(0))
WORKERS = [0, 1, *range(2, 8 * CPUS + 1)]
TOLERANCE = 0.03


@pytest.mark.slow
@pytest.mark.parametrize("workers", WORKERS)
def test_reported_rate_matches_the_known_rate(workers, compose_cfg, tmp_path):
    known = bare_loop_rate(SleepDataset(sleep_ms=SLEEP_MS), BATCH, workers)
    cfg = compose_cfg(sleep_overrides(workers, BATCH, SLEEP_MS))
    result = run(cfg, JobContext(output_dir=tmp_path / "run"))
    assert result.status == "FINISHED", result.error
    reported = result.metrics["throughput_samples_per_s"]
    error = reported / known - 1
    assert abs(error) <= TOLERANCE, (
        f"num_workers={workers}: loaderexp {reported:,.1f} samples/s, bare loop {known:,.1f} ({100 * error:+.1f}%), "
        f"{result.metrics.get('repeats')} repeats, {result.metrics.get('measured_rounds')} rounds"
    )
