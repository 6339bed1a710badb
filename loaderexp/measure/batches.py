"""A job's per-batch timings as the CSV table written beside result.json (batches.csv)."""

from __future__ import annotations

import csv
import io

from loaderexp.measure.loop import RepeatTiming


def batches_table(repeats: list[RepeatTiming]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["repeat", "batch", "wait_ms", "busy_ms"])
    for r, timing in enumerate(repeats):
        for b, (wait, busy) in enumerate(zip(timing.wait_s, timing.busy_s)):
            writer.writerow([r, b, f"{wait * 1000:.4f}", f"{busy * 1000:.4f}"])
    return out.getvalue()
