"""A dead DataLoader worker named in torch's own words, however torch noticed it."""

from __future__ import annotations

import signal
from typing import Any


def with_worker_exits(error: RuntimeError, iterator: Any) -> RuntimeError:
    """torch names a dead worker's signal only when its SIGCHLD handler wins the race with the broken
    pipe; otherwise it says "exited unexpectedly".  Its worker processes know how they ended: say it
    in torch's own words, so the fault is classified the same either way."""
    if "exited unexpectedly" not in str(error):
        return error
    ends = []
    for worker in getattr(iterator, "_workers", ()):
        code = getattr(worker, "exitcode", None)
        if code is not None and code < 0:
            try:
                name = signal.strsignal(-code) or str(-code)
            except ValueError:
                name = str(-code)
            ends.append(f"DataLoader worker (pid {worker.pid}) is killed by signal: {name}.")
    return RuntimeError(f"{error} {' '.join(ends)}") if ends else error
