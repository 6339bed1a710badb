"""What the benchmarks share: a sweep started as a user starts it, the reference loops loaderexp did
not write, and a free port for the services some of them bring up.

Imported as ``benchmarks.common`` (each script puts the repository root on ``sys.path`` first); the
tests use the same pieces.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from loaderexp.report import load_results  # noqa: E402
from loaderexp.result import RunResult  # noqa: E402


@dataclass
class Sweep:
    seconds: float  # wall time of the whole command, Python's start-up and the app's included
    results: list[RunResult]
    stdout: str
    stderr: str
    returncode: int


def sweep(overrides: list[str], folder: Path, cwd: Optional[Path] = None, env: Optional[dict[str, str]] = None,
          store: Optional[str] = None, check: bool = True) -> Sweep:
    """``python -m loaderexp -m OVERRIDES`` into ``folder`` (its sweep folder), logging to ``store`` (a
    sqlite file beside it by default), timed as a user would time it; exits with its stderr on failure."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    store = store or f"sqlite:///{folder.parent / 'mlflow.db'}"
    command = [sys.executable, "-m", "loaderexp", "-m", *overrides, f"tracking.uri={store}",
               f"hydra.sweep.dir={folder}"]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd or folder.parent, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - started
    if check and proc.returncode != 0:
        sys.exit(f"{' '.join(overrides)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    results = [r for _, r in load_results(folder)] if folder.is_dir() else []
    return Sweep(elapsed, results, proc.stdout, proc.stderr, proc.returncode)


def bare_loop_rate(dataset, batch_size: int, num_workers: int, rounds: int = 100) -> float:
    """Samples/s of a plain ``DataLoader`` loop over ``rounds`` x ``num_workers`` batches after a generous
    warm-up: the reference for a known-rate dataset (written here, not by loaderexp's measured loop).

    One round is one batch per worker; with 100 rounds, where the loop starts and stops inside a
    round moves the rate by at most 1%.
    """
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
    per_round = max(num_workers, 1)
    warmup = 4 * per_round + 2
    measured = rounds * per_round
    iterator = iter(loader)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    for _ in range(measured):
        next(iterator)
    elapsed = time.perf_counter() - start
    del iterator
    return measured * batch_size / elapsed


def sleep_overrides(workers: int, batch_size: int, sleep_ms: float) -> list[str]:
    """The known-rate dataset (``dataset=sleep``) with these settings, as a loaderexp run takes them."""
    return ["dataset=sleep", f"dataset.sleep_ms={sleep_ms}", f"loader.batch_size={batch_size}",
            f"loader.num_workers={workers}", "tracking=none"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
