"""The benchmark scripts run end to end (their --quick form) and print every comparison.

Times are what they measure, so nothing here asserts one: only that each section ran and
printed its verdict.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *args], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "HYDRA_FULL_ERROR": "0"})


@pytest.mark.slow
def test_harness_overhead_quick(data_root):
    done = run_script("harness_overhead.py", "--quick")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("against a bare loop over the plain DataLoader costs") == 3 and "target " in out
    assert out.count("of which the delivery check's instrumentation") == 3
    assert "2. per-job overhead in a real multirun" in out and "of which" in out
    assert "3. fixed budget vs whole epochs" in out
    assert "recommended num_workers" in out and "same best num_workers, in a fraction of the time:" in out


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the GPU path is run by hand on a GPU machine")
def test_cuda_check_says_so_without_cuda():
    done = run_script("cuda_check.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "CUDA" in done.stdout and "not" in done.stdout.lower()


class CountingLoader:
    """Epochs of ``size`` numbered batches; counts the epochs started."""

    def __init__(self, size: int):
        self.size, self.epochs = size, 0

    def __iter__(self):
        self.epochs += 1
        return iter(range(self.size))


def test_passenger_takes_one_batch_per_driver_batch_across_epochs():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from harness_overhead import Passenger, bare_loop

    passenger_loader = CountingLoader(3)
    passenger = Passenger(passenger_loader, warmup=2)
    bare_loop(CountingLoader(4), warmup=1, batches=5, on_batch=passenger)
    # 2 warm-up batches and one per measured driver batch: 7 batches, in 3 epochs of 3.
    assert passenger_loader.epochs == 3
    assert passenger.batch == (2 + 5 - 1) % 3  # the last batch it fetched, kept as a bare loop keeps it
    assert passenger.own > 0 and passenger.driver > 0 and passenger.ratio() == passenger.own / passenger.driver


def test_race_stopping_prints_both_rules_for_each_lead():
    """Simulated, so fast and host-free: each row has both rules' times and how often the cheaper side was kept."""
    done = run_script("race_stopping.py", "--quick", "--races", "60")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.strip().startswith(("+0%", "+5%", "+15%"))]
    assert len(rows) == 3 and all(line.count("%") == 4 for line in rows), done.stdout
