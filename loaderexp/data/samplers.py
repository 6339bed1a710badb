"""Samplers that need more than the dataset to be built: weights, subsets.

Each takes the dataset first, so a config node with ``_partial_: true`` builds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch.utils.data import Dataset, SubsetRandomSampler, WeightedRandomSampler


def class_labels(dataset: Dataset) -> np.ndarray:
    """Labels from ``dataset.targets`` when it has them, else by reading every sample once."""
    targets = getattr(dataset, "targets", None)
    if targets is None:
        targets = [dataset[i][1] for i in range(len(dataset))]  # type: ignore[arg-type]
    return np.asarray(torch.as_tensor(targets).tolist())


def weighted(
    dataset: Dataset,
    weights_file: Optional[str] = None,
    num_samples: Optional[int] = None,
    replacement: bool = True,
    seed: int = 0,
) -> WeightedRandomSampler:
    """Class-balanced sampling: weight 1/frequency of each sample's class, or weights from a file.

    ``weights_file`` holds one weight per sample (.npy, or text with one number per line).
    """
    if weights_file:
        path = Path(weights_file)
        weights = np.load(path) if path.suffix == ".npy" else np.loadtxt(path)
        if len(weights) != len(dataset):  # type: ignore[arg-type]
            raise ValueError(f"sampler.weights_file={weights_file}: {len(weights)} weights for {len(dataset)} samples")
    else:
        labels = class_labels(dataset)
        counts = np.bincount(labels)
        weights = 1.0 / counts[labels]
    generator = torch.Generator().manual_seed(seed)
    return WeightedRandomSampler(
        torch.as_tensor(weights, dtype=torch.double),
        num_samples=num_samples or len(dataset),  # type: ignore[arg-type]
        replacement=replacement,
        generator=generator,
    )


def subset_random(dataset: Dataset, fraction: float = 0.5, seed: int = 0) -> SubsetRandomSampler:
    """A random ``fraction`` of the indices, visited in a new random order each epoch."""
    if not 0 < fraction <= 1:
        raise ValueError(f"sampler.fraction={fraction}: must be in (0, 1]")
    generator = torch.Generator().manual_seed(seed)
    count = max(1, int(len(dataset) * fraction))  # type: ignore[arg-type]
    indices = torch.randperm(len(dataset), generator=generator)[:count].tolist()  # type: ignore[arg-type]
    return SubsetRandomSampler(indices, generator=generator)
