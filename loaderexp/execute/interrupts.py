"""Work that an interrupt must not cut in half: held until it ends, then raised as it would have been.

A KeyboardInterrupt raised inside SQLAlchemy, halfway through an MLflow call on a sqlite store, can
leave that session's statement open and the database locked: every later write (the job's run
marked KILLED, the sweep's parent closed) then waits out sqlite's busy timeout and MLflow's retries,
and a sweep stopped with Ctrl-C hangs instead of ending.  One raised inside the finalizers that run
as a dataset's process is let go is swallowed (Python ignores exceptions there): the Ctrl-C is lost.
So an interrupt (SIGINT, SIGTERM, SIGHUP) that arrives during such work is held until it ends; a
second one is raised at once, so that a store that does not answer can still be left.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _deliver(signum: int, handler: Any) -> None:
    """What the signal would have done had it not been held: the handler's call, or the default action."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)


@contextmanager
def interrupts_held(work: str = "the write to the tracking store") -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for the block (``work``, as said to the user); deliver the first one
    after it.  Signals reach only the main thread's handlers, so elsewhere this does nothing; an ignored
    signal stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous: dict[int, Any] = {}

    def hold(signum: int, frame: Any) -> None:
        if held:  # asked twice: now, even mid-write
            _deliver(signum, previous[signum])
            return
        held.append(signum)
        os.write(2, f"loaderexp: stopping once {work} ends (again to stop at once)\n".encode())

    for sig in INTERRUPTS:
        handler = signal.getsignal(sig)
        if handler not in (signal.SIG_IGN, None):
            previous[sig] = signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            _deliver(held[0], previous[held[0]])


def held_call(method: Callable) -> Callable:
    """``method`` with interrupts held while it runs."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with interrupts_held():
            return method(*args, **kwargs)

    return call


class HeldCalls:
    """A store's handle (an ``MlflowClient``) whose every method call ends before an interrupt
    is raised (:func:`interrupts_held`)."""

    def __init__(self, handle: Any):
        self._handle = handle

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._handle, name)
        return held_call(value) if callable(value) else value
