"""Generated data sets, built once per data root and reused by every job and later sweep.

A generated folder carries a marker file holding the parameters it was made from (its
identity).  A folder whose marker matches is reused as it is; one whose identity differs is
rebuilt; a folder without a marker is the user's own data and is never touched.  Building
happens in a fresh private folder beside it (``mkdtemp``) under a file lock and is renamed into place, so
parallel jobs and interrupted builds never see half a data set, and nothing planted in a shared data root
(a link where the build would write) is followed.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from loaderexp.data.locks import holder_of

log = logging.getLogger("loaderexp")
MARKER = "loaderexp-generated.json"


@dataclass
class Built:
    """The marker a generated data set carries: what it is (the generator's arguments) and how it was made."""

    identity: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)  # the generator's own figures, and the build's seconds


def read_identity(folder: Path) -> dict[str, Any] | None:
    marker = folder / MARKER
    if not marker.is_file():
        return None
    return Built(**json.loads(marker.read_text())).identity


def build_once(folder: Path, identity: Mapping[str, Any], write: Callable[[Path], Mapping[str, Any]]) -> str:
    """Ensure ``folder`` holds data of ``identity``; returns "reused", "built" or "user data"."""
    identity = json.loads(json.dumps(dict(identity)))  # normalise tuples etc. for comparison
    if _state(folder, identity) != "stale":
        return _state(folder, identity)
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock_path = folder.parent / f".{folder.name}.lock"
    lock = open_lock(lock_path)
    try:
        _wait_for(lock, lock_path)  # a parallel job may have built it while we waited
        state = _state(folder, identity)
        if state != "stale":
            return state
        # A fresh private folder (mkdtemp: a new name, mode 0700), never a path someone could have planted
        # a link at: the data set is written below it and renamed into place.
        private = Path(tempfile.mkdtemp(prefix=f".{folder.name}.building-", dir=folder.parent))
        try:
            tmp = private / folder.name
            started = time.perf_counter()
            details = {**write(tmp), "seconds": round(time.perf_counter() - started, 2)}
            (tmp / MARKER).write_text(json.dumps(dataclasses.asdict(Built(identity, details)), indent=2))
            shutil.rmtree(folder, ignore_errors=True)
            tmp.rename(folder)
        finally:
            shutil.rmtree(private, ignore_errors=True)
        return "built"
    finally:
        os.close(lock)


def _wait_for(lock: int, path: Path) -> None:
    """The build lock, taken; a wait for another process's build is said once, naming the holder."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        holder = holder_of(os.fstat(lock).st_ino) or "another process"
        log.warning("waiting for %s: %s is building this data set (bench.job_timeout_s bounds the wait)", path, holder)
    fcntl.flock(lock, fcntl.LOCK_EX)


def open_lock(path: Path) -> int:
    """The build lock, opened to lock and nothing else: created empty if missing, never truncated or
    written, and never through a symbolic link (a shared data root is writable by others).  How long
    it is waited for is bounded by the job's own time limit (bench.job_timeout_s)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        why = "a symbolic link: refused" if error.errno == errno.ELOOP else error.strerror
        raise OSError(error.errno, f"the data root's build lock {path} cannot be used ({why})", str(path)) from None


def _state(folder: Path, identity: Mapping[str, Any]) -> str:
    if not folder.exists():
        return "stale"
    found = read_identity(folder)
    if found is None:
        return "user data" if any(folder.iterdir()) else "stale"
    return "reused" if found == identity else "stale"
