"""A sweep folder belongs to one sweep: a second one into it (at once, or later without ``resume=true``) would
overwrite the first's job folders, and the first's MLflow runs would point at the second's results.

The sweep holds an exclusive ``flock`` on ``<sweep>/.loaderexp-sweep.lock`` while it runs (the kernel drops
it with the process, so a killed sweep never leaves the folder locked), and a folder that already holds
a sweep's jobs is refused unless the sweep resumes it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
from pathlib import Path

from loaderexp.config.folders import MARKER
from loaderexp.result import RESULT_FILE

LOCK = ".loaderexp-sweep.lock"


class FolderTaken(RuntimeError):
    """The sweep folder is another sweep's: one line that says whose and what to do."""


def claim(sweep_dir: Path, resume: bool) -> int:
    """The held lock's descriptor; FolderTaken when another sweep writes the folder, or when it holds a
    finished sweep's jobs and this sweep does not resume it."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / LOCK
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        why = "a symbolic link: refused" if error.errno == errno.ELOOP else error.strerror
        raise FolderTaken(f"hydra.sweep.dir={sweep_dir}: its lock {path} cannot be used ({why})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FolderTaken(f"hydra.sweep.dir={sweep_dir}: another sweep is writing this folder now; choose another "
                          "folder (or wait for it and add resume=true)") from None
    jobs = [p.parent for p in sweep_dir.glob(f"*/{MARKER}")] + [p.parent for p in sweep_dir.glob(f"*/{RESULT_FILE}")]
    if jobs and not resume:
        os.close(fd)
        raise FolderTaken(f"hydra.sweep.dir={sweep_dir} already holds a sweep ({len(set(jobs))} job folders): add "
                          "resume=true to continue it, or choose another folder")
    return fd


def claim_or_exit(sweep_dir: Path, resume: bool) -> int:
    """:func:`claim`, or the reason in one line and exit 2 before any job starts."""
    try:
        return claim(sweep_dir, resume)
    except FolderTaken as error:
        print(f"loaderexp: error: {error}; the sweep did not start", file=sys.stderr)
        raise SystemExit(2) from error
