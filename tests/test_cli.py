"""`python -m loaderexp` as a user runs it: a single run and a real multirun, read back from MLflow."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import TINY, run_cli

pytestmark = pytest.mark.slow


def test_single_run_from_another_directory(tmp_path, data_root, store):
    proc = run_cli([*TINY, f"tracking.uri={store}", "hydra.run.dir=out"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "samples/s" in proc.stdout and "FINISHED" in proc.stdout
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["status"] == "FINISHED"
    runs = MlflowClient(store).search_runs([MlflowClient(store).get_experiment_by_name("loaderexp").experiment_id])
    assert len(runs) == 1


def test_bad_setting_exits_non_zero_with_a_one_line_error(tmp_path, data_root):
    proc = run_cli([*TINY, "tracking=none", "loader.batch_size=0", "hydra.run.dir=out"], cwd=tmp_path)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("loaderexp: error:")]
    assert errors == ["loaderexp: error: loader.batch_size=0: must be null (the dataset's items are batches) "
                      "or an integer >= 1"]
    assert "Traceback" not in proc.stderr


def test_multirun_groups_jobs_under_a_parent_run_and_survives_a_failing_job(tmp_path, data_root, store):
    sweep_dir = tmp_path / "sweep"
    proc = run_cli(
        ["-m", *TINY, "loader.num_workers=0,1", "dataset.num_samples=256,-5", f"tracking.uri={store}",
         "tracking.experiment=sweeptest", f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 of 4 jobs recorded" in proc.stdout
    assert "#/experiments/" in proc.stdout
    results = sorted(sweep_dir.glob("*/result.json"))
    assert len(results) == 4
    statuses = [json.loads(p.read_text())["status"] for p in results]
    assert statuses.count("FINISHED") == 2 and statuses.count("FAILED") == 2

    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("sweeptest")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 4
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["loaderexp.jobs"] == "4"
    assert "loader.num_workers=0,1" in parent.data.tags["loaderexp.grid"]
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    finished = [c for c in children if c.info.status == "FINISHED"]
    assert sorted(c.data.params["loader.num_workers"] for c in finished) == ["0", "1"]
    for child in finished:
        assert child.data.metrics["throughput_samples_per_s"] > 0
        assert child.data.metrics["wait_p95_ms"] >= child.data.metrics["wait_p50_ms"] > 0
        assert child.data.metrics["delivery_ok"] == 1.0
        assert child.data.params["dataset.name"] == "synthetic"
    assert all(c.data.tags.get("error") for c in children if c.info.status == "FAILED")
    assert {"summary.txt", "throughput.png"} <= {a.path for a in client.list_artifacts(parent.info.run_id)}

    # The report reads the same sweep back from MLflow by its parent run id.
    from loaderexp.report import main as report_main

    report_main([parent.info.run_id, "--uri", store, "--out", str(tmp_path / "report")])
    report = (tmp_path / "report" / "report.txt").read_text()
    assert report.count("FINISHED") == 2 and report.count("FAILED") >= 2
    assert (tmp_path / "report" / "throughput.png").is_file()
