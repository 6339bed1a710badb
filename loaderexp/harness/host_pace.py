"""How fast this host runs a fixed piece of CPU work right now: the sharing the host's own counters cannot see.

The other processes' CPU, steal and throttling (:mod:`.host_load`) are what the guest's kernel counts.  A neighbour
on the machine below a VM that competes for its caches, a hypervisor that takes the vCPU away without reporting
steal (the guest then charges the lost time to whatever task was running), or a clock that moves, all slow the
same work with none of them showing.  On this project's 2-core VM, with others' CPU under 0.05 cores and no steal,
one setting's two runs a minute apart read their CPU a sample 10-33% apart, and a sweep's profile read every stage
1.7-1.8 times what the next sweep's did a minute later.

So each run times one fixed piece of work before its loader starts and after its workers end (nothing of its own
runs beside it then): the interpreter's arithmetic and a small array pass that stays in the core's cache, the
kinds of work a loader's transforms do.  It is the thread's CPU time, not the wall clock: a visible process
that takes the core (counted as the others' load) does not move it; hidden sharing, which the kernel charges to
the thread, does.  Quiet, on one host, readings in fresh processes stay within a few percent of each other.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Optional

PIECES = 16  # a part of a reading: about 2 ms of CPU on this project's host
PARTS = 7  # a reading is the median part: a lasting slowdown moves it, one interrupt does not
_ELEMENTS = 16 * 1024  # 128 KiB of float64: inside any core's L2, so the piece is the core's, not the memory's


@dataclass
class PaceRecord:
    """The fixed piece of work's CPU time (ms) before the run's loader started and after its workers ended."""

    before_ms: Optional[float] = None
    after_ms: Optional[float] = None


def _piece(np: Any, values: Any, out: Any) -> float:
    total = 0
    for i in range(1500):  # the interpreter's own work: what a Python transform spends most of its time on
        total += i * i % 7
    for _ in range(4):  # an array pass in place (no allocation: a fresh block's page faults are the kernel's)
        np.multiply(values, 1.000001, out=out)
        np.sqrt(out, out=out)
    return float(out[-1]) + total


def reference_ms(parts: int = PARTS, pieces: int = PIECES) -> float:
    """The CPU time (ms) this thread takes for ``pieces`` pieces of the fixed work: the median of ``parts``."""
    import numpy as np  # here, not at the top: the run record (result) reads PaceRecord without numpy

    values = np.linspace(1.0, 2.0, _ELEMENTS)
    out = np.empty_like(values)
    _piece(np, values, out)  # the arrays' pages touched and the code warm before the clock starts
    times = []
    for _ in range(parts):
        start = time.thread_time()
        for _ in range(pieces):
            _piece(np, values, out)
        times.append(time.thread_time() - start)
    return round(statistics.median(times) * 1000, 4)
