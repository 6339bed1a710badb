"""A real two-node Ray cluster on this machine for one test: a head and a second raylet, each
offering one ``loaderexp_host`` resource as conf/hydra/launcher/ray.yaml asks of every node."""

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
def two_node_cluster() -> Iterator[dict[str, str]]:
    """Yields the environment a sweep needs to reach the cluster (address and auth token)."""
    address = f"127.0.0.1:{free_port()}"
    # Ray 2.60 turns on token authentication; a throwaway token keeps the test's cluster its own.
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    node = ["--num-cpus=1", f"--resources={HOST_RESOURCE}", "--disable-usage-stats"]
    try:
        subprocess.run([*ray_cli(), "start", "--head", f"--port={address.split(':')[1]}", "--include-dashboard=false",
                        *node], env=env, check=True, capture_output=True, timeout=180)
        subprocess.run([*ray_cli(), "start", f"--address={address}", *node], env=env, check=True,
                       capture_output=True, timeout=180)
        yield {"RAY_ADDRESS": address, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": env["RAY_AUTH_TOKEN"]}
    finally:
        subprocess.run([*ray_cli(), "stop", "--force"], env=env, capture_output=True, timeout=120)
