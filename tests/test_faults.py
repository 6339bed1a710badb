"""Fault injection: each failure is recorded, classified, explained, and the sweep's other runs complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from loaderexp.harness.shm import SharedMemoryTooSmall, shm_needed, shm_verdict
from loaderexp.runner import JobContext, run
from tests.conftest import REPO, TINY, run_cli, wait_until_a_job_measures

FAULTY = "tests.faulty."
CASES = {  # dataset class -> what the failed run must say
    "Raising": ["ValueError", "broken sample 5"],
    "BusError": ["killed by signal: Bus error", "likely cause: shared memory exhausted", "--shm-size"],
    # torch says "killed by signal: Killed", or "exited unexpectedly" when the broken pipe wins the race
    # with its SIGCHLD handler; either way the run is FAILED with a cause.
    "OomKilled": [("killed by signal: Killed", "exited unexpectedly"), ("likely cause: killed (out of memory?)",
                                                                         "likely cause: worker died")],
    "Segfault": ["killed by signal: Segmentation fault", "likely cause: segmentation fault"],
    "HangsInC": ["Timeout", "bench.job_timeout_s=20", "likely cause: hang"],
    "TooManyFiles": ["Too many open files", "likely cause: too many open files", "ulimit -n"],
}


@pytest.mark.slow
def test_faulty_jobs_fail_alone_with_their_cause(tmp_path, data_root):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    targets = ",".join(["loaderexp.data.synthetic.SyntheticImages", *(FAULTY + name for name in CASES)])
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *TINY, f"dataset._target_={targets}", f"+dataset.python_path={REPO}",
                    "loader.num_workers=1", "bench.job_timeout_s=20", f"tracking.uri={store}",
                    "tracking.experiment=faults", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {json.loads(p.read_text())["params"]["dataset._target_"].rsplit(".", 1)[-1]: json.loads(p.read_text())
               for p in sweep.glob("*/result.json")}
    assert len(results) == 1 + len(CASES)
    assert results["SyntheticImages"]["status"] == "FINISHED"
    for name, expected in CASES.items():
        assert results[name]["status"] == "FAILED", name
        for text in expected:
            options = text if isinstance(text, tuple) else (text,)
            assert any(t in results[name]["error"] for t in options), (name, text, results[name]["error"])

    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("faults").experiment_id])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert sorted(r.info.status for r in children) == ["FAILED"] * len(CASES) + ["FINISHED"]
    assert all("likely cause" in r.data.tags["error"] for r in children if r.info.status == "FAILED"
               and "Raising" not in r.data.params["dataset._target_"])
    leftovers = [p for p in (p for p in __import__("psutil").process_iter(["cmdline"]))
                 if "loaderexp-measure" in " ".join(p.info["cmdline"] or [])]
    assert not leftovers


def test_segfault_in_the_loading_process_itself_is_contained(compose_cfg, tmp_path):
    """num_workers=0 loads in the measuring process: only the child-process isolation survives this."""
    cfg = compose_cfg([*TINY, "tracking=none", f"dataset._target_={FAULTY}Segfault", f"+dataset.python_path={REPO}"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert "killed by signal SIGSEGV" in result.error
    assert result.info.fault == "segmentation fault"


def test_hang_in_c_code_in_the_loading_process_is_killed(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", f"dataset._target_={FAULTY}HangsInC", f"+dataset.python_path={REPO}",
                       "bench.job_timeout_s=3"])
    started = time.monotonic()
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED" and result.info.fault == "hang"
    assert time.monotonic() - started < 60


def test_shared_memory_pre_flight():
    assert shm_needed(sample_bytes=12_288, batch_size=128, num_workers=0, prefetch_factor=None) == 0
    needed = shm_needed(sample_bytes=12_288, batch_size=128, num_workers=4, prefetch_factor=None)
    assert needed == 4 * 2 * 128 * 12_288
    assert shm_verdict(needed, free=10 * needed) is None
    assert "tight" in shm_verdict(needed, free=int(1.5 * needed))
    with pytest.raises(SharedMemoryTooSmall, match=r"workers would die with a bus error; lower loader.num_workers"):
        shm_verdict(needed, free=needed // 2)
    assert shm_verdict(needed, free=None) is None  # no /dev/shm on this platform: nothing to check


def test_shared_memory_refusal_is_a_failed_run_before_workers_start(compose_cfg, tmp_path, monkeypatch):
    cfg = compose_cfg([*TINY, "tracking=none", "loader.num_workers=2", "bench.isolate=false"])
    monkeypatch.setattr("loaderexp.harness.resources.shm_free_bytes", lambda: 1024)
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert "SharedMemoryTooSmall" in result.error and "against 0 MiB free in /dev/shm" in result.error


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,expected",
    [
        (["dataset=imagenet21k"], ["Could not find 'dataset/imagenet21k'", "Available options in 'dataset'", "cifar10"]),
        (["loader.num_workers=many"], ["loader.num_workers=many", "could not be converted to Integer"]),
        (["loader.batch_size=0"], ["loaderexp: error: loader.batch_size=0: must be null (the dataset's items are "
                                   "batches) or an integer >= 1"]),
        (["loader.collate_fn=nope.collate"], ["loaderexp: error: loader.collate_fn=nope.collate: cannot be imported"]),
        (["dataset._target_=nope.Missing"], ["loaderexp: error: dataset._target_=nope.Missing: cannot be imported"]),
        (["tracking=mlflow", "tracking.uri=http://127.0.0.1:9"],
         ["loaderexp: error: tracking.uri=http://127.0.0.1:9: MLflow server not reachable"]),
        (["dataset=imagefolder", "dataset.generate=false", "dataset.root=/nonexistent/images"],
         ["dataset.root=/nonexistent/images: no image folder there"]),
    ],
)
def test_bad_input_exits_non_zero_with_a_readable_message(tmp_path, data_root, args, expected):
    base = [a for a in TINY if not a.startswith("dataset")] if any(a.startswith("dataset=") for a in args) else TINY
    proc = run_cli([*base, "tracking=none", *args, "hydra.run.dir=out"], cwd=tmp_path, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for text in expected:
        assert text in output, (text, output[-2000:])
    assert "Traceback" not in output


@pytest.mark.slow
def test_sigterm_marks_the_current_run_killed_and_keeps_finished_ones(tmp_path, data_root):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = tmp_path / "sweep"
    args = [sys.executable, "-m", "loaderexp", "-m", *TINY, "bench.budget=seconds", "bench.seconds=1.5",
            "bench.seed=0,1,2", f"tracking.uri={store}", f"hydra.sweep.dir={sweep}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ})
    wait_until_a_job_measures(proc, store)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    statuses = {p.parent.name: json.loads(p.read_text())["status"] for p in sweep.glob("*/result.json")}
    assert statuses["0"] == "FINISHED" and statuses["1"] == "KILLED"
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("loaderexp").experiment_id])
    assert sorted(r.info.status for r in runs) == ["FINISHED", "KILLED", "KILLED"]  # job 0, job 1, the sweep
