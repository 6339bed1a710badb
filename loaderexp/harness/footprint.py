"""What a measured process tree holds, counted as a training script's tree would be.

A training script is one process that imported torch and built its dataset itself, and its workers.
loaderexp's measuring process is forked from a dataset holder, itself forked from a server that
imported torch, so plain PSS misleads both ways: the pages the measuring process copies are held twice
(its copy, and the holder's original), and the libraries' pages are shared with unrelated processes
(the app, which maps numpy and friends too), which PSS splits away.  Counted here instead, from
``/proc/<pid>/status`` and ``smaps_rollup``:

- the measuring process: every anonymous page it maps (``RssAnon``), shared or not: its address
  space is the script's, inherited whole at each fork;
- each worker: the pages it made its own (``Private_Dirty``: its copies, its buffers), which is what
  a worker adds to a script;
- shared memory between them (batches in /dev/shm) by its PSS, split between the processes;
- files' pages (libraries) once, as the process of the family that maps most of them does (the
  server that imported torch has faulted in what a fresh script would).

Against a plain training script's PSS and its workers' (benchmarks/memory_truth.py), within a few
percent; the rest is loaderexp's own imports in the measuring process.  Without ``smaps_rollup``
(not Linux 4.14+) the tree's PSS is used, and the forked-from processes' shares are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import psutil

MB = 2**20


def _kb_fields(path: str) -> dict[str, int]:
    found = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB":
                found[key] = int(parts[0]) * 1024
    return found


@dataclass(frozen=True)
class _Readings:
    """One process's figures, in bytes, from ``smaps_rollup`` and ``status``."""

    rss_anon: int
    private_clean: int
    private_dirty: int
    pss_shmem: int = 0
    rss_file: int = 0


_FIELDS = {"rss_anon": "RssAnon", "private_clean": "Private_Clean", "private_dirty": "Private_Dirty",
           "pss_shmem": "Pss_Shmem", "rss_file": "RssFile"}
_REQUIRED = ("rss_anon", "private_clean", "private_dirty")


def _readings(pid: int) -> Optional[_Readings]:
    """None where the files are gone (the process ended) or lack a required field (no smaps_rollup)."""
    try:
        found = {**_kb_fields(f"/proc/{pid}/smaps_rollup"), **_kb_fields(f"/proc/{pid}/status")}
    except (OSError, ValueError):
        return None
    values = {name: found[key] for name, key in _FIELDS.items() if key in found}
    return _Readings(**values) if all(name in values for name in _REQUIRED) else None


@dataclass
class Footprint:
    total: float  # bytes, as a script's tree would hold them
    uss: float  # bytes only the tree's processes map (each process's private pages)
    workers: dict[int, float] = field(default_factory=dict)  # bytes each worker adds


def footprint(root: psutil.Process, descendants: list[psutil.Process], forked_from: list[psutil.Process]) -> Footprint:
    main = _readings(root.pid)
    if main is None:
        return _pss_footprint(root, descendants)
    total = main.rss_anon + main.pss_shmem
    uss = main.private_clean + main.private_dirty
    files = main.rss_file
    workers = {}
    for process in descendants:
        found = _readings(process.pid)
        if found is None:
            continue
        workers[process.pid] = found.private_dirty + found.pss_shmem
        total += workers[process.pid]
        uss += found.private_clean + found.private_dirty
        files = max(files, found.rss_file)
    for process in forked_from:
        found = _readings(process.pid)
        files = max(files, found.rss_file if found else 0)
    return Footprint(total + files, uss, workers)


def _pss_footprint(root: psutil.Process, descendants: list[psutil.Process]) -> Footprint:
    pss = uss = 0.0
    workers = {}
    for process in [root, *descendants]:
        try:
            memory = process.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        pss += getattr(memory, "pss", memory.rss)
        uss += memory.uss
        if process.pid != root.pid:
            workers[process.pid] = memory.uss
    return Footprint(pss, uss, workers)
