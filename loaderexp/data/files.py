"""Which files a dataset reads, and when: what a cold page cache costs it.

A dataset names its files by ``dataset.files`` (a glob, or a list of globs) in its config, or by a
``files`` attribute; an ImageFolder (torchvision's ``DatasetFolder``) by its samples.  Datasets that
read their files once, when built (CIFAR-10's batches, kept in memory), are told apart: a cold cache
costs their build, not their epochs.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from typing import Any, Optional

from loaderexp.config.schema import TargetNode


@dataclass(frozen=True)
class DatasetFiles:
    paths: list[str]
    per_epoch: bool  # read again every epoch (else only when the dataset is built)
    how: str  # where the list came from


def dataset_files(dataset: Any, node: TargetNode) -> Optional[DatasetFiles]:
    """The files ``dataset`` reads, or None when it names none."""
    patterns = node.get("files")
    if patterns:
        paths = sorted({p for pattern in ([patterns] if isinstance(patterns, str) else patterns)
                        for p in glob.glob(str(pattern), recursive=True)})
        return DatasetFiles(paths, True, f"dataset.files={patterns}")
    named = getattr(dataset, "files", None)
    if named is not None:
        return DatasetFiles([str(p) for p in named], True, "the dataset's files attribute")
    samples = getattr(dataset, "samples", None)
    if isinstance(samples, list) and samples and isinstance(samples[0], tuple) and isinstance(samples[0][0], str):
        return DatasetFiles([path for path, _ in samples], True, "its samples (an ImageFolder)")
    folder = getattr(dataset, "base_folder", None)
    listed = getattr(dataset, "train_list", None)
    if folder and listed and hasattr(dataset, "root"):  # torchvision's CIFAR: its batch files, loaded when built
        import os

        return DatasetFiles([os.path.join(dataset.root, folder, name) for name, _ in listed], False,
                            "its batch files (read when it is built)")
    return None
