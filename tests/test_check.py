"""``python -m loaderexp.check``: a dataset made slower fails it, an unchanged one passes it every time (on this
noisy host), and a baseline from another node type cannot be compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

# The check compares the host's load at the baseline and now and refuses to compare different ones: alone.
pytestmark = pytest.mark.quiet_host

# A user's dataset whose every sample costs a sleep (no CPU): its rate is known and the host's noise small.
DATASET = '''
import time
import torch
from torch.utils.data import Dataset

DELAY_S = {delay}


class Sleepy(Dataset):
    def __init__(self, num_samples: int = 400, size: int = 8, seed: int = 0):
        self.num_samples, self.size = num_samples, size

    def __len__(self):
        return self.num_samples

    def __getitem__(self, index):
        time.sleep(DELAY_S)
        return torch.zeros(self.size)
'''
SETTINGS = ["dataset=custom", "dataset._target_=sleepy.Sleepy", "+dataset.num_samples=400", "loader.num_workers=2",
            "loader.batch_size=8", "bench=quick", "bench.repeats=5", "bench.profile_s=0", "tracking=none"]


def write_dataset(folder: Path, delay: float) -> None:
    (folder / "sleepy.py").write_text(DATASET.format(delay=delay))
    for cached in (folder / "__pycache__").glob("sleepy*"):
        cached.unlink()


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loaderexp.check", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HYDRA_FULL_ERROR": "0"})


HOST_MOVED = "cannot compare: the host"  # the check declines: the others' load or the host's pace moved (exit 2)
TRIES = 3


def compared(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The check, run again (up to TRIES times) while it declines because the host's other load or its pace moved
    between the baseline and now: on a shared host (CI's) that is its honest answer, not the loader's; when it never
    compares, the test is skipped, saying so."""
    for _ in range(TRIES):
        done = check(*args, cwd=cwd)
        if not (done.returncode == 2 and HOST_MOVED in done.stdout):
            return done
    pytest.skip(f"the host's other load kept moving: {done.stdout.strip().splitlines()[-1]}")


@pytest.fixture
def baseline(data_root, tmp_path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    write_dataset(code, 0.002)
    out = tmp_path / "baseline"
    done = run_cli([*SETTINGS, f"dataset.python_path={code}", f"hydra.run.dir={out}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_an_unchanged_loader_passes_ten_times_and_a_slower_one_fails(baseline, tmp_path):
    for attempt in range(10):
        done = compared("--baseline", str(baseline), "--out", str(tmp_path / f"check{attempt}"), cwd=tmp_path)
        assert done.returncode == 0, f"attempt {attempt}: {done.stdout}{done.stderr[-2000:]}"
        assert "OK" in done.stdout and "95% CI" in done.stdout
    write_dataset(tmp_path / "code", 0.003)  # a change to the dataset: every sample 50% slower
    done = compared("--baseline", str(baseline), "--out", str(tmp_path / "slower"), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert "REGRESSION: throughput fell by more than 5% with 95% confidence" in done.stdout
    change = next(line for line in done.stdout.splitlines() if line.strip().startswith("change"))
    assert "-3" in change  # about -33%: 2 ms a sample became 3


@pytest.mark.slow
def test_a_baseline_from_another_node_type_cannot_be_compared(baseline, tmp_path):
    saved = json.loads((baseline / "result.json").read_text())
    saved["host"]["cpu_model"] = "Some Other CPU"
    (baseline / "result.json").write_text(json.dumps(saved))
    done = check("--baseline", str(baseline), cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot compare" in done.stderr and "Some Other CPU" in done.stderr


@pytest.mark.slow
def test_a_sweep_folder_or_its_mlflow_parent_run_is_a_baseline(data_root, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    write_dataset(code, 0.002)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = tmp_path / "sweep"
    settings = [s for s in SETTINGS if s not in ("tracking=none", "loader.num_workers=2")]
    done = run_cli(["-m", *settings, "loader.num_workers=1,2", f"dataset.python_path={code}", "bench.confirm_s=0",
                    f"tracking.uri={uri}", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = compared("--baseline", str(sweep), "--out", str(tmp_path / "a"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "num_workers=2" in done.stdout  # the sweep's pick is what is measured again
    parent = json.loads((sweep / "sweep.json").read_text())["parent_run_id"]
    # The same answer exported from MLflow alone: the parent run's children, their hosts, its confirmation.
    exported = subprocess.run([sys.executable, "-m", "loaderexp.report", parent, "--uri", uri, "--export",
                               str(tmp_path / "tuned")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert (tmp_path / "tuned" / "loader.yaml").read_text() == (sweep / "export" / "loader.yaml").read_text().replace(
        f"from the sweep {sweep} (MLflow parent run {parent})", f"from the sweep MLflow run {parent} ({uri})")
    done = compared("--baseline", parent, "--uri", uri, "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "num_workers=2" in done.stdout


@pytest.mark.slow
def test_a_baseline_on_a_quiet_host_is_not_compared_with_now_beside_a_burner(baseline, tmp_path):
    """Shared host, item 5: beside a process burning a core, the loader is not blamed for the host."""
    from tests.test_shared_host import burning_one_core

    with burning_one_core():
        done = check("--baseline", str(baseline), "--out", str(tmp_path / "busy"), cwd=tmp_path)
    base = json.loads((baseline / "result.json").read_text())["metrics"]["others_cpu_cores_mean"]
    if base > 0.5:
        pytest.skip(f"the host was already busy while the baseline measured ({base:.1f} cores of others)")
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "cannot compare: the host was busier now" in done.stdout
    assert "REGRESSION" not in done.stdout


@pytest.mark.slow
def test_a_baseline_without_a_measurement_cannot_pass(baseline, tmp_path):
    """Round two, item 8: a FAILED baseline read as "0 samples/s ... OK", exit 0."""
    saved = json.loads((baseline / "result.json").read_text())
    saved.update(status="FAILED", error="RuntimeError: the dataset raised", metrics={})
    (baseline / "result.json").write_text(json.dumps(saved))
    done = check("--baseline", str(baseline), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "holds no measurement (status FAILED: RuntimeError: the dataset raised)" in done.stderr
    assert "OK" not in done.stdout


@pytest.mark.slow
def test_no_such_baseline_is_said_in_one_line(tmp_path):
    done = check("--baseline", str(tmp_path / "nothing-here"), cwd=REPO)
    assert done.returncode == 2 and "no such folder" in done.stderr


def test_the_interval_is_made_of_the_spread_between_runs():
    from loaderexp.result.paired import runs_difference

    fell = runs_difference([1000.0], [660.0, 670.0, 650.0])
    assert fell.mean == pytest.approx(-0.34, abs=0.01) and fell.high < -0.05  # a third slower, shown
    drifting = runs_difference([1000.0], [900.0, 1100.0, 1000.0])  # a host whose speed moves 10% between runs
    assert drifting.low < -0.2 and drifting.high > 0.2  # nothing shown either way
    assert runs_difference([1000.0], [1000.0]).low == float("-inf")  # one run each: no spread to go by
