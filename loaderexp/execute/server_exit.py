"""Preloaded last by the measuring server (the forkserver, :mod:`loaderexp.execute.child`), so that its exit hook
runs first: when the sweep's process is gone, the server leaves at once instead of tearing down the interpreter
that imported torch and torchvision.  That teardown held the sweep's output pipe open 1.0 s after its last line
(0.1 s with this hook), burning a core while the next sweep, benchmark or CI step started beside it.  The
server's children (the dataset's process, the measuring processes, the DataLoader workers) inherit the hook and
ignore it: each ends its own way."""

from __future__ import annotations

import atexit
import os
import sys

_SERVER = os.getpid()


def _leave() -> None:
    if os.getpid() == _SERVER:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(0)


atexit.register(_leave)
