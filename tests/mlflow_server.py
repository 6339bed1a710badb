"""An `mlflow server` on loopback for a test, started and stopped around it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

from benchmarks.common import free_port


@contextlib.contextmanager
def mlflow_server(backend_uri: str, artifacts: Path, workers: int = 2, log: Path | None = None,
                  app: str | None = None, env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_uri,
         "--artifacts-destination", str(artifacts), "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(workers), *(["--app-name", app] if app else [])],
        stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {proc.returncode}" + (f": {log.read_text()[-2000:]}" if log else ""))
            if time.time() > deadline:
                raise TimeoutError("mlflow server did not answer /health within 120 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log:
            out.close()
