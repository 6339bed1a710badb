"""Shared fixtures: one generated data root per test session, tiny configs, temporary MLflow stores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Small, fast settings for runs that only check behaviour (never wall-clock times).
TINY = [
    "dataset=synthetic",
    "dataset.num_samples=256",
    "loader.batch_size=32",
    "bench=quick",
    "bench.resource_interval_s=0.05",
]


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """Generated data sets are made once here and shared by every test and subprocess."""
    root = tmp_path_factory.mktemp("data")
    os.environ["LOADEREXP_DATA_ROOT"] = str(root)
    return root


@pytest.fixture
def store(tmp_path) -> str:
    """A fresh MLflow sqlite store (absolute URI) for one test."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def compose_cfg(data_root):
    from loaderexp.config import compose

    return compose


def run_cli(args: list[str], cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m loaderexp ARGS`` as a user runs it, output captured."""
    full_env = {**os.environ, **(env or {}), "HYDRA_FULL_ERROR": "0"}
    return subprocess.run(
        [sys.executable, "-m", "loaderexp", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )
