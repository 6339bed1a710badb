"""A stage that writes fresh memory costs what the allocator makes it: a range, from two more passes on two heaps.

An operation whose output is large (ToTensor or Normalize on a 224x224 image: 602 KB of floats) costs its
arithmetic plus, when its output lands on pages the kernel must hand over and zero, a page fault per 4 KB.  Which
it pays depends on glibc's allocator, not on the operation: when a batch's samples are let go together and free
the top of the heap, glibc hands that memory back to the kernel (its trim) and the next batch faults it all in
again; when something still lives above them, the next batch reuses the pages.  On the JPEG folder (this 2-core
host) the same DataLoader loop read ToTensor at 0.23-0.34 ms with 7-9 faults a sample in some processes and
0.51-0.61 ms with 142-146 in others; one worker, in seven runs, 0.25-0.60 ms.  No warm-up settles it: where a heap
ends is its history, and the pass meets one moment of it (65 faults a sample in one, 149 in another).

So a fetch or transform stage whose faults in the pass could be a tenth of its CPU (:func:`writes_fresh_memory`)
is timed twice more, each time in a fork of the profiling process with glibc's thresholds fixed: on a **settled**
heap (no trim, no fresh mapping for a block under glibc's own largest adaptive threshold: a batch reuses what the
last one freed) and on a **fresh** one (every block of 128 KB or more mapped fresh and handed back when freed,
glibc's thresholds before they adapt: each large output faulted in whole).  The two are the stage's range; the
pass's own figure, what workers most often met, stays the model's.  Without fork or glibc, one figure.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
from typing import Any, Callable, Optional

from loaderexp.harness.forked import ForkFailed, answer_from_fork, can_fork
from loaderexp.harness.stages import Stage

# A stage whose page faults could be this share of its CPU or more is a range: at FAULT_S each, at least LEAST a sample
SHARE, FAULT_S, LEAST = 0.10, 1e-6, 8
# (FAULT_S: what a fault cost the JPEG folder's ToTensor at least, 0.14 ms for 134 more a sample; a fresh page written
# here costs 2.2-2.6 us.  A fixed 32 a sample left its Normalize, 30 faults in one pass, one figure read 43% over a
# settled loop's)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
# (mmap threshold, trim threshold): set in this order (setting either stops glibc adapting both)
SETTLED = (32 << 20, 1 << 30)  # glibc's largest adaptive mmap threshold on 64 bits; no trim in a pass
FRESH_HEAP = (128 << 10, 128 << 10)  # glibc's defaults, before its first large free adapts them
ANSWER_S = 600.0  # the profile's own limit ends it first (execute/profiling.py); this only frees a stuck wait


def with_heap_range(stages: list[Stage], costs: Callable[[], dict[str, float]]) -> list[Stage]:
    """``stages``, each that wrote fresh memory with its CPU on a settled and on a fresh heap too: ``costs()`` (the
    stage pass again, stage name: CPU per sample) run on each.  As they are where none wrote fresh memory, where
    there is no fork or no glibc, or where a pass fails (the first one's figures stand)."""
    fresh = {s.name for s in stages if s.kind in ("fetch", "transform") and writes_fresh_memory(s)}
    libc = _glibc()
    if not fresh or libc is None or not can_fork():
        return stages
    try:
        settled, faulted = (_on_heap(libc, thresholds, costs) for thresholds in (SETTLED, FRESH_HEAP))
    except (ForkFailed, OSError):  # no answer (or no fork): one figure, as before; the first pass ran the same ops
        return stages
    return [dataclasses.replace(s, settled_cpu_s=settled[s.name], fresh_cpu_s=faulted[s.name])
            if s.name in fresh and s.name in settled and s.name in faulted else s for s in stages]


def writes_fresh_memory(stage: Stage) -> bool:
    """Its page faults could be a tenth of its CPU or more: what the allocator does shows in its cost."""
    return stage.faults >= LEAST and stage.faults * FAULT_S >= SHARE * stage.cpu_s


def _glibc() -> Optional[Any]:
    try:
        os.confstr("CS_GNU_LIBC_VERSION")
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") else None
    except (ValueError, OSError, AttributeError):  # not glibc (musl, macOS): its allocator has other rules
        return None


def _on_heap(libc: Any, thresholds: tuple[int, int], fn: Callable[[], Any]) -> Any:
    """``fn()`` in a fork with glibc's (mmap, trim) ``thresholds``: its value, or :class:`ForkFailed`."""

    def settle() -> None:
        libc.mallopt(M_MMAP_THRESHOLD, thresholds[0])
        libc.mallopt(M_TRIM_THRESHOLD, thresholds[1])

    return answer_from_fork(fn, ANSWER_S, "loaderexp-heap", setup=settle)
