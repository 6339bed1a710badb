"""A cold page cache: the dataset's files evicted, then its first epoch timed whole, as training's first
epoch meets them (``bench.cache=cold|both``).

Before the epoch: the storage's own cold read rate (the files read one after the other), the files
evicted again, and ``mincore`` asked whether they left.  A dataset that names no files, or reads them
only when built (CIFAR-10 keeps its batches in memory), gets no cold figure, and the record says why.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from loaderexp.config.schema import Config
from loaderexp.data.files import dataset_files
from loaderexp.harness.delivery import DeliveryTracker
from loaderexp.harness.loop import run_windows
from loaderexp.harness.page_cache import evict, file_bytes, read_cold, resident_fraction
from loaderexp.harness.records import Budget, BudgetSpec, ColdRecord
from loaderexp.harness.steps import Consumer


def cold_epoch(spec: Config, dataset: Any, loader: Any, delivery: DeliveryTracker, consumer: Optional[Consumer],
               on_batch: Optional[Callable[[int], None]], available_mb: float) -> ColdRecord:
    files = dataset_files(dataset, spec.dataset)
    if files is None or not files.paths:
        return ColdRecord(False, "no cold figure: the dataset names no files (set dataset.files to a glob of them, "
                          "or give it a files attribute)", available_mb=available_mb)
    size = file_bytes(files.paths)
    if not files.per_epoch:
        return ColdRecord(False, f"no cold epoch: the dataset reads its {len(files.paths)} files "
                          f"({size / 2**20:,.0f} MB, {files.how}) only when it is built and keeps them in memory; a "
                          "cold page cache costs its build, not its epochs", len(files.paths), size,
                          available_mb=available_mb)
    storage = read_cold(files.paths)
    evict(files.paths)
    resident = resident_fraction(files.paths)
    budget = BudgetSpec(mode=Budget.epochs, warmup_batches=0, epochs=1, max_seconds=spec.bench.max_run_seconds)
    started = time.perf_counter()
    [timing] = run_windows(loader, budget, delivery, consumer, time.perf_counter, on_batch)
    if consumer is not None:
        consumer.flush()
    note = (f"{len(files.paths)} files ({size / 2**20:,.0f} MB, {files.how}) evicted from the page cache"
            + (f" ({100 * resident:.0f}% still cached after it)" if resident is not None else "")
            + f"; the first epoch timed whole: {time.perf_counter() - started:.1f} s")
    return ColdRecord(True, note, len(files.paths), size, resident, storage.mb_per_s if storage else None, timing,
                      available_mb)
