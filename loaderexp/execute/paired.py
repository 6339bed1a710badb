"""Settings compared side by side in one measuring process, on one dataset (:mod:`loaderexp.harness.paired`):
the sweep's confirmation of its pick against its rivals."""

from __future__ import annotations

import time
from typing import Any, Optional

from loaderexp.config.schema import Config
from loaderexp.execute.job import (
    OnBatch,
    budget_from,
    BuiltDataset,
    configured_dataset,
    consumer_for,
    length_of,
    measured_loader,
    quiet_torch_warnings,
    resolve_device,
    seed_everything,
)
from loaderexp.harness.cgroup import usable_memory_mb
from loaderexp.harness.paired import Side, interleaved
from loaderexp.harness.records import PairedRates

KEEP_MB = 1024  # idle sides' workers stay while at least this much memory (and a quarter of the start's) is left


def side_of(spec: Config, dataset: Any) -> Side:
    loader, delivery = measured_loader(spec, dataset)
    consumer, idle = consumer_for(spec, resolve_device(spec.device.type))  # as the measured loop has it
    length = length_of(loader)
    budget = budget_from(spec.bench, spec.loader, length)
    return Side(loader, budget.warmup_batches, delivery.payload, None if idle else consumer, budget.round_size,
                budget.depth, epoch_batches=length)


def compare(specs: list[Config], rounds: int, window_s: float, on_batch: Optional[OnBatch] = None,
            built: Optional[BuiltDataset] = None) -> PairedRates:
    """``specs`` (one dataset) in ``rounds`` interleaved rounds of ``window_s`` windows (in whole rounds of each
    one's workers), made a whole number of pairs: one in each order,
    so a steady drift favours no position."""
    dataset = (configured_dataset(specs[0]) if built is None else built).dataset
    seed_everything(specs[0].bench.seed)
    rounds = max(2, rounds + rounds % 2)
    done = [0]

    def beat() -> None:
        done[0] += 1
        if on_batch is not None:
            on_batch(done[0], None)

    with quiet_torch_warnings():
        sides = [side_of(spec, dataset) for spec in specs]
        floor = max(KEEP_MB, usable_memory_mb() / 4)
        started = time.perf_counter()
        paired = interleaved(sides, rounds, window_s, beat=beat, keep=lambda: usable_memory_mb() > floor)
    paired.seconds = time.perf_counter() - started
    return paired

