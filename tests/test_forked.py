"""An answer from a fork: the value comes back, nothing the copy does stays here, and every way of not answering is
one error that says which (the profiling pass and the heap passes go on without it, saying why)."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import pytest

from loaderexp.config import compose, composed_spec
from loaderexp.execute import profiling
from loaderexp.harness import forked
from loaderexp.harness.forked import ForkFailed, answer_from_fork, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="fork only (Linux, macOS)")
STATE = {"touched": False}


def _touch_and_answer() -> tuple[int, bool]:
    STATE["touched"] = True
    return os.getpid(), STATE["touched"]


def test_the_answer_comes_from_another_process_and_what_it_changed_stays_there():
    pid, touched = answer_from_fork(_touch_and_answer, 30)
    assert pid != os.getpid() and touched
    assert STATE["touched"] is False


def test_setup_runs_in_the_copy_before_the_function():
    assert answer_from_fork(lambda: STATE["touched"], 30, setup=lambda: STATE.update(touched=True)) is True
    assert STATE["touched"] is False


def _fails(why: str, fn, limit_s: float = 30) -> ForkFailed:
    with pytest.raises(ForkFailed) as raised:
        answer_from_fork(fn, limit_s)
    assert raised.value.why == why
    return raised.value


def test_an_exception_comes_back_as_its_words():
    def boom() -> None:
        raise ValueError("no such stage")

    assert str(_fails("raised", boom)) == "ValueError: no such stage"


def test_an_answer_that_cannot_be_sent_back_is_said():
    assert "could not be sent back" in str(_fails("raised", lambda: (lambda: None)))  # a lambda does not pickle


def test_a_copy_that_dies_is_said_with_how():
    assert "killed by signal SIGKILL" in str(_fails("died", lambda: os.kill(os.getpid(), signal.SIGKILL)))
    assert "exited with status 3" in str(_fails("died", lambda: os._exit(3)))


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """The process ended (a zombie nobody reaped yet counts: it runs nothing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return True
            os.kill(pid, 0)
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def _sleeper(pid_file: Path):
    def sleep() -> None:
        pid_file.write_text(str(os.getpid()))
        time.sleep(120)

    return sleep


def test_a_copy_past_its_limit_is_killed(tmp_path):
    pid_file = tmp_path / "pid"
    assert "no answer in" in str(_fails("timeout", _sleeper(pid_file), limit_s=1.0))
    assert _gone(int(pid_file.read_text()))


def test_a_copy_past_its_limit_gets_no_grace(tmp_path, monkeypatch):
    """Killed at its limit, not after the wait an answered copy gets to exit (made 600 s here: the old code waited
    it out before the kill)."""
    monkeypatch.setattr(forked, "JOIN_S", 600.0)
    started = time.monotonic()
    _fails("timeout", _sleeper(tmp_path / "pid"), limit_s=0.5)
    assert time.monotonic() - started < 60


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux only (prctl's parent-death signal)")
def test_a_copy_dies_with_the_process_that_forked_it(tmp_path):
    pid_file = tmp_path / "pid"
    middle = os.fork()
    if middle == 0:  # a profile's process, killed for its time while its heap pass runs
        try:
            answer_from_fork(_sleeper(pid_file), 120)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the copy never started"
        time.sleep(0.05)
    os.kill(middle, signal.SIGKILL)
    os.waitpid(middle, 0)
    assert _gone(int(pid_file.read_text()))


@pytest.mark.parametrize("ending, said", [
    (lambda: (_ for _ in ()).throw(RuntimeError("no decoder")), "failed (RuntimeError: no decoder)"),
    (lambda: os._exit(9), "failed (its process ended without an answer: it exited with status 9)"),
])
def test_a_profile_that_does_not_answer_leaves_the_job_without_one_saying_why(monkeypatch, caplog, ending, said):
    monkeypatch.setattr(profiling, "_profile", lambda spec, dataset: ending())
    with caplog.at_level(logging.WARNING, logger="loaderexp"):
        assert profiling.profile_for(composed_spec(compose([])), dataset=None) is None
    assert f"the profiling pass {said}: no stage profile for this job" in caplog.text
