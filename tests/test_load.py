"""Load: 200 short jobs in one sweep, every one recorded, nothing leaked, the runner's memory flat."""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid

import psutil
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli

pytestmark = pytest.mark.slow

JOBS = 200
TAG = "LOADEREXP_TEST_SWEEP"


def shm_files() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def worker_processes(tag: str) -> set[int]:
    """Live processes this test's sweep started (they inherit its environment, tag included): measuring
    processes, DataLoader workers, the forkserver.  Another test's sweep (pytest-xdist) is not this one's."""
    found = set()
    for process in psutil.process_iter():
        try:
            if process.environ().get(TAG) == tag and process.pid != os.getpid():
                found.add(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def test_200_jobs_are_all_recorded_without_leaks(tmp_path, data_root):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = tmp_path / "sweep"
    tag = uuid.uuid4().hex
    shm_before = shm_files()
    proc = run_cli(["-m", "dataset=synthetic", "dataset.num_samples=128", "loader.batch_size=16", "bench=quick",
                    "bench.warmup_batches=1", "bench.batches=4", "bench.resource_interval_s=0.05",
                    "bench.profile_s=0",  # each seed is a dataset of its own: 200 profiling passes are not the load
                    "loader.num_workers=0,1", f"bench.seed=range(0,{JOBS // 2})", f"tracking.uri={store}",
                    "tracking.experiment=load", f"hydra.sweep.dir={sweep}"], cwd=tmp_path, timeout=1500,
                   env={TAG: tag})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{JOBS} of {JOBS} jobs recorded" in proc.stdout

    results = [json.loads(p.read_text()) for p in sweep.glob("*/result.json")]
    assert len(results) == JOBS
    assert all(r["status"] == "FINISHED" and r["logged"] for r in results)
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("load")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    assert len([r for r in runs if r.data.tags.get("mlflow.parentRunId")]) == JOBS
    assert len([r for r in runs if r.info.status == "FINISHED"]) == JOBS + 1  # and the sweep's parent

    time.sleep(1)  # workers of the last job get a moment to go
    assert worker_processes(tag) == set()
    leaked = {f for f in shm_files() - shm_before if f.startswith(("torch_", "psm_"))}
    assert not leaked

    by_job = sorted(results, key=lambda r: int(r["params"]["bench.seed"]) * 2 + r["params"]["loader.num_workers"])
    rss = [r["info"]["runner_rss_mb"] for r in by_job]
    early, late = statistics.median(rss[20:40]), statistics.median(rss[-20:])
    assert late - early < 50, f"runner memory grew from {early} MB to {late} MB over {JOBS} jobs"
