"""One job's measurement, from the typed spec to a typed Measurement: dataset -> sampler -> stack -> loop.

Takes the spec only (no DictConfig, no Hydra app, no MLflow): the runner calls it, and so can a
script or a test.  What the measurement means is named later, once (``loaderexp.result.figures``).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional
from warnings import catch_warnings, filterwarnings

import numpy as np
import psutil
import torch
from torch.utils.data import IterableDataset

from loaderexp.config import ConfigError, check_targets
from loaderexp.config.schema import BenchConfig, Config, LoaderConfig, StepConfig
from loaderexp.config.targets import step_knobs
from loaderexp.data.build import build_dataset, build_sampler, build_transform, callable_at
from loaderexp.data.lightning import borrowed, check_borrowed
from loaderexp.execute.cold import cold_epoch
from loaderexp.execute.worker_count import check_worker_count, idle_workers_warning
from loaderexp.loading.base import LoadingStack
from loaderexp.loading.registry import loading_stack
from loaderexp.harness.cgroup import usable_memory_mb
from loaderexp.harness.delivery import DeliveryTracker
from loaderexp.harness.budget import round_and_depth, whole_rounds
from loaderexp.harness.memory import EpochMemory
from loaderexp.harness.records import Budget, BudgetSpec, LoaderFacts, Measurement
from loaderexp.harness.repeats import RepeatPlan, repeat_until_precise
from loaderexp.harness.host_pace import PaceRecord, reference_ms
from loaderexp.harness.resources import ResourceMonitor
from loaderexp.harness.shm import shm_preflight
from loaderexp.harness.steps import Consumer
from loaderexp.harness.transfer import HostToDevice

OnBatch = Callable[[int, Optional[int]], None]  # (batches measured so far, the planned total)


def resolve_device(kind: Any) -> torch.device:
    kind = getattr(kind, "value", kind)
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass(frozen=True)
class BuiltDataset:
    """A dataset as :func:`configured_dataset` built it, with what building it added to its process's memory
    (the memory figures' baseline; None where it was built elsewhere)."""

    dataset: Any
    memory_mb: Optional[float] = None


def configured_dataset(spec: Config) -> BuiltDataset:
    """The dataset and transform the spec names, built after seeding (a dataset may draw from the
    global generators as it is made): the dataset holder and an in-process job build it this one way."""
    seed_everything(spec.bench.seed)
    before = psutil.Process().memory_info().rss
    dataset = build_dataset(spec.dataset, build_transform(spec.transform))
    return BuiltDataset(dataset, max(psutil.Process().memory_info().rss - before, 0) / 2**20)


RANK_ENV = "LOCAL_RANK"  # set for each rank by torch's elastic launcher (execute.ranks), whose tree is the node's


def budget_from(bench: BenchConfig, loader: LoaderConfig, batches_per_epoch: Optional[int] = None) -> BudgetSpec:
    """The measured budget of one repeat; with workers, warm-up and windows follow the rounds.

    The warm-up lasts at least the pipeline's depth (``num_workers x prefetch_factor`` batches are
    in flight when the first arrives), and a window holds whole rounds of ``num_workers`` batches.
    An epoch has no more batches than it has: more workers than that never all have work, so the
    depth and the round are at most an epoch's batches.  Whole epochs are timed whole: there the
    warm-up stays as configured.
    """
    mode = bench.budget
    round_size, depth = round_and_depth(loader.num_workers, loader.prefetch_factor, batches_per_epoch,
                                        whole_epochs=mode is Budget.epochs)
    return BudgetSpec(mode=mode, warmup_batches=max(bench.warmup_batches, depth), batches=bench.batches,
                      epochs=bench.epochs, seconds=bench.seconds, max_seconds=bench.max_run_seconds,
                      round_size=round_size, min_seconds=bench.min_window_s, depth=depth)


def repeat_range(bench: BenchConfig) -> tuple[int, int]:
    """(fewest, most) repeats: fixed by ``bench.repeats``, else adaptive."""
    fixed = bench.repeats
    return (fixed, fixed) if fixed else (bench.min_repeats, bench.max_repeats)


def repeat_plan(bench: BenchConfig) -> RepeatPlan:
    fewest, most = repeat_range(bench)
    return RepeatPlan(fewest, most, bench.precision, fixed=bool(bench.repeats), stop_below=bench.stop_below)


def planned_batches(budget: BudgetSpec, repeats: int, batches_per_epoch: Optional[int]) -> Optional[int]:
    """Measured batches the fewest repeats will take, when known up front (for progress bars)."""
    if budget.mode is Budget.batches:
        return whole_rounds(budget.batches, budget.round_size) * repeats
    if budget.mode is Budget.epochs and batches_per_epoch:
        return max(batches_per_epoch * budget.epochs - budget.warmup_batches, 0) * repeats
    return None


def stack_for(spec: Config) -> LoadingStack:
    """The loading stack the spec names (``backend=``), built from it."""
    stack = loading_stack(spec.backend.name)
    if stack is None:
        raise ConfigError([f"backend.name={spec.backend.name}: no such loading stack"])
    return stack(spec)


def build_step(step: StepConfig, device: torch.device) -> Optional[Callable[[Any], Any]]:
    """The step the spec's ``_target_`` names, called with the device and the knobs it takes; None: load only."""
    factory = callable_at(step._target_)
    return None if factory is None else factory(device, **step_knobs(factory, step))


def consumer_for(spec: Config, target: torch.device) -> tuple[Consumer, bool]:
    """What the loop does with each batch (the copy to ``target``, the step), and whether that is nothing:
    nothing to copy, pin-check or compute, so the per-batch hook stays out of the hot loop."""
    consumer = Consumer(HostToDevice(target, spec.device.non_blocking), build_step(spec.step, target),
                        prefetch=spec.device.prefetch)
    return consumer, consumer.step is None and target.type == "cpu" and not torch.cuda.is_available()


# torch's warnings for what a run records itself (more workers than CPUs, pin_memory without an
# accelerator): a sweep prints one line per job, not the same advice twice per job.
RECORDED_WARNINGS = (r"This DataLoader will create \d+ worker processes in total",
                     r".*'pin_memory' argument is set as true but no accelerator is found")


@contextmanager
def quiet_torch_warnings() -> Iterator[None]:
    with catch_warnings():
        for message in RECORDED_WARNINGS:
            filterwarnings("ignore", message=message, category=UserWarning)
        yield


def measure_job(spec: Config, on_batch: Optional[OnBatch] = None, built: Optional[BuiltDataset] = None,
                forked_from: tuple[int, ...] = ()) -> Measurement:
    """:func:`measure` in this one process, with torch's warnings for what the run records itself
    left out (several ranks: :func:`loaderexp.execute.ranks.measure_on_node`), and the host's pace before its
    loader starts and after its workers end (:mod:`loaderexp.harness.host_pace`)."""
    with quiet_torch_warnings():
        before = reference_ms()
        measured = measure(spec, on_batch, built, forked_from)
        measured.pace = PaceRecord(before, reference_ms())
        return measured


def measure(spec: Config, on_batch: Optional[OnBatch] = None, built: Optional[BuiltDataset] = None,
            forked_from: tuple[int, ...] = (), sampler: Optional[Any] = None,
            after_windows: Optional[Callable[[Any], None]] = None, device: Optional[str] = None) -> Measurement:
    """Build the spec's loader and measure it, repeat by repeat (:func:`repeat_until_precise`).

    ``built`` replaces the configured dataset (the benchmark measures both loops on one instance).
    ``forked_from`` are the processes this one was forked from with torch loaded or the dataset
    built (execute/holder.py): the memory figures count their share of the pages in common.
    A rank passes its ``sampler`` (DistributedSampler), its ``device`` and ``after_windows(loader)``,
    which keeps it loading while the other ranks still measure.
    """
    check_targets(spec)  # the imports it needs are this process's anyway: first, before any dataset
    target = resolve_device(device or spec.device.type)
    built = configured_dataset(spec) if built is None else built
    dataset = built.dataset
    seed_everything(spec.bench.seed)  # the loop starts from the seed, wherever the dataset was built
    iterable = isinstance(dataset, IterableDataset)
    try:
        warnings = check_borrowed(dataset, spec.loader, spec.sampler.name)
    except ValueError as error:  # a DataModule that batches otherwise than loader.batch_size
        raise ConfigError([str(error)]) from None
    if iterable and spec.sampler.name not in (None, "sequential"):
        warnings.append(f"sampler={spec.sampler.name} ignored: an IterableDataset orders its own samples")
    stack = stack_for(spec)
    loader, delivery = measured_loader(spec, dataset, sampler, stack)
    loader_spec = spec.loader
    warnings += shm_preflight(dataset, iterable, loader_spec.batch_size, loader_spec.num_workers,
                              loader_spec.prefetch_factor)
    consumer, idle = consumer_for(spec, target)
    per_epoch, available = length_of(loader), usable_memory_mb()
    check_worker_count(loader_spec, per_epoch, available, spec.dist.nproc_per_node)  # before any worker starts
    budget, plan = budget_from(spec.bench, loader_spec, per_epoch), repeat_plan(spec.bench)
    warnings += idle_workers_warning(loader_spec, per_epoch)
    total = planned_batches(budget, plan.fewest, per_epoch)
    gpu_index = (target.index or 0) if target.type == "cuda" else None
    with ResourceMonitor(spec.bench.resource_interval_s, gpu_index=gpu_index, forked_from=forked_from,
                         samples_read=delivery.delivered_samples, harness_bytes=delivery.held_bytes,
                         load_root=os.getppid() if RANK_ENV in os.environ else None) as monitor:
        probe = EpochMemory(monitor, built.memory_mb, _epoch_samples(delivery, dataset, loader_spec),
                            available, spec.bench.memory_epoch_s, loader_spec.persistent_workers,
                            stack.worker_start_method() in (None, "fork"))
        beat = None if on_batch is None else lambda done: on_batch(done, total)
        cold = None
        if spec.bench.cache.value != "warm":
            cold = cold_epoch(spec, dataset, loader, delivery, None if idle else consumer, beat, available)
        if cold is not None and cold.measured and spec.bench.cache.value == "cold":
            windows, stopped = [cold.epoch], "cold epoch"  # the cold epoch is the measurement
        else:
            windows, stopped = repeat_until_precise(loader, budget, plan, delivery, None if idle else consumer, beat,
                                                    probe)
        if after_windows is not None:
            after_windows(loader)
    facts = _facts(stack, dataset, loader, target)
    del loader  # persistent workers end here, not at interpreter exit
    record = delivery.record()
    warnings += [f"delivery check failed: {p}" for p in record.problems]
    return Measurement(windows=windows, stopped=stopped, budget=budget, noise_threshold=spec.bench.noise_threshold,
                       transfer=consumer.to_device.stats(), step=consumer.times(), resources=monitor.stats(),
                       delivery=record, facts=facts, warnings=warnings, memory=probe.record(), cold=cold)


def measured_loader(spec: Config, dataset: Any, sampler: Optional[Any] = None,
                    stack: Optional[LoadingStack] = None) -> tuple[Any, DeliveryTracker]:
    """The spec's loader as loaderexp measures it, over the spec's sampler (a rank's own, if given), and
    the tracker that checks what it delivers: for a map-style dataset every index the sampler handed
    out, exactly once."""
    stack = stack or stack_for(spec)
    iterable = isinstance(dataset, IterableDataset)
    if not iterable:
        sampler = sampler if sampler is not None else build_sampler(spec.sampler, dataset)
        sampler = sampler if sampler is not None else torch.utils.data.SequentialSampler(dataset)
    loader, recorder = stack.build(dataset, sampler, iterable)
    loader_spec = spec.loader
    delivery = DeliveryTracker(recorder=recorder, dataset_length=length_of(dataset), batch_size=loader_spec.batch_size,
                               drop_last=loader_spec.drop_last, in_order=loader_spec.in_order,
                               num_workers=loader_spec.num_workers,
                               tagged=recorder is not None if stack.tags_batches else None)
    return loader, delivery


def pickled_mb(dataset: Any, start_method: Optional[str]) -> Optional[float]:
    """What each worker started with spawn or forkserver receives: the dataset, pickled as
    multiprocessing pickles it (a forked worker inherits it instead)."""
    if start_method not in ("spawn", "forkserver"):
        return None
    from multiprocessing.reduction import ForkingPickler

    try:
        return len(ForkingPickler.dumps(dataset)) / 2**20
    except Exception:  # noqa: BLE001 - it will fail the same way in the workers, and say why there
        return None


def _facts(stack: LoadingStack, dataset: Any, loader: Any, device: torch.device) -> LoaderFacts:
    start_method = stack.worker_start_method()
    return LoaderFacts(
        backend=stack.name,
        device=str(device),
        data_source=getattr(dataset, "data_source", "user"),
        dataset_length=length_of(dataset),
        batches_per_epoch=length_of(loader),
        worker_start_method=start_method,
        dataset_pickle_mb=pickled_mb(dataset, start_method),
        mean_sample_bytes=getattr(dataset, "mean_sample_bytes", None),
        cuda_allocated_peak_mb=torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None,
        datamodule_baseline=own.baseline if (own := borrowed(dataset)) is not None else None,
    )


def _epoch_samples(delivery: DeliveryTracker, dataset: Any, loader: LoaderConfig) -> Optional[int]:
    """Samples an epoch delivers: the sampler's length (an iterable dataset's own), unknown for batches
    the dataset makes itself (``batch_size: null``)."""
    if loader.batch_size is None:
        return None
    sampler = delivery.recorder.sampler if delivery.recorder is not None else dataset
    length = length_of(sampler)
    if length is not None and loader.drop_last:
        length = length // loader.batch_size * loader.batch_size
    return length


def length_of(sized: Any) -> Optional[int]:
    try:
        return len(sized)
    except TypeError:
        return None
