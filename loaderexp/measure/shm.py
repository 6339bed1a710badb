"""Shared-memory pre-flight: will the batches in flight fit in /dev/shm before any worker starts?"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from loaderexp.measure import resources
from loaderexp.measure.transfer import batch_size_and_bytes


class SharedMemoryTooSmall(RuntimeError):
    """The batches in flight would not fit in /dev/shm: refuse before any worker starts."""


def shm_needed(sample_bytes: int, batch_size: int, num_workers: int, prefetch_factor: Optional[int]) -> int:
    """Bytes of batches in flight between workers and the main process (each a shared-memory segment)."""
    if num_workers == 0:
        return 0
    return num_workers * (prefetch_factor or 2) * batch_size * sample_bytes


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


def shm_preflight(dataset: Any, iterable: bool, loader_cfg: Mapping[str, Any]) -> list[str]:
    """Check, from one sample's size, that the batches in flight fit in /dev/shm."""
    if loader_cfg["num_workers"] == 0:
        return []
    sample = next(iter(dataset)) if iterable else dataset[0]
    sample_bytes = batch_size_and_bytes(sample)[1]
    needed = shm_needed(sample_bytes, loader_cfg["batch_size"], loader_cfg["num_workers"], loader_cfg["prefetch_factor"])
    verdict = shm_verdict(needed, resources.shm_free_bytes())
    return [verdict] if verdict else []
