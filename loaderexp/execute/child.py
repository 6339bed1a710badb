"""Each job's measurement in a child process that can be killed.

A worker stuck in C code, a segfault in the main loading process or a runaway job must end one
run, not the sweep.  The child is forked by the dataset holder (:mod:`.holder`), itself started
from a forkserver that preloaded loaderexp and torch but never touched CUDA: starting a job costs
milliseconds, its dataset is built once for all the jobs that share it, and CUDA works inside it.

Inside the measured window the child does one thing per batch besides loading: it stores the
count of batches in a shared integer (no pipe message, no system call).  The parent reads it a few
times a second for the progress bar and to tell a stall: no batch for ``bench.stall_s``, or for
20x the longest gap between batches seen so far, whichever is longer.  The result comes back over
a pipe; past the job's time limit, on a stall, or on Ctrl-C the child and its DataLoader workers
are killed, and a stall is reported with what each of those processes was doing.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from typing import Any, Callable, Optional


from loaderexp.config.schema import Config
from loaderexp.data.locks import waits_of
from loaderexp.harness.forked import describe_exit
from loaderexp.execute.processes import kill_tree, process_states
from loaderexp.result.facts import HostFacts
from loaderexp.execute.messages import Done, Exited, Failed, Planned, Profiling, RunJob, Started

_context: Optional[Any] = None
POLL_S = 0.2
EXIT_WAIT_S = 30  # for the measuring process to end (its workers shut down) after its answer
STALL_GAPS = 20  # a stall is this many times the longest gap between batches seen so far
WINDOW_COST_S = 0.4  # a side-by-side window's start, warm-up and settling beyond its length (for the limit)
# The profiling pass runs several loops of about bench.profile_s each (worker start-ups among them) and delivers
# no batches: it may go on for bench.stall_s plus this many times bench.profile_s before it is a stall.
PROFILE_ALLOWANCE = 10


def profile_allowance(stall_s: float, profile_s: float) -> float:
    return stall_s + PROFILE_ALLOWANCE * profile_s


class MeasurementError(RuntimeError):
    """The measurement failed in the child; ``kind`` is the original exception's class name."""

    def __init__(self, kind: str, message: str, details: str = ""):
        super().__init__(message)
        self.kind = kind
        self.details = details


def _mp_context(preload: tuple[str, ...] = ()):
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["loaderexp.execute.job", *preload, "loaderexp.execute.server_exit"])
    return _context


def prestart(preload: tuple[str, ...] = ()) -> None:
    """Start the forkserver now: it imports torch, loaderexp and ``preload`` (seconds) in the
    background while Hydra composes and the sweep opens its MLflow run, instead of in every job."""
    from multiprocessing import forkserver

    _mp_context(preload)
    forkserver.ensure_running()


def target_modules(spec: Config) -> tuple[str, ...]:
    """loaderexp's own modules that the spec's ``_target_`` nodes name (CIFAR-10's pulls in
    torchvision.datasets, a second per job otherwise).  A user's module is not preloaded: what it
    opens at import would be shared by every job's process."""
    found = [node.target.rsplit(".", 1)[0] for node in (spec.dataset, spec.transform, spec.sampler)
             if (node.target or "").startswith("loaderexp.")]
    return tuple(dict.fromkeys(found))


def _host_child(conn) -> None:
    from loaderexp.execute.host import host_facts

    try:
        conn.send(host_facts())
    finally:
        conn.close()


@functools.lru_cache(maxsize=1)
def host_facts_isolated() -> "HostFacts":
    """:func:`~loaderexp.execute.host.host_facts` from a throwaway child of the forkserver, which has torch
    loaded already: the app never imports torch (seconds at start and again at exit), and CUDA is
    initialised only in that child, as in each measuring process."""
    ctx = _mp_context()
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_host_child, args=(sender,), name="loaderexp-host")
    child.start()
    sender.close()
    try:
        if not receiver.poll(120):
            raise MeasurementError("Stalled", "reading the host's facts (torch, CUDA) took over 120 s")
        return receiver.recv()
    except EOFError:
        child.join(10)
        raise MeasurementError("Crash", f"reading the host's facts: the process {describe_exit(child.exitcode)}")
    finally:
        child.join(10)
        receiver.close()


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


def measure_in_child(spec: Config, limit_s: float, on_batch: Optional[Callable[[int, Optional[int]], None]] = None,
                     profile: bool = False):
    """``measure_on_node(spec, profile=profile)`` in a killable process forked by the dataset holder
    (execute/holder.py); raises MeasurementError on failure, hang, stall or crash."""
    return _in_holder(RunJob(spec, profile), limit_s, on_batch)


def profile_in_child(spec: Config, limit_s: float):
    """Only the profiling pass, on the held dataset: a StageProfile, or None."""
    return _in_holder(RunJob(spec, profile_only=True), limit_s, None)


def compare_in_child(specs: list[Config], rounds: int, window_s: float,
                     on_batch: Optional[Callable[[int, Optional[int]], None]] = None):
    """``specs`` (one dataset) side by side in ``rounds`` interleaved rounds of ``window_s`` windows: PairedRates."""
    limit = max(specs[0].bench.job_timeout_s, 4 * (WINDOW_COST_S + window_s) * len(specs) * rounds)
    return _in_holder(RunJob(specs[0], paired=tuple(specs[1:]), paired_rounds=rounds, paired_window_s=window_s),
                      limit, on_batch)


def _in_holder(message: RunJob, limit_s: float, on_batch: Optional[Callable[[int, Optional[int]], None]]):
    from loaderexp.execute.holder import discard, holder_for

    spec = message.spec
    holder = holder_for(_mp_context(), spec)
    holder.conn.send(message)
    job = WatchedJob(holder, spec.bench.stall_s, limit_s, on_batch,
                     profile_allowance(spec.bench.stall_s, spec.bench.profile_s))
    try:
        return job.wait()
    finally:
        if not job.clean:  # killed, failed or interrupted: nothing of this job or its holder goes on
            if job.pid is not None:
                kill_tree(job.pid)
            discard()


class WatchedJob:
    """The app's side of one job in the holder: the messages it answers, its time limit and its stalls."""

    def __init__(self, holder: Any, stall_s: float, limit_s: float, on_batch: Optional[Callable],
                 profile_s: float = 0.0):
        self.holder, self.limit_s, self.on_batch = holder, limit_s, on_batch
        self.profile_s = profile_s  # how long the profiling pass may go without a batch
        self.profiling_since: Optional[float] = None
        started = time.monotonic()
        self.deadline = started + limit_s
        self.watch = StallWatch(stall_s, started)
        self.total: Optional[int] = None
        self.pid: Optional[int] = None
        self.outcome: Any = None  # the measurement, or the MeasurementError to raise
        self.finished = 0.0
        self.clean = False

    def wait(self) -> Any:
        conn = self.holder.conn
        while True:
            if conn.poll(POLL_S):
                try:
                    message = conn.recv()
                except EOFError:
                    break
                if self.take(message):
                    return self.outcome
            elif not self.holder.alive():
                break
            now = time.monotonic()
            if self.outcome is not None and now - self.finished > EXIT_WAIT_S:  # it answered but will not end
                return self.answer()  # killed on the way out, with its holder
            self.check(now)
        self.holder.process.join(10)
        raise MeasurementError("Crash", f"the process holding the dataset "
                               f"{describe_exit(self.holder.process.exitcode)} without a result")

    def take(self, message: Any) -> bool:
        """Note one message; True once the measuring process and its workers are gone with a result."""
        if isinstance(message, Started):
            # The dataset is built (the holder forks the measuring process from it): stalls count from here.
            self.pid = message.pid
            self.watch = StallWatch(self.watch.stall_s, time.monotonic())
        elif isinstance(message, Planned):
            self.total = message.total
        elif isinstance(message, Profiling):  # its loops deliver no batches: the stall clock waits for its end
            now = time.monotonic()
            self.profiling_since = now if message.started else None
            self.watch = StallWatch(self.watch.stall_s, now)
        elif isinstance(message, Done):
            self.outcome, self.finished = message.measurement, time.monotonic()
        elif isinstance(message, Failed):
            self.outcome = MeasurementError(message.kind, message.message, message.details)
            self.finished = time.monotonic()
            if self.pid is None:  # the holder could not build the dataset, and has ended
                raise self.outcome
        elif isinstance(message, Exited):
            if self.outcome is None:
                raise MeasurementError("Crash", f"the measuring process {describe_exit(message.status)} "
                                       "without a result")
            self.clean = message.status == 0 and not isinstance(self.outcome, MeasurementError)
            self.answer()
            return True
        return False

    def answer(self) -> Any:
        if isinstance(self.outcome, MeasurementError):
            raise self.outcome
        return self.outcome

    def check(self, now: float) -> None:
        """The progress bar, then the job's limits: its wall-clock time and a stall."""
        watch = self.watch
        watch.see(self.holder.batches.value, now)
        if self.on_batch is not None and watch.count:
            self.on_batch(watch.count, self.total)
        if now > self.deadline:
            if self.pid is None:
                waits = waits_of([self.holder.process.pid])  # the holder builds the dataset
                why = (f"waiting for the build lock {waits[0]}" if waits
                       else "its constructor, or generating its files")
                raise MeasurementError("Timeout", f"the dataset was still being built after bench.job_timeout_s="
                                       f"{self.limit_s:g} s ({why}); killed")
            raise MeasurementError(
                "Timeout", f"the job passed its wall-clock limit bench.job_timeout_s={self.limit_s:g} and was killed")
        if self.profiling_since is not None:
            if now - self.profiling_since > self.profile_s:
                raise MeasurementError("Stalled", f"no batch for {now - self.profiling_since:.0f} s in the profiling "
                                       f"pass (limit {self.profile_s:.0f} s: bench.stall_s={self.watch.stall_s:g} "
                                       f"plus {PROFILE_ALLOWANCE}x bench.profile_s); killed; "
                                       f"{process_states(self.pid)}")
            return
        if self.pid is not None and watch.stalled(now):  # building the dataset is not a stall
            states = process_states(self.pid if self.pid is not None else self.holder.process.pid)
            raise MeasurementError(
                "Stalled",
                f"no batch for {now - watch.changed:.0f} s ({watch.count} measured so far; limit "
                f"{watch.limit:.0f} s: bench.stall_s={watch.stall_s:g}, or {STALL_GAPS}x the longest gap "
                f"between batches, {watch.longest_gap:.2f} s); killed; {states}",
            )
