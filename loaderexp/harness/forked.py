"""An answer from a fork: ``fn()`` run in a forked copy of this process, its value sent back over a pipe.

What the copy reads, caches, draws or sets stays in it: a profiling pass must not warm the dataset, grow the heap or
move the random state that the measurement after it sees, and a pass on a heap with other allocator settings must
not leave them behind.  The copy ends with ``os._exit`` (none of this process's exit handlers run twice) and, on
Linux, dies with this process: a job killed for its time takes it along.  Every way of not answering is one
:class:`ForkFailed` whose ``why`` says which, so a caller can go on without the answer and say why.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from typing import Any, Callable, Optional, TypeVar

T = TypeVar("T")
PR_SET_PDEATHSIG = 1
JOIN_S = 5.0  # for the copy to end after its answer, or once killed


class ForkFailed(RuntimeError):
    """No answer came back.  ``why``: "timeout" (none within the limit; the copy is killed), "died" (it ended
    without one: a crash, a signal, an answer that could not be sent) or "raised" (``fn`` raised: its words)."""

    def __init__(self, why: str, message: str):
        super().__init__(message)
        self.why = why


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def answer_from_fork(fn: Callable[[], T], limit_s: float, name: str = "loaderexp-fork",
                     setup: Optional[Callable[[], None]] = None) -> T:
    """``fn()`` in a fork (``setup()`` first, there): its value, or :class:`ForkFailed`."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(fn, setup, sender), name=name)
    child.start()
    sender.close()
    answered = False
    try:
        if not receiver.poll(limit_s):
            raise ForkFailed("timeout", f"no answer in {limit_s:.0f} s")
        outcome, value = receiver.recv()
        answered = True
    except EOFError:
        child.join(JOIN_S)
        raise ForkFailed("died", f"its process ended without an answer: it {describe_exit(child.exitcode)}") from None
    finally:
        receiver.close()
        if answered:  # it exits once its answer is sent; one past its limit is killed at once
            child.join(JOIN_S)
        if child.is_alive():
            child.kill()
        child.join(JOIN_S)
    if outcome == "raised":
        raise ForkFailed("raised", value)
    return value


def describe_exit(code: Optional[int]) -> str:
    """A process exit code in words: ``killed by signal SIGSEGV (Segmentation fault)``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"killed by signal {-code}"
        return f"killed by signal {sig.name} ({signal.strsignal(sig)})"
    return f"exited with status {code}"


def _die_with_parent() -> None:
    """Linux: the kernel kills this copy when the process that forked it ends (elsewhere: nothing)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL))  # an unsigned long, as prctl takes it
    except (OSError, AttributeError):
        pass


def _child(fn: Callable[[], Any], setup: Optional[Callable[[], None]], conn: Any) -> None:
    answer: tuple[str, Any]
    try:
        _die_with_parent()
        if setup is not None:
            setup()
        answer = ("value", fn())
    except BaseException as error:  # noqa: BLE001 - said by the parent, in words (an exception may not pickle)
        answer = ("raised", f"{type(error).__name__}: {error}")
    try:
        try:
            conn.send(answer)
        except Exception as error:  # noqa: BLE001 - a value that does not pickle: its words instead
            conn.send(("raised", f"the answer could not be sent back: {type(error).__name__}: {error}"))
        conn.close()
    finally:
        os._exit(0)  # none of the parent's exit handlers in its copy
