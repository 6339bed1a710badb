"""A dead DataLoader worker named in torch's own words, however torch noticed it."""

from __future__ import annotations

import signal
from typing import Any

EXIT_WAIT_S = 0.5  # for a worker whose pipe just broke to be reaped: its end is what names the fault


def noticed_a_dead_worker(error: BaseException) -> bool:
    """How the loading process may learn that a worker died: torch's SIGCHLD handler ("exited
    unexpectedly"), or, when it reads the worker's pipe first on a busy host, the broken pipe itself."""
    return isinstance(error, (ConnectionError, EOFError)) or "exited unexpectedly" in str(error)


def with_worker_exits(error: BaseException, iterator: Any) -> BaseException:
    """torch names a dead worker's signal only when its SIGCHLD handler wins the race with the broken
    pipe; otherwise it says "exited unexpectedly", or the read fails with a reset connection.  Its
    worker processes know how they ended: say it in torch's own words, so the fault is classified
    the same either way."""
    if not noticed_a_dead_worker(error):
        return error
    ends = []
    for worker in getattr(iterator, "_workers", ()):
        code = getattr(worker, "exitcode", None)
        if code is None and hasattr(worker, "join"):
            worker.join(EXIT_WAIT_S / max(1, len(iterator._workers)))
            code = worker.exitcode
        if code is not None and code < 0:
            try:
                name = signal.strsignal(-code) or str(-code)
            except ValueError:
                name = str(-code)
            ends.append(f"DataLoader worker (pid {worker.pid}) is killed by signal: {name}.")
    if not ends:
        return error
    said = str(error) if isinstance(error, RuntimeError) else f"{type(error).__name__}: {error}"
    return RuntimeError(f"{said} {' '.join(ends)}")
