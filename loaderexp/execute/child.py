"""Each job's measurement in a child process that can be killed.

A worker stuck in C code, a segfault in the main loading process or a runaway job must end one
run, not the sweep.  The child is forked from a forkserver that preloaded loaderexp and torch but
never touched CUDA, so starting it costs tens of milliseconds and CUDA works inside it.

Inside the measured window the child does one thing per batch besides loading: it stores the
count of batches in a shared integer (no pipe message, no system call).  The parent reads it a few
times a second for the progress bar and to tell a stall: no batch for ``bench.stall_s``, or for
20x the longest gap between batches seen so far, whichever is longer.  The result comes back over
a pipe; past the job's time limit, on a stall, or on Ctrl-C the child and its DataLoader workers
are killed, and a stall is reported with what each of those processes was doing.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
import traceback
from typing import Any, Callable, Mapping, Optional

import psutil
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from loaderexp.execute.faults import describe_exit

_context: Optional[Any] = None
POLL_S = 0.2
STALL_GAPS = 20  # a stall is this many times the longest gap between batches seen so far


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


def prestart() -> None:
    """Start the forkserver now: it imports torch and loaderexp (seconds) in the background while
    Hydra composes and the sweep opens its MLflow run, instead of during the first job."""
    from multiprocessing import forkserver

    _mp_context()
    forkserver.ensure_running()


class PrestartCallback(Callback):
    """Hydra callback (conf/hydra/default.yaml): the measuring processes' server starts with the app."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.bench.isolate:
            prestart()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.on_run_start(config)


def worker_start_method() -> str:
    """How the DataLoader's workers start when ``loader.multiprocessing_context`` is null: fork on
    Linux, so they are this process's children (their deaths are seen, the resource monitor finds
    them, a kill takes them along); spawn where fork is unsafe.  Asked for explicitly: the
    interpreter's default is forkserver from Python 3.14, and a forkserver child inherits it."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def _child(cfg: Mapping[str, Any], conn, batches) -> None:
    multiprocessing.set_start_method(worker_start_method(), force=True)
    try:
        from loaderexp.config import apply_python_path
        from loaderexp.execute.job import measure_job

        apply_python_path(cfg)  # the forkserver started before this job's python_path was known
        conn.send(("done", measure_job(cfg, on_batch=heartbeat(batches, conn))))
    except BaseException as error:  # noqa: BLE001 - everything goes back to the parent as data
        conn.send(("error", type(error).__name__, str(error), traceback.format_exc(limit=20)))
    finally:
        conn.close()


def heartbeat(batches: Any, conn: Any) -> Callable[[int, Optional[int]], None]:
    """What the measured loop calls after each batch in a real job: one store into shared memory
    (and, once per job, the planned total down the pipe).  benchmarks/harness_overhead.py
    measures loaderexp with this in its loop."""
    planned: list[Optional[int]] = [None]

    def beat(done: int, total: Optional[int]) -> None:
        batches.value = done
        if total != planned[0]:
            planned[0] = total
            conn.send(("total", total))

    return beat


def family(pid: int) -> list[psutil.Process]:
    """A process and every descendant (its DataLoader workers), the process first; [] once it is gone."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (its DataLoader workers), and reap them."""
    processes = family(pid)
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=10)


def process_states(pid: int) -> str:
    """What the measuring process and each of its workers is doing: state, kernel wait, CPU time."""
    processes = family(pid)
    if not processes:
        return "the measuring process is gone"
    described = []
    for process in processes:
        try:
            role = "measuring process" if process.pid == pid else "worker"
            times = process.cpu_times()
            text = f"{role} {process.pid} {process.status()}"
            try:
                with open(f"/proc/{process.pid}/wchan") as f:
                    wchan = f.read().strip()
                text += f" in {wchan}" if wchan and wchan != "0" else ""
            except OSError:
                pass
            described.append(f"{text}, {times.user + times.system:.1f} s CPU in all")
        except psutil.NoSuchProcess:
            continue
    return "; ".join(described)


class StallWatch:
    """When the batch count last moved, and the longest gap between two moves."""

    def __init__(self, stall_s: float, now: float):
        self.stall_s = stall_s
        self.count = 0
        self.changed = now
        self.longest_gap = 0.0

    def see(self, count: int, now: float) -> None:
        if count != self.count:
            self.longest_gap = max(self.longest_gap, (now - self.changed) / max(count - self.count, 1))
            self.count, self.changed = count, now

    @property
    def limit(self) -> float:
        return max(self.stall_s, STALL_GAPS * self.longest_gap)

    def stalled(self, now: float) -> bool:
        return now - self.changed > self.limit


def measure_in_child(
    cfg: Mapping[str, Any],
    limit_s: float,
    on_batch: Optional[Callable[[int, Optional[int]], None]] = None,
):
    """``measure_job(cfg)`` in a killable child; raises MeasurementError on failure, hang, stall or crash."""
    ctx = _mp_context()
    receiver, sender = ctx.Pipe(duplex=False)
    batches = ctx.RawValue("q", 0)  # written by the child per batch, read here
    child = ctx.Process(target=_child, args=(dict(cfg), sender, batches), name="loaderexp-measure")
    child.start()
    sender.close()  # the child holds the only writer: EOF means it is gone
    started = time.monotonic()
    deadline = started + limit_s
    watch = StallWatch(cfg["bench"]["stall_s"], started)
    total: Optional[int] = None
    try:
        while True:
            if receiver.poll(POLL_S):
                try:
                    message = receiver.recv()
                except EOFError:
                    break
                if message[0] == "total":
                    total = message[1]
                else:
                    child.join(30)
                    if message[0] == "done":
                        return message[1]
                    raise MeasurementError(message[1], message[2], message[3])
            elif not child.is_alive():
                break
            now = time.monotonic()
            watch.see(batches.value, now)
            if on_batch is not None and watch.count:
                on_batch(watch.count, total)
            if now > deadline:
                kill_tree(child.pid)
                raise MeasurementError(
                    "Timeout", f"the job passed its wall-clock limit bench.job_timeout_s={limit_s:g} and was killed"
                )
            if watch.stalled(now):
                states = process_states(child.pid)
                kill_tree(child.pid)
                raise MeasurementError(
                    "Stalled",
                    f"no batch for {now - watch.changed:.0f} s ({watch.count} measured so far; limit "
                    f"{watch.limit:.0f} s: bench.stall_s={watch.stall_s:g}, or {STALL_GAPS}x the longest gap "
                    f"between batches, {watch.longest_gap:.2f} s); killed; {states}",
                )
        child.join(10)
        raise MeasurementError("Crash", f"the measuring process {describe_exit(child.exitcode)} without a result")
    finally:
        if child.is_alive():
            kill_tree(child.pid)
        receiver.close()
