"""One measurement per host at a time, whichever launcher started the jobs.

Ray, SLURM without ``--exclusive`` and submitit's local executor all start a sweep's jobs at once,
and two measurements on one host share its cores, page cache and memory bandwidth: both read
low, by an amount nobody can tell afterwards.  Every job therefore takes an exclusive ``flock``
on a lock file for as long as it measures; a second job waits for it, at most ``bench.host_wait_s``.
The kernel drops the lock with the process, so a killed job never leaves the host locked.

The lock file is the user's own (``$XDG_RUNTIME_DIR/loaderexp/host.lock``, else
``/tmp/loaderexp-<uid>/host.lock``, in a folder only its owner can enter): a file every user could
open would let anyone hold the lock forever, or plant a symbolic link that a ``truncate`` would
follow.  ``LOADEREXP_HOST_LOCK`` names another (an administrator's shared file keeps several users'
measurements apart too).  It is opened without following links, and loaderexp writes the holder's
name only into a file it created itself (it starts with :data:`MARKER`); in any other it only locks.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import time
from contextlib import contextmanager
from typing import Iterator

from loaderexp.result.facts import RunFacts

log = logging.getLogger(__name__)  # a child of "loaderexp": the API says its waits (api._from_a_notebook_or_a_pipe)

ENV = "LOADEREXP_HOST_LOCK"
MARKER = b"loaderexp host lock\n"
POLL_S = 0.25  # the wait polls a non-blocking flock: a blocking one could not be bounded in time
HOLDER_LIMIT = 200  # characters of the holder's name that are shown


class HostLockError(RuntimeError):
    """The lock file cannot be used safely; the message says why and what to do."""


class HostBusy(RuntimeError):
    """Another measurement held the host for all of ``bench.host_wait_s``."""


def private_folder() -> str:
    """The user's own folder for the lock: created 0700, refused unless it is a folder of theirs
    that nobody else can write."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = os.path.join(runtime, "loaderexp") if runtime and os.path.isdir(runtime) else f"/tmp/loaderexp-{os.getuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise HostLockError(f"the host lock's folder {folder} cannot be made ({error.strerror}); set {ENV}") from None
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise HostLockError(f"the host lock's folder {folder} is not a private folder of yours (owner uid "
                            f"{info.st_uid}, mode {stat.filemode(info.st_mode)}): remove it, or set {ENV}")
    return folder


def lock_path() -> str:
    return os.environ.get(ENV) or os.path.join(private_folder(), "host.lock")


def open_lock(path: str) -> tuple[int, bool]:
    """The lock file's descriptor, and whether loaderexp may write the holder's name into it."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise HostLockError(f"{ENV}={path}: the folder {folder} does not exist")
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, MARKER)
        return fd, True
    except FileExistsError:
        pass
    fd = None
    for mode in (os.O_RDWR, os.O_RDONLY):  # read-only: another user's shared lock, to lock only
        try:
            fd = os.open(path, mode | os.O_NOFOLLOW | os.O_CLOEXEC)
            break
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise HostLockError(f"the host lock {path} is a symbolic link: refused (it could point anywhere)"
                                    ) from None
            if error.errno != errno.EACCES or mode == os.O_RDONLY:
                raise HostLockError(f"the host lock {path} cannot be opened ({error.strerror})") from None
    assert fd is not None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise HostLockError(f"the host lock {path} is not a regular file")
    ours = info.st_uid == os.getuid() and os.pread(fd, len(MARKER), 0) == MARKER
    return fd, ours


def printable(text: str) -> str:
    """What may be shown of a holder's name: printable characters only (no terminal escapes), bounded."""
    return "".join(c if c.isprintable() else "?" for c in text)[:HOLDER_LIMIT]


def holder_of(fd: int) -> str:
    text = os.pread(fd, len(MARKER) + 4 * HOLDER_LIMIT, 0)
    return printable(text.removeprefix(MARKER).decode(errors="replace").strip()) or "another process"


def _wait(fd: int, path: str, label: str, wait_s: float) -> None:
    """Take the lock, naming its holder once, for at most ``wait_s`` seconds."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    holder = holder_of(fd)
    log.info("%s: waiting for the host: %s is measuring on it (%s)", label, holder, path)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise HostBusy(f"host busy: {holder} held {path} for all of bench.host_wait_s={wait_s:g} s; this "
                               "job did not measure (another sweep is measuring here, or a stuck process holds "
                               "the lock)") from None
            time.sleep(POLL_S)


@contextmanager
def exclusive_host(label: str, shared_ok: bool, facts: RunFacts, wait_s: float = 3600.0) -> Iterator[None]:
    """Hold the host for one measurement; ``facts`` gets the mode, the wait and the interval held."""
    facts.host_lock = "shared (bench.shared_host_ok=true)" if shared_ok else "exclusive"
    if shared_ok:
        facts.measured_from = time.time()
        try:
            yield
        finally:
            facts.measured_until = time.time()
        return
    path = lock_path()
    fd, ours = open_lock(path)
    try:
        waited_from = time.monotonic()
        _wait(fd, path, label, wait_s)
        facts.waited_for_host_s = round(time.monotonic() - waited_from, 3)
        if ours:
            _name_holder(fd, f"loaderexp {label} (pid {os.getpid()})")
        facts.measured_from = time.time()
        try:
            yield
        finally:
            facts.measured_until = time.time()
            if ours:
                _name_holder(fd, "")
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _name_holder(fd: int, holder: str) -> None:
    """The holder's name after the marker, in a file loaderexp created (``""``: nobody holds it)."""
    os.ftruncate(fd, len(MARKER))
    if holder:
        os.pwrite(fd, holder.encode(), len(MARKER))
