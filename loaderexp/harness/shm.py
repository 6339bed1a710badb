"""Shared-memory pre-flight: will the batches in flight fit in /dev/shm before any worker starts?"""

from __future__ import annotations

import os
from typing import Any, Optional

import torch

from loaderexp.harness import resources
from loaderexp.harness.transfer import batch_size_and_bytes


class SharedMemoryTooSmall(RuntimeError):
    """The batches in flight would not fit in /dev/shm: refuse before any worker starts."""


def shm_needed(sample_bytes: int, batch_size: Optional[int], num_workers: int, prefetch_factor: Optional[int]) -> int:
    """Bytes of batches in flight between workers and the main process (each a shared-memory segment)."""
    if num_workers == 0:
        return 0
    return num_workers * (prefetch_factor or 2) * (batch_size or 1) * sample_bytes  # None: an item is a batch


def shm_verdict(needed: int, free: Optional[int]) -> Optional[str]:
    """None when it fits comfortably, a warning when it is tight; raises when it cannot fit."""
    if free is None or needed == 0:
        return None
    text = (f"about {needed / 2**20:,.0f} MiB of batches in flight (num_workers x prefetch_factor x batch) "
            f"against {free / 2**20:,.0f} MiB free in /dev/shm")
    if needed > free:
        raise SharedMemoryTooSmall(
            f"{text}: workers would die with a bus error; lower loader.num_workers, loader.prefetch_factor or "
            "loader.batch_size, or enlarge /dev/shm (docker run --shm-size=...)"
        )
    return f"{text}: tight, other processes share it" if needed > free / 2 else None


def shm_preflight(dataset: Any, iterable: bool, batch_size: Optional[int], num_workers: int,
                  prefetch_factor: Optional[int]) -> list[str]:
    """Check, from one sample's size, that the batches in flight fit in /dev/shm.

    An iterable dataset is not read ahead: a one-shot stream would lose the item.
    """
    if num_workers == 0:
        return []
    if iterable:
        return ["/dev/shm pre-flight skipped: an IterableDataset is not read before its workers start"]
    sample_bytes = sample_bytes_in_probe(dataset)
    if sample_bytes is None:
        return []  # the sample could not be read: the measurement itself will say why
    if batch_size is not None:
        try:  # a batch holds at most the whole dataset: 2 samples with batch_size 1024 are 2 samples
            batch_size = min(batch_size, len(dataset))
        except TypeError:
            pass
    needed = shm_needed(sample_bytes, batch_size, num_workers, prefetch_factor)
    verdict = shm_verdict(needed, resources.shm_free_bytes())
    return [verdict] if verdict else []


def sample_bytes_in_probe(dataset: Any) -> Optional[int]:
    """The bytes of ``dataset[0]``, read in a short-lived forked process.

    Read here, a lazy handle that ``__getitem__`` opens (HDF5, LMDB, a socket) would be inherited by
    every worker forked later, which such libraries do not survive; in the probe it dies with it.
    """
    if not hasattr(os, "fork"):
        return batch_size_and_bytes(dataset[0])[1]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: one read, one number back, never returns
        code = 1
        try:
            os.close(read_end)
            torch.set_num_threads(1)  # as in a DataLoader worker: no thread pool inherited mid-use
            os.write(write_end, str(batch_size_and_bytes(dataset[0])[1]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return int(text) if text else None
