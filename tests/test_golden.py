"""What a run records keeps its shape: result.json's keys and MLflow's params, metrics and tags of a
default run and of a two-rank run, held against the files in tests/golden/ (values aside).

The golden files were written by this test (``LOADEREXP_WRITE_GOLDEN=1``) on the code before the typed
boundaries (issue 23) and must not move with a refactor; a new figure adds its key there on purpose.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO, run_cli

GOLDEN = Path(__file__).parent / "golden"
# Keys whose presence depends on the machine or the checkout, not on loaderexp: left out of the comparison.
VARIABLE = ("host.gpu", "host.cuda_version", "mlflow.source.git.commit", "mlflow.user", "metrics.gpu_",
            "metrics.cuda_allocated", "info.gpu_metrics", "mlflow.source", "info.traceback",
            "cpu_throttled_s")  # only where the cgroup keeps cpu.stat


def key_paths(value: object, prefix: str = "") -> set[str]:
    """Every key of a nested dict, as dotted paths (``metrics.throughput_samples_per_s``)."""
    if not isinstance(value, dict):
        return {prefix.rstrip(".")} if prefix else set()
    paths = {prefix.rstrip(".")} if prefix else set()
    for key, item in value.items():
        if prefix in ("params.", "metrics."):  # flat names with dots of their own: one key each
            paths.add(f"{prefix}{key}")
        else:
            paths |= key_paths(item, f"{prefix}{key}.")
    return paths


def shape_of(result_json: Path, uri: str) -> dict[str, list[str]]:
    saved = json.loads(result_json.read_text())
    run = MlflowClient(uri).get_run(saved["run_id"])
    shape = {
        "result.json": key_paths(saved),
        "mlflow.params": set(run.data.params),
        "mlflow.metrics": set(run.data.metrics),
        "mlflow.tags": set(run.data.tags),
    }
    return {part: sorted(k for k in keys if not any(v in k for v in VARIABLE)) for part, keys in shape.items()}


# How much a run measures must not depend on the host's speed, or its keys would: a noisy host's adaptive repeats
# (or a fast host's longer windows, bench.min_window_s) can finish a whole epoch, which turns epoch_time_est_s
# into epoch_time_s and adds the later epochs' first-batch time. A fixed count of repeats and batches keeps the
# record's shape the defaults' without its dependence on the moment.
FIXED = ["bench.repeats=3", "bench.min_window_s=0"]


@pytest.mark.slow
@pytest.mark.parametrize("name,overrides", [
    ("default_run", FIXED),
    ("two_ranks", ["dist.nproc_per_node=2", "loader.num_workers=1", "bench=quick"]),  # quick: 1 repeat, no minimum
])
def test_a_run_records_the_same_keys_as_before(name, overrides, data_root, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "run"
    done = run_cli([*overrides, f"tracking.uri={uri}", f"hydra.run.dir={out}"], cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    shape = shape_of(out / "result.json", uri)
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("LOADEREXP_WRITE_GOLDEN"):
        golden.write_text(json.dumps(shape, indent=1) + "\n")
    expected = json.loads(golden.read_text())
    for part in expected:
        assert {"missing": sorted(set(expected[part]) - set(shape[part])),
                "new": sorted(set(shape[part]) - set(expected[part]))} == {"missing": [], "new": []}, part
