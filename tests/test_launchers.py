"""A sweep stays one sweep under launchers that run its jobs elsewhere, and credentials go nowhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import TINY, run_cli

pytestmark = pytest.mark.slow


def test_jobs_launched_out_of_process_keep_their_sweep(tmp_path, data_root):
    """submitit's local executor runs each job in its own process: the jobs find their parent run,
    their place in the sweep and their names in the sweep folder's record, not in shared memory."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(["-m", "hydra/launcher=slurm_local", *TINY, "loader.num_workers=0,1", f"tracking.uri={store}",
                    "tracking.experiment=launched", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = "".join(path.read_text() for path in (tmp_path / "sweep").glob("*/*.log"))
    assert "job 1/2: loader.num_workers=0" in logs and "job 2/2: loader.num_workers=1" in logs
    _, children = children_of_sweep(store, "launched")
    assert sorted(r.info.run_name for r in children) == ["workers=0", "workers=1"]
    assert all(r.info.status == "FINISHED" for r in children)
    assert_one_measurement_per_host_at_a_time(children)  # submitit starts both at once
    assert "2 of 2 jobs recorded" in proc.stdout


def files_containing(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize("multirun", [False, True])
def test_a_password_in_the_tracking_uri_is_refused_before_anything_is_written(tmp_path, multirun):
    args = ["tracking.uri=http://alice:s3cret-pw@127.0.0.1:9/", f"hydra.run.dir={tmp_path / 'run'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    proc = run_cli(["-m", "loader.num_workers=0,1", *args] if multirun else args, cwd=tmp_path)
    assert proc.returncode == 2
    assert "tracking.uri=http://alice:***@127.0.0.1:9/ carries a password" in proc.stderr
    assert "MLFLOW_TRACKING_PASSWORD" in proc.stderr
    assert "s3cret-pw" not in proc.stdout + proc.stderr
    assert files_containing(tmp_path, "s3cret-pw") == []


def test_a_token_in_the_environment_reaches_no_file_param_tag_or_line(tmp_path, data_root):
    token = "tok-9f8e7d6c5b4a"
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(["-m", *TINY, "loader.num_workers=0,1", f"tracking.uri={store}", "tracking.experiment=secret",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path,
                   env={"MLFLOW_TRACKING_TOKEN": token, "MLFLOW_TRACKING_PASSWORD": token})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert token not in proc.stdout + proc.stderr
    assert files_containing(tmp_path, token) == []  # sweep folder, result.json, mlflow.db, artifacts
    client = MlflowClient(store)
    for run in client.search_runs([client.get_experiment_by_name("secret").experiment_id]):
        recorded = {**run.data.params, **run.data.tags}
        assert not [k for k, v in recorded.items() if token in str(v)]
    assert os.environ.get("MLFLOW_TRACKING_TOKEN") != token  # the test's own environment untouched


def children_of_sweep(store: str, experiment: str) -> tuple[object, list]:
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    parent = next(r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent")
    return parent, [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def assert_one_measurement_per_host_at_a_time(children: list) -> None:
    spans = sorted((r.data.tags["host.hostname"], float(r.data.tags["info.measured_from"]),
                    float(r.data.tags["info.measured_until"])) for r in children)
    for (host_a, _, until_a), (host_b, from_b, _) in zip(spans, spans[1:]):
        assert host_a != host_b or from_b >= until_a, spans


def test_a_sweep_on_a_ray_cluster_runs_one_measurement_per_host_at_a_time(tmp_path, data_root):
    """Two raylets on this one machine: Ray runs two jobs at once, and the host lock makes the
    second wait, so no two measurements overlap on the host."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    from tests.ray_cluster import two_node_cluster

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with two_node_cluster() as ray_env:
        proc = run_cli(["-m", "hydra/launcher=ray", *TINY, "loader.num_workers=0,1,2,3", f"tracking.uri={store}",
                        "tracking.experiment=ray", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=ray_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    output = proc.stdout + proc.stderr
    assert "4 of 4 jobs recorded" in output and "Recommendation: " in output
    assert "waiting for the host" in output  # two nodes, one host: the lock was needed
    assert "automatic_schema_matching" not in output
    parent, children = children_of_sweep(store, "ray")
    assert sorted(r.info.run_name for r in children) == [f"workers={n}" for n in range(4)]
    assert all(r.info.status == "FINISHED" for r in children) and parent.info.status == "FINISHED"
    assert_one_measurement_per_host_at_a_time(children)
    assert ray_env["RAY_AUTH_TOKEN"] not in output
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and ray_env["RAY_AUTH_TOKEN"].encode() in p.read_bytes()]


def test_a_sweep_through_slurm_gets_a_whole_node_per_job(tmp_path, data_root):
    """A real one-node SLURM cluster: each job is an exclusive sbatch job, so they queue for the node."""
    from benchmarks.slurm_cluster import available, one_node_cluster

    if available():
        pytest.skip(f"SLURM: {available()}")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with one_node_cluster() as slurm_env:
        # A host lock of its own: another test measuring on this host (pytest-xdist) is not SLURM's to keep apart.
        proc = run_cli(["-m", "hydra/launcher=slurm", *TINY, "loader.num_workers=0,1", f"tracking.uri={store}",
                        "tracking.experiment=slurm", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path,
                       env={**slurm_env, "LOADEREXP_HOST_LOCK": str(tmp_path / "host.lock")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 of 2 jobs recorded" in proc.stdout
    scripts = list((tmp_path / "sweep" / ".submitit").rglob("*_submission.sh"))
    assert scripts and all("#SBATCH --exclusive" in s.read_text() for s in scripts)
    parent, children = children_of_sweep(store, "slurm")
    assert sorted(r.info.run_name for r in children) == ["workers=0", "workers=1"]
    assert all(r.info.status == "FINISHED" for r in children) and parent.info.status == "FINISHED"
    assert_one_measurement_per_host_at_a_time(children)
    assert all(r.data.tags["info.waited_for_host_s"] == "0.0" for r in children)  # SLURM kept them apart
