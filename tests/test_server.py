"""The team setup: an `mlflow server` with a database backend and an artifact store, two sweeps at once."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import TINY, run_cli
from tests.mlflow_server import mlflow_server
from tests.postgres import postgres_bin, postgres_database

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def backend_store(kind: str, folder: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'team.db'}"
    else:
        with postgres_database() as uri:
            yield uri


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_sweeps_log_to_one_server_at_once_and_lose_nothing(tmp_path, data_root, backend):
    if backend == "postgresql" and postgres_bin() is None and not os.environ.get("CI"):
        pytest.skip("PostgreSQL not installed (.ci/run installs Debian's postgresql)")
    with backend_store(backend, tmp_path) as store, \
            mlflow_server(store, tmp_path / "artifacts", log=tmp_path / "server.log") as url:
        sweeps = []
        for name in ("alice", "bob"):
            args = [sys.executable, "-m", "loaderexp", "-m", *TINY, "loader.num_workers=0,1", "bench.seed=0,1",
                    f"tracking.uri={url}", "tracking.experiment=team", f"hydra.sweep.dir={tmp_path / name}"]
            sweeps.append(subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True))
        errors = []  # the sweeps' error lines: shown if a run did not reach MLflow whole
        for proc in sweeps:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
            errors += [line for line in err.splitlines() if "ERROR" in line or "rror" in line]
            assert f"{url}/#/experiments/" in out  # the runs address points at the server itself

        client = MlflowClient(url)
        experiment = client.get_experiment_by_name("team")
        runs = client.search_runs([experiment.experiment_id], max_results=1000)
        parents = [r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent"]
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
        assert len(parents) == 2 and len(children) == 8
        assert all(r.info.status == "FINISHED" for r in runs), (
            [(r.info.run_name, r.info.status) for r in runs], errors)
        for parent in parents:
            mine = [c for c in children if c.data.tags["mlflow.parentRunId"] == parent.info.run_id]
            assert len(mine) == 4
        # Artifacts went through the server to its artifact store.
        child = children[0]
        assert "result.json" in {a.path for a in client.list_artifacts(child.info.run_id)}
        local = client.download_artifacts(child.info.run_id, "result.json", str(tmp_path))
        assert json.loads(open(local).read())["status"] == "FINISHED"
        assert any((tmp_path / "artifacts").rglob("result.json"))


def test_unreachable_server_stops_the_sweep_before_any_job(tmp_path, data_root):
    proc = run_cli(["-m", *TINY, "loader.num_workers=0,1", "tracking.uri=http://127.0.0.1:9",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, timeout=120)
    assert proc.returncode != 0
    assert "tracking.uri=http://127.0.0.1:9: MLflow server not reachable" in proc.stdout + proc.stderr
    assert not list((tmp_path / "sweep").glob("*/result.json"))


def test_store_lost_mid_sweep_keeps_results_and_sync_imports_them(tmp_path, data_root):
    """The server goes away after the first job: the sweep finishes locally, one command imports the rest."""
    import os
    import time

    backend = f"sqlite:///{tmp_path / 'team.db'}"
    sweep = tmp_path / "sweep"
    # Fail fast instead of MLflow's default minutes of retries against a server that is gone.
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    with mlflow_server(backend, tmp_path / "artifacts") as url:
        args = [sys.executable, "-m", "loaderexp", "-m", *TINY, "bench.budget=seconds", "bench.seconds=1.0",
                "bench.seed=0,1,2", f"tracking.uri={url}", "tracking.experiment=lost", f"hydra.sweep.dir={sweep}"]
        proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        while not (sweep / "0" / "result.json").exists():
            assert proc.poll() is None
            time.sleep(0.1)
    out, err = proc.communicate(timeout=600)  # the server is gone from here on
    assert proc.returncode == 0, err[-3000:]
    results = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/result.json"))]
    assert [r["status"] for r in results] == ["FINISHED"] * 3  # every measurement kept
    assert not all(r["logged"] for r in results)
    assert "python -m loaderexp.sync" in out + err

    with mlflow_server(backend, tmp_path / "artifacts") as url:  # back, on the same database
        synced = subprocess.run([sys.executable, "-m", "loaderexp.sync", str(sweep), "--uri", url],
                                capture_output=True, text=True, timeout=300, env=env)
        assert synced.returncode == 0, synced.stderr[-2000:]
        assert "imported" in synced.stdout
        client = MlflowClient(url)
        runs = client.search_runs([client.get_experiment_by_name("lost").experiment_id])
        parent = [r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent"]
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
        assert len(parent) == 1 and parent[0].info.status == "FINISHED"
        assert sorted(c.data.params["bench.seed"] for c in children if c.info.status == "FINISHED") == ["0", "1", "2"]
        again = subprocess.run([sys.executable, "-m", "loaderexp.sync", str(sweep), "--uri", url],
                               capture_output=True, text=True, timeout=300, env=env)
        assert "nothing to import" in again.stdout
    assert all(json.loads(p.read_text())["logged"] for p in sweep.glob("*/result.json"))


def test_runs_logging_the_same_dataset_at_once_all_get_it(tmp_path):
    """Sweeps that log one dataset into one experiment at the same moment race to create it there
    (MLflow answers the loser with a UNIQUE constraint error); every run must still get its input."""
    import threading

    from loaderexp.result import RunFacts
    from loaderexp.track.tracker import MlflowTracker

    with mlflow_server(f"sqlite:///{tmp_path / 'race.db'}", tmp_path / "artifacts") as url:
        tracker = MlflowTracker(url, "race")
        runs = []
        for trial in range(5):
            ids = [tracker.start_run(f"run {trial}.{i}", {}) for i in range(4)]
            params, info = {"dataset.name": "synthetic", "dataset.seed": trial}, RunFacts(data_source="generated")
            threads = [threading.Thread(target=tracker.log_dataset, args=(run_id, params, info)) for run_id in ids]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            runs += ids
        assert [r for r in runs if not tracker.client.get_run(r).inputs.dataset_inputs] == []


def test_a_server_with_basic_auth_takes_credentials_from_the_environment_and_keeps_them(tmp_path, data_root):
    """`mlflow server --app-name basic-auth`: without credentials the sweep stops before any job with
    a one-line reason; with them it logs, and the password reaches no file, param, tag or line."""
    password = "adm-pw-7e1f9c3b2a"
    (tmp_path / "auth.ini").write_text(
        "[mlflow]\ndefault_permission = READ\nadmin_username = admin\n"
        f"database_uri = sqlite:///{tmp_path / 'users.db'}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
    server_env = {"MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "auth.ini"), "MLFLOW_AUTH_ADMIN_PASSWORD": password,
                  "MLFLOW_FLASK_SERVER_SECRET_KEY": "a-test-only-csrf-key"}
    sweep = ["-m", *TINY, "loader.num_workers=0,1", "tracking.experiment=auth"]
    with mlflow_server(f"sqlite:///{tmp_path / 'team.db'}", tmp_path / "artifacts", app="basic-auth",
                       env=server_env, workers=1) as url:
        refused = run_cli([*sweep, f"tracking.uri={url}", f"hydra.sweep.dir={tmp_path / 'refused'}"], cwd=tmp_path)
        user = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": password}
        proc = run_cli([*sweep, f"tracking.uri={url}", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path,
                       env=user)
        os.environ.update(user)  # this test's own reading of the store
        try:
            client = MlflowClient(url)
            runs = client.search_runs([client.get_experiment_by_name("auth").experiment_id])
        finally:
            for key in user:
                os.environ.pop(key)
    assert refused.returncode == 2
    assert ("the server refused a request without credentials: set MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD (HTTP 401)") in refused.stderr
    assert not list((tmp_path / "refused").glob("*/result.json"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 of 2 jobs recorded" in proc.stdout
    assert len(runs) == 3 and all(r.info.status == "FINISHED" for r in runs)
    assert password not in proc.stdout + proc.stderr
    for run in runs:
        assert not [k for k, v in {**run.data.params, **run.data.tags}.items() if password in str(v)]
    leaked = [p for p in (tmp_path / "sweep").rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert leaked == []
