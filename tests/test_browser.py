"""The MLflow UI really shows a sweep: `mlflow server` over its store, opened in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO, TINY, run_cli
from tests.mlflow_server import mlflow_server

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Kept after the test for a person to look at (outputs/ is not versioned).
ARTIFACTS = REPO / "outputs" / "test-artifacts"


def chromium(url: str, profile: Path, *mode: str) -> str:
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-sync", "--disable-component-update", "--disable-quic",
            f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--window-size=1600,1200", *mode, url]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="chromium not installed (.ci/run installs it)")
def test_sweep_runs_params_and_metrics_are_on_the_page(tmp_path, data_root):
    assert CHROMIUM, "CI must have chromium: .ci/run installs Debian's chromium package"
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(["-m", *TINY, "loader.num_workers=0,1", f"tracking.uri={store}", "tracking.experiment=browser",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("browser")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2

    with mlflow_server(store, tmp_path / "artifacts", workers=1) as url:
        runs_url = f"{url}/#/experiments/{experiment.experiment_id}/runs"
        assert runs_url in proc.stdout.replace("http://127.0.0.1:5000", url)  # the address the sweep printed
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        chromium(runs_url, tmp_path / "p1", f"--screenshot={ARTIFACTS / 'mlflow_runs.png'}")
        assert (ARTIFACTS / "mlflow_runs.png").stat().st_size > 20_000
        table = chromium(runs_url, tmp_path / "p2", "--dump-dom")
        assert parent.info.run_name in table
        assert "<strong>3</strong> matching runs" in table  # the parent and its two jobs

        for child in children:
            page = chromium(f"{runs_url}/{child.info.run_id}", tmp_path / f"p-{child.info.run_id}", "--dump-dom")
            assert child.info.run_name in page  # named by the swept values, e.g. workers=1
            for name in ("loader.num_workers", "dataset.name", "throughput_samples_per_s", "wait_p95_ms",
                         "delivery_ok"):
                assert name in page, name
            digest = child.inputs.dataset_inputs[0].dataset.digest  # mlflow.log_input: its dataset, by digest
            assert digest in page
        chromium(f"{runs_url}/{children[0].info.run_id}", tmp_path / "p3",
                 f"--screenshot={ARTIFACTS / 'mlflow_run.png'}")

        # The printed charts address opens on the sweep's jobs, a chart of throughput per num_workers.
        printed = next(line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("MLflow charts:"))
        charts_url = printed.replace("http://127.0.0.1:5000", url)
        chromium(charts_url, tmp_path / "p4", f"--screenshot={ARTIFACTS / 'mlflow_charts.png'}")
        page = chromium(charts_url, tmp_path / "p5", "--dump-dom")
        text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
        assert "loaderexp: the sweep (2)" in text  # the section the sweep stored, with its two charts
        assert "Group: 0" in text and "Group: 1" in text  # its jobs, one group per configuration
        assert parent.info.run_name not in page  # the parent's own metrics are not what is charted

        # The printed table address: this sweep's jobs only, fastest first, throughput among the first columns and
        # only the columns a user compares (a job logs dozens of metrics: none of the others is shown).
        printed = next(line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("MLflow this sweep:"))
        table_url = printed.replace("http://127.0.0.1:5000", url)
        chromium(table_url, tmp_path / "p6", f"--screenshot={ARTIFACTS / 'mlflow_table.png'}")
        page = chromium(table_url, tmp_path / "p7", "--dump-dom")
        text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
        assert "throughput_samples_per_s" in text and "pss_peak_mb" in text
        assert "wait_p95_ms" not in text  # not among the view's columns
        assert "<strong>2</strong> matching runs" in page  # the jobs, not the parent
        fastest, slower = sorted(children, key=lambda r: -r.data.metrics["throughput_samples_per_s"])
        assert fastest.info.run_name in ("workers=0", "workers=1")  # short names that carry the swept values
        names = re.findall(r"workers=[01]\b(?!,)", text)
        assert names.index(fastest.info.run_name) < names.index(slower.info.run_name), names
