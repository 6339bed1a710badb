"""Interrupt a sweep (SIGINT, as Ctrl-C) mid-way, then resume it: nothing measured is lost or duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from loaderexp.config import RESOLVED_CONFIG
from tests.conftest import TINY, as_a_terminal_starts_it

pytestmark = pytest.mark.slow


def sweep_args(store, sweep_dir, *extra):
    # Four jobs of about a second each: time enough to interrupt the third.
    return [sys.executable, "-m", "loaderexp", "-m", *TINY, "bench.budget=seconds", "bench.seconds=1.0",
            "bench.seed=0,1,2,3", f"tracking.uri={store}", "tracking.experiment=resume",
            f"hydra.sweep.dir={sweep_dir}", *extra]


def statuses(sweep_dir):
    out = {}
    for path in sweep_dir.glob("*/result.json"):
        try:
            out[path.parent.name] = json.loads(path.read_text())["status"]
        except (ValueError, OSError):
            pass
    return out


def test_interrupt_then_resume(tmp_path, data_root, store):
    sweep_dir = tmp_path / "sweep"
    proc = subprocess.Popen(sweep_args(store, sweep_dir), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ},
                            preexec_fn=as_a_terminal_starts_it)
    deadline = time.time() + 300
    while list(statuses(sweep_dir).values()).count("FINISHED") < 2:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.time() < deadline
        time.sleep(0.1)
    while not (sweep_dir / "2" / RESOLVED_CONFIG).exists():  # the third job has started (Hydra set it up)
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted (Ctrl-C); finished runs are kept" in err
    before = statuses(sweep_dir)
    assert list(before.values()).count("FINISHED") >= 2
    assert "KILLED" in before.values()

    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("resume")
    runs = client.search_runs([experiment.experiment_id])
    parent = [r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent"]
    assert len(parent) == 1 and parent[0].info.status == "KILLED"
    assert "KILLED" in {r.info.status for r in runs if r.data.tags.get("mlflow.parentRunId")}

    done = subprocess.run(sweep_args(store, sweep_dir, "resume=true"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("skipped (resume=true)") == list(before.values()).count("FINISHED")
    assert statuses(sweep_dir) == {"0": "FINISHED", "1": "FINISHED", "2": "FINISHED", "3": "FINISHED"}

    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"  # the same sweep, resumed
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    finished = [r for r in children if r.info.status == "FINISHED"]
    assert sorted(r.data.params["bench.seed"] for r in finished) == ["0", "1", "2", "3"]  # no duplicates
