"""A dataset's files and the page cache: evicting them, checking they left, reading them cold.

``posix_fadvise(POSIX_FADV_DONTNEED)`` drops a file's clean pages from the page cache and needs no
privileges (dirty pages are written back first, with ``fsync``); pages another process has mapped
stay.  Whether they really left is read back with ``mincore`` on a mapping of the file that is never
touched (``fincore`` from util-linux answers the same).  Nothing here needs root.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from dataclasses import dataclass
from typing import Optional

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
PROBE_BYTES = 256 * 2**20  # the storage probe reads at most this much
PROBE_SECONDS = 3.0  # ... or for at most this long


def file_bytes(paths: list[str]) -> int:
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def evict(paths: list[str]) -> None:
    """Drop each file's pages from the page cache (written back first, when dirty)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


def _mincore() -> Optional[object]:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.mincore
        call.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        call.restype = ctypes.c_int
        return call
    except (OSError, AttributeError):
        return None


def resident_pages(path: str, call: object) -> tuple[int, int]:
    """(pages of ``path`` in the page cache, pages in all), through a mapping that touches none of them."""
    size = os.path.getsize(path)
    pages = -(-size // PAGE)
    if size == 0:
        return 0, 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        start = ctypes.c_char.from_buffer(mapped)
        vector = (ctypes.c_ubyte * pages)()
        try:
            if call(ctypes.addressof(start), size, vector) != 0:  # type: ignore[operator]
                raise OSError(ctypes.get_errno(), "mincore failed")
            return sum(v & 1 for v in vector), pages
        finally:
            del start  # the buffer export must end before the mapping closes


def resident_fraction(paths: list[str]) -> Optional[float]:
    """How much of the files is in the page cache (None where it cannot be read)."""
    call = _mincore()
    if call is None:
        return None
    resident = total = 0
    for path in paths:
        try:
            found, pages = resident_pages(path, call)
        except (OSError, ValueError, TypeError):
            return None
        resident, total = resident + found, total + pages
    return resident / total if total else None


@dataclass
class StorageProbe:
    mb_per_s: float
    bytes: int
    files: int


def read_cold(paths: list[str]) -> Optional[StorageProbe]:
    """Storage's own cold read rate: the files read one after the other, whole, after eviction, until
    :data:`PROBE_BYTES` or :data:`PROBE_SECONDS` (the files it read are evicted again afterwards)."""
    evict(paths)
    done, read, started = [], 0, time.perf_counter()
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                read += len(chunk)
        done.append(path)
        if read >= PROBE_BYTES or time.perf_counter() - started >= PROBE_SECONDS:
            break
    spent = time.perf_counter() - started
    evict(done)
    return StorageProbe(read / spent / 1e6, read, len(done)) if read and spent > 0 else None
