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


def _readings(pid: int) -> Optional[dict[str, int]]:
    try:
        return {**_kb_fields(f"/proc/{pid}/smaps_rollup"), **_kb_fields(f"/proc/{pid}/status")}
    except (OSError, ValueError):
        return None


@dataclass
class Footprint:
    total: float  # bytes, as a script's tree would hold them
    uss: float  # bytes only the tree's processes map (each process's private pages)
    workers: dict[int, float] = field(default_factory=dict)  # bytes each worker adds


def footprint(root: psutil.Process, descendants: list[psutil.Process], forked_from: list[psutil.Process]) -> Footprint:
    main = _readings(root.pid)
    if main is None or "RssAnon" not in main or "Private_Dirty" not in main:
        return _pss_footprint(root, descendants)
    total = main["RssAnon"] + main.get("Pss_Shmem", 0)
    uss = main["Private_Clean"] + main["Private_Dirty"]
    files = main.get("RssFile", 0)
    workers = {}
    for process in descendants:
        found = _readings(process.pid)
        if found is None:
            continue
        workers[process.pid] = found["Private_Dirty"] + found.get("Pss_Shmem", 0)
        total += workers[process.pid]
        uss += found["Private_Clean"] + found["Private_Dirty"]
        files = max(files, found.get("RssFile", 0))
    for process in forked_from:
        found = _readings(process.pid)
        files = max(files, found.get("RssFile", 0) if found else 0)
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
