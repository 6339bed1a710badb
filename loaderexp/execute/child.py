"""Each job's measurement in a child process that can be killed.

A worker stuck in C code, a segfault in the main loading process or a runaway job must end one
run, not the sweep.  The child is forked from a forkserver that preloaded loaderexp and torch but
never touched CUDA, so starting it costs tens of milliseconds and CUDA works inside it.  Progress
and the result come back over a pipe; past the job's time limit, or on Ctrl-C, the child and its
DataLoader workers are killed.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from typing import Any, Callable, Mapping, Optional

import psutil

from loaderexp.execute.faults import describe_exit

_context: Optional[Any] = None


class MeasurementError(RuntimeError):
    """The measurement failed in the child; ``kind`` is the original exception's class name."""

    def __init__(self, kind: str, message: str, details: str = ""):
        super().__init__(message)
        self.kind = kind
        self.details = details


def _mp_context():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["loaderexp.execute.job"])
    return _context


def _child(cfg: Mapping[str, Any], conn) -> None:
    # A forkserver child inherits "forkserver" as its default start method, which would make the
    # DataLoader's workers children of the server, not of this process: their deaths (SIGCHLD)
    # would go unseen. Back to the platform default, as in a plain `python -m loaderexp`.
    multiprocessing.set_start_method(None, force=True)
    try:
        from loaderexp.config import apply_python_path
        from loaderexp.execute.job import measure_job

        apply_python_path(cfg)  # the forkserver started before this job's python_path was known
        last = [0.0]

        def progress(done: int, total: Optional[int]) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.1:
                conn.send(("progress", done, total))
                last[0] = now

        conn.send(("done", measure_job(cfg, on_batch=progress)))
    except BaseException as error:  # noqa: BLE001 - everything goes back to the parent as data
        conn.send(("error", type(error).__name__, str(error), traceback.format_exc(limit=20)))
    finally:
        conn.close()


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (its DataLoader workers), and reap them."""
    try:
        root = psutil.Process(pid)
        family = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


def measure_in_child(
    cfg: Mapping[str, Any],
    limit_s: float,
    on_batch: Optional[Callable[[int, Optional[int]], None]] = None,
):
    """``measure_job(cfg)`` in a killable child; raises MeasurementError on failure, hang or crash."""
    ctx = _mp_context()
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(dict(cfg), sender), name="loaderexp-measure")
    child.start()
    sender.close()  # the child holds the only writer: EOF means it is gone
    deadline = time.monotonic() + limit_s
    try:
        while True:
            if receiver.poll(0.2):
                try:
                    message = receiver.recv()
                except EOFError:
                    break
                if message[0] == "progress":
                    if on_batch is not None:
                        on_batch(message[1], message[2])
                    continue
                child.join(30)
                if message[0] == "done":
                    return message[1]
                raise MeasurementError(message[1], message[2], message[3])
            if not child.is_alive() and not receiver.poll(0):
                break
            if time.monotonic() > deadline:
                kill_tree(child.pid)
                raise MeasurementError(
                    "Timeout", f"the job passed its wall-clock limit bench.job_timeout_s={limit_s:g} and was killed"
                )
        child.join(10)
        raise MeasurementError("Crash", f"the measuring process {describe_exit(child.exitcode)} without a result")
    finally:
        if child.is_alive():
            kill_tree(child.pid)
        receiver.close()
