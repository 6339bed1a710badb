"""Who holds a file lock, and which lock a process waits for, from the kernel's own table (``/proc/locks``).

A data set being built holds ``<data root>/.<name>.lock``; a job that needs the same data set waits for it.
When that wait outlasts the job, "still being built" alone does not say by whom: the lock's line in
/proc/locks names the process that holds it, and a ``->`` line the process blocked on it.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional

LOCKS = "/proc/locks"


def _entries(table: str = LOCKS) -> list[tuple[bool, int, int]]:
    """(waiting, pid, inode) of each lock: ``1: FLOCK  ADVISORY  WRITE 27438 fe:00:2170886 0 EOF``, a waiter's
    line has ``->`` after the number."""
    try:
        with open(table) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        words = line.split()
        waiting = len(words) > 1 and words[1] == "->"
        words = [w for w in words if w != "->"]
        try:
            found.append((waiting, int(words[4]), int(words[5].rsplit(":", 1)[1])))
        except (IndexError, ValueError):
            continue
    return found


def describe_process(pid: int) -> str:
    """``pid 123 (python -m loaderexp ...)``, as far as this user may read it."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    return f"pid {pid}" + (f" ({command[:160]})" if command else "")


def holder_of(inode: int, table: str = LOCKS) -> Optional[str]:
    """The process holding a lock on the file with ``inode``, described; None when none is seen."""
    pid = next((pid for waiting, pid, node in _entries(table) if node == inode and not waiting), None)
    return describe_process(pid) if pid is not None else None


def waits_of(pids: Iterable[int], table: str = LOCKS) -> list[str]:
    """For each of ``pids`` blocked on a lock: ``<the lock file>, held by <its holder>``."""
    entries = _entries(table)
    said = []
    for pid in pids:
        for waiting, waiter, inode in entries:
            if waiting and waiter == pid:
                holder = holder_of(inode, table) or "a process this user cannot see"
                said.append(f"{_path_of(pid, inode) or f'the file with inode {inode}'}, held by {holder}")
    return said


def _path_of(pid: int, inode: int) -> Optional[str]:
    """The file ``pid`` has open with ``inode`` (the lock it waits for)."""
    folder = f"/proc/{pid}/fd"
    try:
        descriptors = os.listdir(folder)
    except OSError:
        return None
    for fd in descriptors:
        try:
            if os.stat(f"{folder}/{fd}").st_ino == inode:
                return os.readlink(f"{folder}/{fd}")
        except OSError:
            continue
    return None
