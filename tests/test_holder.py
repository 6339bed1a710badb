"""The dataset holder: built once for the jobs that share a dataset, found as built by every job."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from loaderexp.runner import JobContext, run
from tests.conftest import REPO, TINY

STATEFUL = "tests.faulty.Stateful"


def test_jobs_on_one_dataset_build_it_once_and_each_finds_it_as_built(compose_cfg, tmp_path):
    log = tmp_path / "dataset.log"
    # No profiling pass: its own forks read the dataset too (a copy of it, which the measurement never sees).
    base = [*TINY, "tracking=none", f"dataset._target_={STATEFUL}", f"+dataset.python_path={REPO}",
            f"+dataset.log={log}", "bench.profile_s=0"]
    for index, workers in enumerate((0, 0, 1)):
        result = run(compose_cfg([*base, f"loader.num_workers={workers}"]), JobContext(output_dir=tmp_path / str(index)))
        assert result.status == "FINISHED", result.error
    lines = log.read_text().splitlines()
    assert len([line for line in lines if line.startswith("built")]) == 1
    reads = [line for line in lines if line.startswith("read")]
    # Each job's measuring process (or, with workers, each worker and the pre-flight probe) read
    # from a dataset that had served nothing: what job 1 did to it did not reach job 2.
    assert len(reads) >= 3 and all(line.endswith("after 0") for line in reads)
    assert len({line.split()[1] for line in reads}) == len(reads)

    # Another dataset (here one more sample) is another holder.
    result = run(compose_cfg([*base, "dataset.num_samples=300"]), JobContext(output_dir=tmp_path / "other"))
    assert result.status == "FINISHED", result.error
    assert len([line for line in log.read_text().splitlines() if line.startswith("built")]) == 2


@pytest.mark.slow
def test_a_job_that_crashes_its_process_leaves_the_next_job_a_fresh_holder(compose_cfg, tmp_path):
    faulty = [*TINY, "tracking=none", f"+dataset.python_path={REPO}"]
    crashed = run(compose_cfg([*faulty, "dataset._target_=tests.faulty.Segfault"]), JobContext(output_dir=tmp_path / "a"))
    assert crashed.status == "FAILED" and "SIGSEGV" in crashed.error
    fine = run(compose_cfg([*faulty]), JobContext(output_dir=tmp_path / "b"))
    assert fine.status == "FINISHED", fine.error


EXITS_WITH_A_HOLDER = """
import sys
from loaderexp.execute.holder import holder_for  # before multiprocessing.util: the order a script may import in
from loaderexp.execute.child import _mp_context
from loaderexp.config import compose, composed_spec

holder = holder_for(_mp_context(), composed_spec(compose(sys.argv[1:])))
assert holder.alive()
print("holder started", flush=True)
"""


def test_a_process_that_leaves_a_holder_running_exits(tmp_path):
    """The holder ends before multiprocessing joins it at exit, whatever the import order was."""
    done = subprocess.run([sys.executable, "-c", EXITS_WITH_A_HOLDER, *TINY, "tracking=none"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "holder started" in done.stdout


EXITS_AFTER_A_STOP_CUT_SHORT = """
import sys
from loaderexp.execute import holder as holders
from loaderexp.execute.child import _mp_context
from loaderexp.config import compose, composed_spec

first = holders.holder_for(_mp_context(), composed_spec(compose(sys.argv[1:])))
print("first holder", first.process.pid, flush=True)
stop = holders.Holder.stop

def cut_short(self):  # Ctrl-C lands in the stop, before the pipe is closed
    holders.Holder.stop = stop
    raise KeyboardInterrupt

holders.Holder.stop = cut_short
try:
    holders.holder_for(_mp_context(), composed_spec(compose([*sys.argv[1:], "dataset.num_samples=300"])))
except KeyboardInterrupt as interrupt:
    kept = interrupt  # as the app keeps it while it records the sweep: the old holder's handle stays referenced
    assert holders._current is None
print("interrupted", flush=True)
"""


def test_an_interrupt_inside_a_holders_stop_still_lets_the_process_exit(tmp_path):
    """Ctrl-C between two jobs on different datasets, inside the old holder's stop: that holder is no longer the
    current one, yet it is stopped at exit (it used to be joined forever: a stopped sweep hung after its summary)."""
    done = subprocess.run([sys.executable, "-c", EXITS_AFTER_A_STOP_CUT_SHORT, *TINY, "tracking=none"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "interrupted" in done.stdout
    pid = int(done.stdout.split("first holder")[1].split()[0])
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


LEAVES_AT_ONCE = """
import atexit, os, sys
atexit.register(lambda: print("teardown ran", flush=True))  # the interpreter's own exit work, registered first
import loaderexp.execute.server_exit
pid = os.fork()
if pid == 0:  # a child of the server exits its own way: the hook is inherited and stays quiet
    atexit.register(lambda: print("child's teardown ran", flush=True))
    sys.exit(0)
os.waitpid(pid, 0)
print("server leaving", end="")  # unflushed: the hook flushes it before it leaves
sys.exit(3)
"""


def test_the_measuring_server_leaves_without_its_teardown_and_its_children_keep_theirs():
    """The forkserver that imported torch ends in a moment once the sweep is gone, skipping the interpreter's
    teardown (1.0 s of holding the sweep's output pipe): its output flushed first, its exit status 0 (nothing
    reads it); a process it forked still exits as it would."""
    from multiprocessing import forkserver

    from loaderexp.execute import child

    child._mp_context()
    assert forkserver._forkserver._preload_modules[-1] == "loaderexp.execute.server_exit"  # last in: its hook first
    done = subprocess.run([sys.executable, "-c", LEAVES_AT_ONCE], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("child's teardown ran") == 1 and done.stdout.count("teardown ran") == 2
    assert done.stdout.endswith("server leaving")
