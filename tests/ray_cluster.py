"""A real Ray cluster on this machine for one test: a head and more raylets, each offering one
``loaderexp_host`` resource as conf/hydra/launcher/ray.yaml asks of every node (or nothing)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from benchmarks.common import free_port

HOST_RESOURCE = '{"loaderexp_host": 1}'


def ray_cli() -> list[str]:
    found = shutil.which("ray", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "ray.scripts.scripts"]


@contextmanager
def one_node_cluster(resources: str | None = HOST_RESOURCE, nodes: int = 1, cpus: int = 1) -> Iterator[dict[str, str]]:
    """A head (and ``nodes - 1`` more raylets), each offering ``cpus`` CPUs and ``resources`` (None: a plain
    `ray start`); yields the environment a sweep needs to reach the cluster (address and auth token)."""
    address = f"127.0.0.1:{free_port()}"
    # Ray 2.60 turns on token authentication; a throwaway token keeps the test's cluster its own.
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    node = [f"--num-cpus={cpus}", *([f"--resources={resources}"] if resources else []), "--disable-usage-stats"]
    try:
        subprocess.run([*ray_cli(), "start", "--head", f"--port={address.split(':')[1]}", "--include-dashboard=false",
                        *node], env=env, check=True, capture_output=True, timeout=180)
        for _ in range(nodes - 1):
            subprocess.run([*ray_cli(), "start", f"--address={address}", *node], env=env, check=True,
                           capture_output=True, timeout=180)
        yield {"RAY_ADDRESS": address, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": env["RAY_AUTH_TOKEN"]}
    finally:
        subprocess.run([*ray_cli(), "stop", "--force"], env=env, capture_output=True, timeout=120)


def two_node_cluster():
    """The head and a second raylet, each with one ``loaderexp_host``."""
    return one_node_cluster(HOST_RESOURCE, nodes=2)
