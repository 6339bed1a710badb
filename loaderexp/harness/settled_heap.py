"""A stage that writes fresh memory costs what the allocator makes it: its range, from a second pass on a settled heap.

An operation whose output is large (ToTensor or Normalize on a 224x224 image: 602 KB of floats) costs its
arithmetic plus, when its output lands on pages the kernel must hand over and zero, a page fault per 4 KB.  Which
it pays depends on glibc's allocator, not on the operation: when a batch's samples are let go together and free
the top of the heap, glibc hands that memory back to the kernel (its trim) and the next batch faults it all in
again; when something still lives above them, the next batch reuses the pages.  On the JPEG folder (this 2-core
host) the same DataLoader loop read ToTensor at 0.27-0.34 ms with 7-9 faults a sample in one process and 0.51-0.61
ms with 142-146 in another (at batch 64 and 128 alike); workers met 0.39-0.60 ms with 32-144 faults, two runs of
one worker 0.40 and 0.60.  No warm-up settles it: where a heap ends is its history.

So the pass's figure (what it met, most often what workers met) is kept, and a stage that took at least
:data:`FRESH` faults a sample is timed again in a fork whose allocator keeps its heap (no trim, no fresh mapping
for a block under glibc's own largest adaptive threshold): its cost on a heap that keeps a batch's memory for the
next.  The two are the stage's range.  There, the JPEG folder's ToTensor and Normalize took 10-14 and 5-7 faults
a sample and read within -18% .. +3% of a loop that kept its heap.  Without fork or glibc there is one figure.
"""

from __future__ import annotations

import ctypes
import dataclasses
import multiprocessing
import os
import signal
from typing import Any, Callable, Optional

from loaderexp.harness.stages import Stage

FRESH = 32  # page faults a sample (128 KB of fresh memory): below, what the allocator does is lost in the noise
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_FROM = 32 << 20  # glibc's ceiling for its adaptive mmap threshold on 64 bits: a settled heap's own
HEAP_KEPT = 1 << 30  # free bytes at the heap's top before it trims: none trimmed in a pass
PR_SET_PDEATHSIG = 1
ANSWER_S = 600.0  # the profile's own limit ends it first (execute/profiling.py); this only frees a stuck wait


def with_settled_costs(stages: list[Stage], costs: Callable[[], dict[str, float]]) -> list[Stage]:
    """``stages``, each that wrote fresh memory with its CPU on a settled heap too: ``costs()`` (the stage pass
    again, stage name: CPU per sample) run there.  As they are where none wrote fresh memory, where there is no
    fork or no glibc, or where the second pass fails (the first one's figures stand)."""
    fresh = {s.name for s in stages if s.faults >= FRESH and s.kind in ("fetch", "transform")}
    libc = _glibc()
    if not fresh or libc is None or "fork" not in multiprocessing.get_all_start_methods():
        return stages
    try:
        settled = _in_settled_heap(libc, costs)
    except Exception:  # noqa: BLE001 - a range not had is one figure, as before; the first pass ran the same ops
        return stages
    return [dataclasses.replace(s, settled_cpu_s=settled[s.name]) if s.name in fresh and s.name in settled else s
            for s in stages]


def _glibc() -> Optional[Any]:
    try:
        os.confstr("CS_GNU_LIBC_VERSION")
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "prctl") else None
    except (ValueError, OSError, AttributeError):  # not glibc (musl, macOS): its allocator has other rules
        return None


def _in_settled_heap(libc: Any, fn: Callable[[], Any]) -> Any:
    """``fn()`` in a fork whose heap is kept: its value sent back, its exception raised here."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_settled, args=(libc, fn, sender), name="loaderexp-settled")
    child.start()
    sender.close()
    try:
        if not receiver.poll(ANSWER_S):
            raise RuntimeError(f"the settled pass gave no answer in {ANSWER_S:.0f} s")
        outcome, value = receiver.recv()
    except EOFError:
        child.join(5)
        raise RuntimeError(f"the settled pass's process ended without an answer (exit code {child.exitcode})") \
            from None
    finally:
        receiver.close()
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join(5)
    if outcome == "raised":
        raise value
    return value


def _settled(libc: Any, fn: Callable[[], Any], conn: Any) -> None:
    answer: tuple[str, Any]
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a profile killed for its time takes this pass with it
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_FROM)  # set first: setting either stops glibc adapting both
        libc.mallopt(M_TRIM_THRESHOLD, HEAP_KEPT)
        answer = ("value", fn())
    except BaseException as error:  # noqa: BLE001 - raised in the profiling process
        answer = ("raised", RuntimeError(f"{type(error).__name__}: {error}"))
    try:
        conn.send(answer)
        conn.close()
    finally:
        os._exit(0)  # none of the profiling process's exit handlers in its copy
