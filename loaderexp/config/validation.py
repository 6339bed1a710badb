"""Cross-field checks on a run's spec, before any dataset is built or worker started.

Types, unknown keys and enum values are caught by the schema at compose time; what needs two
fields at once, the loading stack's declared knobs, or the target of an ``_target_`` node
(:mod:`.targets`) is checked here.  Every problem is gathered into one :class:`ConfigError` (one
line per problem, each naming the key, the value and what is allowed).  Settings that are legal
but pointless on this machine run, with warnings that the result records.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any, Optional, Sequence

from loaderexp.config.errors import ConfigError
from loaderexp.config.schema import GROUPS, BenchConfig, Config, LoaderConfig
from loaderexp.config.targets import target_problems
from loaderexp.result import param_text

DEFAULT_LOADER = LoaderConfig()
# Knobs that mean nothing without workers; without them DataLoader needs each at its default.
NEEDS_WORKERS = ("prefetch_factor", "persistent_workers", "timeout", "multiprocessing_context")
# Samplers a rank's DistributedSampler stands in for: it shuffles (random) or keeps the order (sequential).
DIST_SAMPLERS = ("random", "sequential", "distributed")


def validate(spec: Config, cuda_available: bool, cpus: float, targets: bool = True,
             gpus: Optional[int] = None, more: Sequence[str] = ()) -> list[str]:
    """Raise ConfigError listing every invalid setting; return the warnings for a legal config.

    ``more`` are the problems later stages found in the same spec (the loading stack's, from
    :func:`loaderexp.loading.registry.checked`): one error lists them all.

    ``targets=False`` leaves out what needs imports (the ``_target_`` nodes, ``collate_fn``,
    ``worker_init_fn``): the runner leaves those to the measuring process, where torch and
    torchvision are loaded already, and :func:`check_targets` does them first thing there.
    """
    problems: list[str] = range_problems(spec)
    warnings: list[str] = []
    _check_loader(spec.loader, problems, warnings, cpus, spec.dist.nproc_per_node)
    if spec.dataset.yields_batches and spec.loader.batch_size is not None:  # else a short last item fails to stack
        problems.append(f"loader.batch_size={spec.loader.batch_size}: dataset={spec.dataset.name} yields whole batches "
                        "(each item is one): set loader.batch_size=null (DataLoader's batching off)")
    _check_dist(spec, problems)
    _check_bench(spec.bench, problems)
    _check_device(spec, cuda_available, problems, warnings)
    _check_rank_gpus(spec, cuda_available, gpus, problems)
    if targets:
        problems += target_problems(spec)
    problems += more
    if problems:
        raise ConfigError(problems)
    return warnings


def check_targets(spec: Config) -> None:
    """Raise ConfigError when a ``_target_`` or a callable knob does not import or take its arguments."""
    problems = target_problems(spec)
    if problems:
        raise ConfigError(problems)


def changed_knobs(loader: LoaderConfig) -> list[str]:
    """The loader knobs set away from the schema's defaults: what a user's DataLoader call must say."""
    return [f.name for f in dataclasses.fields(LoaderConfig) if getattr(loader, f.name) != getattr(DEFAULT_LOADER, f.name)]


def without_inapplicable(loader: LoaderConfig) -> tuple[LoaderConfig, list[str]]:
    """The loader spec as DataLoader can take it, and what was left out.

    With ``num_workers=0`` DataLoader refuses ``prefetch_factor``, ``persistent_workers``,
    ``timeout`` and ``multiprocessing_context`` (they configure workers): a sweep over
    ``num_workers=range(0,8)`` with ``prefetch_factor=4`` still measures its baseline, without them.
    """
    if loader.num_workers != 0:
        return loader, []
    changed = [key for key in NEEDS_WORKERS if getattr(loader, key) != getattr(DEFAULT_LOADER, key)]
    dropped = [f"loader.{key}={show(getattr(loader, key))}" for key in changed]
    return dataclasses.replace(loader, **{key: getattr(DEFAULT_LOADER, key) for key in changed}), dropped


def _check_dist(spec: Config, problems: list[str]) -> None:
    ranks = spec.dist.nproc_per_node
    if ranks > 1 and spec.sampler.name not in DIST_SAMPLERS:
        problems.append(f"sampler={spec.sampler.name} with dist.nproc_per_node={ranks}: each rank loads "
                        f"through DistributedSampler; valid samplers: {', '.join(DIST_SAMPLERS)}")


def _check_loader(loader: LoaderConfig, problems: list[str], warnings: list[str], cpus: int, ranks: int = 1) -> None:
    workers = loader.num_workers
    if loader.batch_size is None and loader.drop_last:
        problems.append("loader.drop_last=true: needs a loader.batch_size (null turns batching off: each "
                        "item of the dataset is already a batch, and there is no short last batch to drop)")
    _, dropped = without_inapplicable(loader)
    if dropped:
        warnings.append(f"{', '.join(dropped)} not applied: with num_workers=0 there are no workers to configure "
                        "(DataLoader refuses them), so this run loads without")
    if ranks > 1 and ranks * workers > cpus:
        warnings.append(f"dist.nproc_per_node={ranks} x loader.num_workers={workers} = {ranks * workers} workers "
                        f"exceed the {cpus} CPUs this process may use: the ranks' workers compete for cores")
    elif workers > cpus:
        warnings.append(
            f"loader.num_workers={workers} exceeds the {cpus} CPUs this process may use: workers compete for cores"
        )
    if not loader.in_order and workers == 0:
        warnings.append("loader.in_order=false has no effect with num_workers=0")


def _check_bench(bench: BenchConfig, problems: list[str]) -> None:
    if bench.max_repeats < bench.min_repeats:
        problems.append(f"bench.max_repeats={bench.max_repeats}: must be >= bench.min_repeats={bench.min_repeats}")


def check_tracking(spec: Config) -> None:
    """The tracking settings alone, checked before a store is opened: an empty experiment name is a
    config error, not an unavailable store."""
    problems = range_problems(spec, ("tracking",))
    if problems:
        raise ConfigError(problems)


def range_problems(spec: Config, groups: tuple[str, ...] = tuple(GROUPS)) -> list[str]:
    """Every setting against the values its schema field declares (``bounded``): in range, a float
    finite (``nan`` would turn a check off: ``nan > 0`` is false), a name not empty."""
    problems = []
    for group in groups:
        node = getattr(spec, group)
        schema = type(node) if isinstance(node, GROUPS[group]) else GROUPS[group]  # a stack's own options too
        for f in dataclasses.fields(schema):
            value, meta = getattr(node, f.name), f.metadata
            if value is None or isinstance(value, (bool, Enum)):
                continue
            if isinstance(value, str):
                if meta.get("nonempty") and not value.strip():
                    problems.append(f"{group}.{f.name}={value!r}: must not be empty")
                continue
            if not isinstance(value, (int, float)):
                continue
            ge, gt = meta.get("ge"), meta.get("gt")
            finite = math.isfinite(value)
            if finite and (ge is None or value >= ge) and (gt is None or value > gt):
                continue
            rule = meta.get("rule") or (f">= {ge:g}" if ge is not None else f"> {gt:g}" if gt is not None else "")
            rule = rule if finite else f"a finite number{' ' + rule if rule else ''}"
            problems.append(f"{group}.{f.name}={show(value)}: must be {rule}")
    return problems


def _check_rank_gpus(spec: Config, cuda_available: bool, gpus: Optional[int], problems: list[str]) -> None:
    ranks, device = spec.dist.nproc_per_node, show(spec.device.type)
    if ranks > 1 and cuda_available and device != "cpu" and gpus is not None and ranks > gpus:
        problems.append(f"dist.nproc_per_node={ranks} with device.type={device}: each rank uses its own GPU and this "
                        f"host has {gpus}; valid here: 1..{gpus}, or device.type=cpu")


def _check_device(spec: Config, cuda_available: bool, problems: list[str], warnings: list[str]) -> None:
    device = show(spec.device.type)
    if device == "cuda" and not cuda_available:
        problems.append("device.type=cuda: CUDA is not available on this machine; valid here: auto, cpu")
    if spec.loader.pin_memory:
        if not cuda_available:
            warnings.append(
                "loader.pin_memory=true with no accelerator: the DataLoader skips pinning, "
                "batches stay pageable and nothing is copied to a device"
            )
        elif device == "cpu":
            warnings.append(
                "loader.pin_memory=true with device.type=cpu: pinning costs time but no batch is copied to the GPU"
            )


def show(value: Any) -> str:
    """A setting's value as the user wrote it: ``5``, not ``5.0``; ``spawn``, not ``MpContext.spawn``."""
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    return param_text(value)
