"""An interrupt that lands inside a call to the tracking store is held until the call ends (loaderexp/execute/interrupts.py).

Without it a Ctrl-C raised inside SQLAlchemy, halfway through MLflow's log_batch, left the sqlite store locked:
the KILLED mark written while the interrupt was handled waited out the busy timeout (20 s) and failed, and a
sweep stopped with Ctrl-C hung in its last writes."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

import pytest

from loaderexp.execute.interrupts import INTERRUPTS, HeldCalls, interrupts_held
from loaderexp.track.stores import client


@contextmanager
def ctrl_c_raises():
    """SIGINT as Python starts it (KeyboardInterrupt), whatever the test worker set."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_interrupt_inside_the_block_is_raised_after_it():
    done = []
    with ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler has run: Python runs it between bytecodes
            done.append("the rest of the block")
    assert done == ["the rest of the block"]
    assert signal.getsignal(signal.SIGTERM) is not None


def test_a_second_interrupt_is_raised_at_once():
    reached = []
    with ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            reached.append("after the second")
    assert reached == []


def test_handlers_are_put_back_and_an_ignored_signal_stays_ignored():
    with ctrl_c_raises():
        before = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
        hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            with interrupts_held():
                assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
                assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
                os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing is held, nothing raised
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        finally:
            signal.signal(signal.SIGHUP, hup)
        assert {sig: signal.getsignal(sig) for sig in before} == before


def test_outside_the_main_thread_nothing_is_changed():
    seen = []

    def call():
        with interrupts_held():
            seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert seen == [before]


def test_held_calls_hold_each_method_and_pass_attributes():
    class Store:
        name = "store"

        def write(self, value):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            self.written = value
            return value

    store = Store()
    held = HeldCalls(store)
    assert held.name == "store"
    with ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
        held.write(3)
    assert store.written == 3


@pytest.mark.parametrize("at", range(1, 9))
def test_ctrl_c_inside_sqlalchemy_during_a_batch_leaves_the_store_usable(tmp_path, at, monkeypatch):
    """A SIGINT sent from inside SQLAlchemy at its ``at``-th result of a job-sized log_batch (the 4th left the
    store locked before the interrupt was held): the batch is whole, and the KILLED mark written while the
    interrupt is handled lands at once."""
    from mlflow.entities import Metric, Param, RunTag
    from sqlalchemy.engine import cursor

    store = client(f"sqlite:///{tmp_path}/mlflow.db")
    run_id = store.create_run(store.create_experiment("held")).info.run_id
    results = [0]
    setup = cursor.CursorResult.__init__

    def interrupting(self, *args, **kwargs):
        results[0] += 1
        if results[0] == at:
            os.kill(os.getpid(), signal.SIGINT)
        return setup(self, *args, **kwargs)

    monkeypatch.setattr(cursor.CursorResult, "__init__", interrupting)
    with ctrl_c_raises():
        try:
            store.log_batch(run_id, metrics=[Metric(f"m{i}", 1.0, 0, 0) for i in range(60)],
                            params=[Param(f"p{i}", "1") for i in range(60)], tags=[RunTag(f"t{i}", "v") for i in range(20)])
        except KeyboardInterrupt:
            started = time.monotonic()
            store.set_terminated(run_id, status="KILLED")
            assert time.monotonic() - started < 10  # the busy timeout is 20 s
        else:
            pytest.fail("the interrupt was lost")
    monkeypatch.undo()
    run = store.get_run(run_id)
    assert run.info.status == "KILLED"
    assert len(run.data.params) == 60 and len(run.data.metrics) == 60
