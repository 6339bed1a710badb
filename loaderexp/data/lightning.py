"""``dataset=lightning``: the loader a LightningDataModule already builds, measured with the sweep's knobs.

``dataset._target_`` names the user's DataModule.  Building it calls ``prepare_data()`` and
``setup("fit")`` and takes what ``train_dataloader()`` returns apart: its dataset is what is measured,
its sampler is ``sampler=datamodule``'s, its collate_fn is used unless ``loader.collate_fn`` names
another, and its batch size must be ``loader.batch_size`` (the preset passes that one to the
DataModule).  The DataModule's own loader knobs are recorded as its baseline.  Nothing of Lightning
is imported: a DataModule is recognised by its methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from torch.utils.data import DataLoader, Dataset, default_collate

from loaderexp.config.schema import LoaderConfig

# What each DataModule's train_dataloader() held, by id of its dataset (forked processes inherit it).
BORROWED: dict[int, "Borrowed"] = {}


@dataclass(frozen=True)
class Borrowed:
    sampler: Any  # train_dataloader()'s sampler (a shuffling DataLoader's RandomSampler, or the user's)
    collate_fn: Optional[Callable]  # None: DataLoader's default_collate
    baseline: dict[str, Any]  # the DataModule's own DataLoader knobs, as recorded (info.datamodule_baseline)
    batch_size: Optional[int]  # train_dataloader()'s
    datamodule: str  # module.Class


def is_datamodule(value: Any) -> bool:
    return not isinstance(value, Dataset) and all(
        callable(getattr(value, name, None)) for name in ("prepare_data", "setup", "train_dataloader"))


def borrow(datamodule: Any) -> Dataset:
    """The training dataset of ``datamodule``, its loader's sampler, collate_fn and knobs kept in BORROWED."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    name = type(datamodule).__qualname__
    if not isinstance(loader, DataLoader):
        raise TypeError(f"{name}.train_dataloader() returned a {type(loader).__name__}, not a DataLoader: "
                        "loaderexp measures DataLoader knobs (give it a DataLoader, or measure the dataset itself)")
    batches = loader.batch_sampler
    sampler = getattr(batches, "sampler", None) if batches is not None else loader.sampler
    collate = None if loader.collate_fn is default_collate else loader.collate_fn
    workers = loader.num_workers
    qualified = f"{type(datamodule).__module__}.{name}"
    baseline = {"batch_size": loader.batch_size, "num_workers": workers, "pin_memory": loader.pin_memory,
                "prefetch_factor": loader.prefetch_factor if workers else None,
                "persistent_workers": loader.persistent_workers, "drop_last": loader.drop_last,
                "sampler": type(sampler).__name__, "collate_fn": _name(collate) if collate else "default_collate",
                "datamodule": qualified}
    BORROWED[id(loader.dataset)] = Borrowed(sampler, collate, baseline, loader.batch_size, qualified)
    return loader.dataset


def borrowed(dataset: Any) -> Optional[Borrowed]:
    return BORROWED.get(id(dataset))


def datamodule_sampler(dataset: Any) -> Any:
    """``sampler=datamodule``: the sampler the DataModule's train_dataloader() had."""
    found = borrowed(dataset)
    if found is None:
        raise ValueError("sampler=datamodule takes the sampler of a LightningDataModule's train_dataloader(): use it "
                         "with dataset=lightning, or choose another sampler (random, sequential, ...)")
    return found.sampler


def check_borrowed(dataset: Any, loader: LoaderConfig, sampler_name: Optional[str]) -> list[str]:
    """Refuses a batch size other than the DataModule's; warns when another sampler replaces its own."""
    found = borrowed(dataset)
    if found is None:
        return []
    size = found.batch_size
    if loader.batch_size != size:
        raise ValueError(f"loader.batch_size={loader.batch_size}, but {found.datamodule}.train_dataloader()"
                         f" batches {size} samples: set loader.batch_size={size} to measure it as it trains, or "
                         "let the DataModule take loaderexp's (dataset.batch_size=${loader.batch_size}, as the "
                         "preset does)")
    if sampler_name != "datamodule":
        return [f"sampler={sampler_name} replaces the DataModule's own {type(found.sampler).__name__}: "
                "sampler=datamodule measures it"]
    return []


def _name(function: Callable) -> str:
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', type(function).__name__)}"
