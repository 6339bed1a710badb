"""Spec nodes -> dataset, sampler and DataLoader, with ``hydra.utils.instantiate``.

Every node is plain data here (:class:`~loaderexp.config.schema.TargetNode`, a resolved dict):
nothing from OmegaConf reaches a worker.
"""

from __future__ import annotations

import dataclasses
import inspect
from enum import Enum
from typing import Any, Callable, Optional

from hydra.errors import InstantiationException
from hydra.utils import get_method, instantiate
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

from loaderexp.config.schema import LoaderConfig, TargetNode
from loaderexp.data.lightning import borrow, borrowed, is_datamodule


def build_transform(node: TargetNode) -> Optional[Callable]:
    """The transform callable, or None for ``transform=none`` (``auto`` is resolved in config)."""
    if node.target is None:
        return None
    return instantiate(node.arguments, _convert_="all")


def accepts(target: str, parameter: str) -> bool:
    try:
        signature = inspect.signature(get_method(target))
    except (ValueError, TypeError):
        return False
    return parameter in signature.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()
    )


class DatasetError(ValueError):
    """The configured dataset could not be built; the message names the key and what to do."""


def build_dataset(node: TargetNode, transform: Optional[Callable]) -> Dataset:
    """The dataset the node names; a LightningDataModule's training dataset (its loader's parts kept)."""
    arguments = node.arguments
    if transform is not None and accepts(node.target, "transform"):
        arguments["transform"] = transform
    try:
        built = instantiate(arguments, _convert_="all")
    except InstantiationException as error:
        raise DatasetError(_explain_build_error(node, error.__cause__ or error)) from error
    if not is_datamodule(built):
        return built
    try:
        return borrow(built)
    except Exception as error:  # the user's prepare_data, setup or train_dataloader
        raise DatasetError(f"dataset._target_={node.target}: {type(error).__name__}: {error}") from error


def _explain_build_error(node: TargetNode, cause: BaseException) -> str:
    """Hydra's "Error in call to target" without the key or the path, said with both."""
    if isinstance(cause, OSError) and cause.filename:
        path = str(cause.filename)
        values = node.node
        keys = [k for k, v in values.items() if isinstance(v, str) and v and path.startswith(v.rstrip("/"))]
        key = max(keys, key=lambda k: len(values[k]), default=None)
        where = f"dataset.{key}={values[key]}" if key else f"dataset._target_={node.target}"
        return (f"{where}: {cause.strerror or type(cause).__name__}: {path}; point it at a folder that exists and "
                "can be written (generated data sets are written there once; data_root or LOADEREXP_DATA_ROOT "
                "moves them all), or at the real data")
    return f"dataset._target_={node.target}: {type(cause).__name__}: {cause}"


def build_sampler(node: TargetNode, dataset: Dataset) -> Optional[Sampler]:
    """The configured sampler over ``dataset``; None for iterable datasets (they order themselves)."""
    if isinstance(dataset, IterableDataset) or node.target is None:
        return None
    partial = instantiate(node.arguments, _convert_="all")
    return partial(dataset) if callable(partial) and not isinstance(partial, Sampler) else partial


def callable_at(path: Optional[str]) -> Optional[Callable]:
    """The function a dotted path names (``loader.collate_fn``), or None."""
    return get_method(path) if path else None


def collate_for(loader: LoaderConfig, dataset: Any) -> Optional[Callable]:
    """``loader.collate_fn``, else a DataModule's own (dataset=lightning), else None (default_collate)."""
    own = borrowed(dataset)
    return callable_at(loader.collate_fn) or (own.collate_fn if own is not None else None)


def build_loader(dataset: Dataset, sampler: Optional[Sampler], loader: LoaderConfig,
                 collate_fn: Optional[Callable] = None, batch_sampler: Optional[Sampler] = None) -> DataLoader:
    """A DataLoader from the loader spec: each of its fields is the DataLoader argument of that name
    (``LoaderConfig``), so a new knob needs no code here; None keeps DataLoader's own default.
    Functions are given as dotted paths and imported here; ``collate_fn`` (a DataModule's) replaces
    ``loader.collate_fn``'s when given.  A ``batch_sampler`` batches (and drops the last batch) itself."""
    kwargs = {f.name: getattr(loader, f.name) for f in dataclasses.fields(loader)}
    kwargs = {k: v.value if isinstance(v, Enum) else v for k, v in kwargs.items()}
    kwargs.update(sampler=sampler, worker_init_fn=callable_at(loader.worker_init_fn),
                  collate_fn=collate_fn or callable_at(loader.collate_fn))
    if batch_sampler is not None:
        kwargs.update(batch_sampler=batch_sampler, batch_size=1, drop_last=False)
    return DataLoader(dataset, **kwargs)
