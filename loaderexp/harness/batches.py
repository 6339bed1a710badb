"""A job's per-batch timings as the CSV table written beside result.json (batches.csv)."""

from __future__ import annotations

import csv
import io

from loaderexp.harness.records import RepeatTiming


def batches_table(repeats: list[RepeatTiming]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["repeat", "batch", "wait_ms", "busy_ms"])
    for r, timing in enumerate(repeats):
        for b, (wait, busy) in enumerate(zip(timing.wait_s, timing.busy_s)):
            writer.writerow([r, b, f"{wait * 1000:.4f}", f"{busy * 1000:.4f}"])
    return out.getvalue()


def with_rank(table: str, rank: int, first: bool) -> str:
    """One rank's table with a leading rank column (the header only on the first rank's)."""
    lines = table.splitlines()
    if not lines:
        return ""
    body = [f"{rank},{line}" for line in lines[1:]]
    return "\n".join(([f"rank,{lines[0]}"] if first else []) + body) + "\n"
