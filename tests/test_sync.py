"""``python -m loaderexp.sync``: a result that did not reach MLflow is imported once, under a parent run, with its
figures, and marked as logged (the record read back through one constructor, written again whole)."""

from __future__ import annotations

import subprocess
import sys

from mlflow.tracking import MlflowClient

from loaderexp.result import HostFacts, RunFacts, RunResult
from loaderexp.result import metrics as M
from tests.conftest import REPO


def test_an_unlogged_result_is_imported_once(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = tmp_path / "sweep"
    result = RunResult("FINISHED", {"loader.num_workers": 2, "tracking.uri": uri, "tracking.experiment": "offline"},
                       {M.THROUGHPUT: 1234.5}, info=RunFacts(bound="no step (loader ceiling)", delivery_ok=True),
                       host=HostFacts(hostname="node1", cpu_count=2, cpus_usable=1.5, cpu_quota_cores=1.5))
    result.write(sweep / "0")
    first = subprocess.run([sys.executable, "-m", "loaderexp.sync", str(sweep)], capture_output=True, text=True,
                           cwd=REPO, timeout=300)
    assert first.returncode == 0 and "imported 1 run(s)" in first.stdout, first.stderr[-2000:]
    again = subprocess.run([sys.executable, "-m", "loaderexp.sync", str(sweep)], capture_output=True, text=True,
                           cwd=REPO, timeout=300)
    assert "nothing to import" in again.stdout
    saved = RunResult.read(sweep / "0" / "result.json")
    assert saved.logged and saved.run_id and saved.host.cpu_quota_cores == 1.5 and saved.info.bound == result.info.bound
    run = MlflowClient(uri).get_run(saved.run_id)
    assert run.data.metrics[M.THROUGHPUT] == 1234.5 and run.info.status == "FINISHED"
    assert run.data.tags["host.cpus_usable"] == "1.5" and run.data.tags["info.bound"] == "no step (loader ceiling)"
    assert run.data.tags["mlflow.parentRunId"]
