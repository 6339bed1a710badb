"""One measurement per host at a time, whichever launcher started the jobs.

Ray, SLURM without ``--exclusive`` and submitit's local executor all start a sweep's jobs at once,
and two measurements on one host share its cores, page cache and memory bandwidth: both read
low, by an amount nobody can tell afterwards.  Every job therefore takes an exclusive ``flock``
on a host-wide file for as long as it measures; a second job on the same host waits for it.
The kernel drops the lock with the process, so a killed job never leaves the host locked.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from contextlib import contextmanager
from typing import Any, Iterator

log = logging.getLogger("loaderexp")

# Host-wide, shared by every user (a lab machine has several): /tmp, or where the env says.
DEFAULT_LOCK_PATH = "/tmp/loaderexp-host.lock"


def lock_path() -> str:
    return os.environ.get("LOADEREXP_HOST_LOCK", DEFAULT_LOCK_PATH)


def _open_shared(path: str) -> int:
    # Open without O_CREAT first: with fs.protected_regular a sticky /tmp refuses O_CREAT on a
    # file another user made, even one anybody may write.
    try:
        return os.open(path, os.O_RDWR)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        os.fchmod(fd, 0o666)  # the umask would keep other users out
        return fd
    except FileExistsError:  # another job made it between the two opens
        return os.open(path, os.O_RDWR)


@contextmanager
def exclusive_host(label: str, shared_ok: bool, facts: dict[str, Any]) -> Iterator[None]:
    """Hold the host for one measurement; ``facts`` gets the mode, the wait and the interval held."""
    facts["host_lock"] = "shared (bench.shared_host_ok=true)" if shared_ok else "exclusive"
    if shared_ok:
        facts["measured_from"] = time.time()
        try:
            yield
        finally:
            facts["measured_until"] = time.time()
        return
    path = lock_path()
    fd = _open_shared(path)
    try:
        waited_from = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # say who holds it, then wait (a signal still interrupts the wait)
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            log.info("%s: waiting for the host: %s is measuring on it (%s)", label, holder, path)
            fcntl.flock(fd, fcntl.LOCK_EX)
        facts["waited_for_host_s"] = round(time.monotonic() - waited_from, 3)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"loaderexp {label} (pid {os.getpid()})".encode(), 0)
        facts["measured_from"] = time.time()
        try:
            yield
        finally:
            facts["measured_until"] = time.time()
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
