"""Datasets whose true rate is known on any machine: the references loaderexp's figures are held against.

``SleepDataset``: each sample costs a fixed sleep and no CPU, so with ``W`` workers the loader makes
``W`` samples per sleep however few cores there are, and many-worker behaviour shows on a 2-core
machine.  The true rate still includes what sleep overshoots and what each batch costs to pass
between processes: ``benchmarks/reference.py`` measures it with a long bare loop.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

import torch
from torch.utils.data import Dataset


class SleepDataset(Dataset):
    """``num_samples`` tiny tensors; fetching one sleeps ``sleep_ms`` milliseconds."""

    data_source = "generated"

    def __init__(self, num_samples: int = 100_000, sleep_ms: float = 5.0, transform: Optional[Callable] = None):
        self.num_samples = num_samples
        self.sleep_s = sleep_ms / 1000.0
        self.transform = transform

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        sample = torch.full((4,), float(index))
        return sample if self.transform is None else self.transform(sample)
