"""Where runs were measured: a sweep split by node type, and runs that shared a host at once."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from loaderexp.result import RunResult


def host_type(result: RunResult) -> str:
    """What makes two hosts comparable: CPU model and count, and the GPU (hostnames differ anyway)."""
    return result.host.kind


def by_host_type(items: Sequence[tuple[Path, RunResult]]) -> dict[str, list[tuple[Path, RunResult]]]:
    groups: dict[str, list[tuple[Path, RunResult]]] = {}
    for folder, result in items:
        groups.setdefault(host_type(result), []).append((folder, result))
    return groups


def overlaps(items: Sequence[tuple[Path, RunResult]]) -> list[str]:
    """Notes on runs that measured on one host at the same time (only bench.shared_host_ok allows it)."""
    timed = [(f, r) for f, r in items if r.info.measured_from is not None and r.info.measured_until is not None]
    notes = []
    for i, (folder_a, a) in enumerate(timed):
        for folder_b, b in timed[i + 1:]:
            same_host = a.host.hostname == b.host.hostname
            if same_host and a.info.measured_from < b.info.measured_until \
                    and b.info.measured_from < a.info.measured_until:
                notes.append(f"! {folder_a.name} and {folder_b.name} measured on {a.host.hostname} at the same "
                             "time: both figures are low by an unknown amount")
    return notes
