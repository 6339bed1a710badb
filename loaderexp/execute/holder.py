"""The dataset holder: a process that builds a sweep's dataset once and forks each job's measuring process.

A naive loop builds its dataset once and times every setting on it; loaderexp measures every job
in a fresh, killable process, and used to build the dataset again in each (CIFAR-10: 0.7 s a job,
a fifth of a short job).  The holder keeps both: it is started from the forkserver, builds the
dataset and transform of the first job, and for every job with the same ones forks a measuring
process that finds them ready.  A fork starts from the holder's pristine copy, so nothing a job
does to its dataset (caches filled, files opened, a stream consumed) reaches the next job.  The
job's memory counts the holder's share of the pages they have in common (``forked_from``).

The messages on the pipe between them are typed (:mod:`.messages`).
"""

from __future__ import annotations

import json
import os
import sys
from multiprocessing import util
from typing import Any, Callable, Optional

from loaderexp.config.compose import plain
from loaderexp.config.schema import Config
from loaderexp.execute.messages import Done, Exited, Planned, Profiling, RunJob, Started, failure
from loaderexp.execute.interrupts import interrupts_held


def dataset_key(spec: Config) -> str:
    """What the holder builds from (the dataset node, its python_path included, the transform and the
    seed): a job reuses the holder only when all of these are the same."""
    return json.dumps([plain(spec.dataset), plain(spec.transform), spec.bench.seed], sort_keys=True, default=str)


class Holder:
    """The main process's handle on one holder process."""

    def __init__(self, ctx: Any, spec: Config):
        self.key = dataset_key(spec)
        self.conn, child_end = ctx.Pipe(duplex=True)
        self.batches = ctx.RawValue("q", 0)  # written by the measuring process per batch, read here
        self.process = ctx.Process(target=_holder_main, args=(spec, child_end, self.batches),
                                   name="loaderexp-dataset")
        _live.append(self)  # first: a start that an interrupt cuts short is still stopped at exit
        self.process.start()
        child_end.close()

    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self) -> None:
        self.conn.close()  # the holder's recv() ends: it returns
        if self.process.pid is not None:  # else its start never returned: the closed pipe ends it
            self.process.join(5)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
        if self in _live:
            _live.remove(self)


_current: Optional[Holder] = None
# Every holder started and not yet stopped.  The current one is not enough: an interrupt inside a stop (or a
# start) left a holder that was no longer current with its pipe open, and at exit multiprocessing joined it
# forever (a sweep stopped with Ctrl-C between two datasets hung after its summary).
_live: list[Holder] = []


def holder_for(ctx: Any, spec: Config) -> Holder:
    """The holder of this job's dataset: the last job's when it is the same, else a new one."""
    global _current
    if _current is not None and (_current.key != dataset_key(spec) or not _current.alive()):
        discard()
    if _current is None:
        _current = Holder(ctx, spec)
    return _current


def discard() -> None:
    """Stop the current holder, and any other still alive (after a failed job, for another dataset, at exit).
    An interrupt waits for it (seconds at most): cut short, a holder's pipe stayed open, and the finalizers
    of its pipe and shared counter, which run here, would swallow the KeyboardInterrupt."""
    with interrupts_held("letting the dataset's process go"):
        _stop_live()


def _stop_live() -> None:
    global _current
    _current = None
    for holder in list(_live):
        holder.stop()


# At exit multiprocessing joins its children, the holder among them, which ends only once its pipe closes: the
# holder is stopped first.  A finalizer with a priority runs inside multiprocessing's exit handler before that join,
# whatever the order the modules were imported in (an atexit hook runs after it when multiprocessing.util is first
# imported after this module, and the interpreter then waited forever at exit).
util.Finalize(None, discard, exitpriority=100)


def _holder_main(spec: Config, conn: Any, batches: Any) -> None:
    import torch

    from loaderexp.config import apply_python_path, check_targets
    from loaderexp.execute.job import configured_dataset

    try:
        apply_python_path(spec)  # the forkserver started before this job's python_path was known
        check_targets(spec)
        threads = torch.get_num_threads()
        # One thread while building: an OpenMP pool started here would not survive the forks.
        torch.set_num_threads(1)
        built = configured_dataset(spec)
    except BaseException as error:  # noqa: BLE001 - the job's error, as the measuring process sends it
        conn.send(failure(error))
        conn.close()
        return
    try:
        while True:
            try:
                job: RunJob = conn.recv()
            except (EOFError, OSError):  # the app is done with this dataset
                return
            batches.value = 0
            pid = os.fork()
            if pid == 0:
                _measure(job, conn, batches, built, threads)  # never returns
            conn.send(Started(pid))
            _, status = os.waitpid(pid, 0)
            conn.send(Exited(pid, os.waitstatus_to_exitcode(status)))
    except (KeyboardInterrupt, BrokenPipeError):  # Ctrl-C reaches the whole group; the app records it
        return


def _measure(job: RunJob, conn: Any, batches: Any, built: Any, threads: int) -> None:
    """The measuring process: one job on the holder's dataset, its result down the pipe, then exit."""
    spec, code = job.spec, 0
    try:
        import multiprocessing

        import psutil
        import torch

        from loaderexp.config import apply_python_path
        from loaderexp.execute.ranks import measure_on_node

        apply_python_path(spec)  # this job's step may live elsewhere than the first job's
        torch.set_num_threads(threads)
        multiprocessing.set_start_method(worker_start_method(), force=True)
        holder = psutil.Process(os.getppid())
        forked_from = (holder.pid, holder.ppid())  # the holder, and the forkserver it came from
        beat = heartbeat(batches, conn)
        phase = lambda started: conn.send(Profiling(started))  # noqa: E731 - the pass sends no batches
        if job.profile_only:
            from loaderexp.execute.profiling import profile_for

            phase(True)
            measured = profile_for(spec, built.dataset)
        elif job.paired:
            from loaderexp.execute.paired import compare

            measured = compare([spec, *job.paired], job.paired_rounds, job.paired_window_s, on_batch=beat,
                               built=built)
        else:
            measured = measure_on_node(spec, on_batch=beat, built=built, forked_from=forked_from,
                                       profile=job.profile, on_profile=phase)
        conn.send(Done(measured))
    except BaseException as error:  # noqa: BLE001 - everything goes back to the parent as data
        code = 1
        try:
            conn.send(failure(error))
        except BaseException:  # noqa: BLE001 - the pipe is gone: the exit status says it
            pass
    finally:
        os._exit(code)  # never back into the holder's loop, nor its atexit handlers


def worker_start_method() -> str:
    """How the DataLoader's workers start when ``loader.multiprocessing_context`` is null: fork on
    Linux, so they are this process's children (their deaths are seen, the resource monitor finds
    them, a kill takes them along); spawn where fork is unsafe.  Asked for explicitly: the
    interpreter's default is forkserver from Python 3.14, and a forkserver child inherits it."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def heartbeat(batches: Any, conn: Any) -> Callable[[int, Optional[int]], None]:
    """What the measured loop calls after each batch in a real job: one store into shared memory
    (and, once per job, the planned total down the pipe).  benchmarks/harness_overhead.py
    measures loaderexp with this in its loop."""
    planned: list[Optional[int]] = [None]

    def beat(done: int, total: Optional[int]) -> None:
        batches.value = done
        if total != planned[0]:
            planned[0] = total
            conn.send(Planned(total))

    return beat
