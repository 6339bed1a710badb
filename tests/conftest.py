"""Shared fixtures: one generated data root per test session, tiny configs, temporary MLflow stores."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest

from loaderexp.execute.interrupts import INTERRUPTS

REPO = Path(__file__).resolve().parent.parent

# Small, fast settings for runs that only check behaviour (never wall-clock times).
TINY = [
    "dataset=synthetic",
    "dataset.num_samples=256",
    "loader.batch_size=32",
    "bench=quick",
    "bench.resource_interval_s=0.05",
]


# The longest tests (minutes each) start first: two at a time, the short ones then fill the end of the run.
LONGEST_FIRST = ("test_load.py", "test_server.py", "test_browser.py", "test_benchmarks.py")


def pytest_collection_modifyitems(items):
    """The longest first; the tests that run alone (``quiet_host``) last, where the other worker's test is a short
    one or another of them: started among the long ones, one waited up to minutes for a 200-job test to end."""
    def order(item) -> tuple[bool, bool]:
        return item.get_closest_marker("quiet_host") is not None, item.path.name not in LONGEST_FIRST

    items.sort(key=order)  # stable: the rest keep their order


@contextmanager
def share_of_the_host(folder: Path, alone: bool):
    """Under pytest-xdist (the README's test command), tests run two at a time; one marked ``quiet_host``
    measures the host's other load or compares two moments of it, and runs alone: it waits for the other
    worker's test to end, and holds the next one back.  A turnstile keeps a stream of shared holders from
    starving it."""
    with open(folder / "turnstile.lock", "a") as turnstile, open(folder / "host.lock", "a") as host:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(host, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(host, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _host_shared_with_the_other_worker(request, tmp_path_factory):
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    with share_of_the_host(tmp_path_factory.getbasetemp().parent, request.node.get_closest_marker("quiet_host")
                           is not None):
        yield




def ignored_by_the_kernel() -> set[int]:
    """The signals this process ignores as the kernel has it (/proc): a library's own sigaction, which Python's
    getsignal() does not see, included."""
    try:
        line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("SigIgn:"))
    except (OSError, StopIteration):
        return set()
    mask = int(line.split()[1], 16)
    return {sig for sig in INTERRUPTS if mask >> (sig - 1) & 1}


def as_a_terminal_starts_it() -> None:
    """preexec_fn for a command a test will interrupt: the interrupts at their defaults and unblocked, as a shell
    starts a command, whatever the test worker was left with (a child started with SIGINT ignored keeps it so:
    Python never raises KeyboardInterrupt there)."""
    for sig in INTERRUPTS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)


@pytest.fixture(autouse=True)
def _interrupts_left_as_found(request):
    """A test (or a library it runs in this worker) that leaves an interrupt ignored, handled or blocked hands that
    to every process a later test starts: put back, and said in a warning with the test's name."""
    handlers, ignored = {sig: signal.getsignal(sig) for sig in INTERRUPTS}, ignored_by_the_kernel()
    yield
    changed = {sig.name for sig in INTERRUPTS if signal.getsignal(sig) != handlers[sig]}
    changed |= {signal.Signals(sig).name for sig in ignored_by_the_kernel() ^ ignored}
    blocked = [sig.name for sig in signal.pthread_sigmask(signal.SIG_BLOCK, []) if sig in INTERRUPTS]
    if changed or blocked:
        for sig, handler in handlers.items():
            if handler is not None:  # None: installed outside Python, which cannot put it back; the warning says it
                signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)
        warnings.warn(f"{request.node.nodeid} left {sorted(changed)} changed and {blocked} blocked: put back")


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """Generated data sets are made once here and shared by every test and subprocess (and both xdist
    workers: the data root's build lock keeps two builders of one data set apart)."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = tmp_path_factory.getbasetemp().parent / "data"
        root.mkdir(exist_ok=True)
    else:
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


def wait_until_a_job_measures(proc: subprocess.Popen, store: str, finished: int = 1, timeout: float = 300) -> None:
    """Return once ``finished`` jobs of the sweep ``proc`` runs are FINISHED in ``store`` and the next one's MLflow
    run is open (RUNNING): a signal sent then lands in a job that measures, not between jobs (Hydra's own work
    between two jobs takes from 0.2 s to seconds, with the host's load)."""
    import time

    from loaderexp.track.stores import client

    deadline = time.time() + timeout
    while True:
        if proc.poll() is not None:
            said = proc.stderr.read()[-2000:] if proc.stderr else ""
            raise AssertionError(f"the sweep ended (exit {proc.returncode}) before a job measured: {said}")
        assert time.time() < deadline, "no job measured in time"
        # Opened as loaderexp opens it (under the store's lock): a client opened while the sweep creates the file
        # would run MLflow's schema migrations on it at the same time.
        experiment = client(store).get_experiment_by_name("loaderexp") \
            if os.path.exists(store.removeprefix("sqlite:///")) else None
        if experiment is not None:
            jobs = [r for r in client(store).search_runs([experiment.experiment_id])
                    if r.data.tags.get("mlflow.parentRunId")]
            statuses = [r.info.status for r in jobs]
            if statuses.count("FINISHED") >= finished and "RUNNING" in statuses:
                time.sleep(0.3)  # into its measurement
                return
        time.sleep(0.2)
