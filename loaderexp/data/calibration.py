"""Datasets whose true cost is known on any machine: the references loaderexp's figures are held against.

``SleepDataset``: each sample costs a fixed sleep and no CPU, so with ``W`` workers the loader makes
``W`` samples per sleep however few cores there are, and many-worker behaviour shows on a 2-core
machine.  The true rate still includes what sleep overshoots and what each batch costs to pass
between processes: ``benchmarks/reference.py`` measures it with a long bare loop.

``BurnDataset``: each sample costs a fixed length of CPU time (its own process's, however busy the
cores): the rate grows with the workers up to about the usable cores over the burn.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

import numpy as np
import torch
from torch.utils.data import Dataset


class _Costed(Dataset):
    """``num_samples`` tiny tensors, each costing what :meth:`cost` spends."""

    data_source = "generated"

    def __init__(self, num_samples: int, transform: Optional[Callable]):
        self.num_samples = num_samples
        self.transform = transform

    def __len__(self) -> int:
        return self.num_samples

    def cost(self) -> None:
        raise NotImplementedError

    def __getitem__(self, index: int) -> torch.Tensor:
        self.cost()
        sample = torch.full((4,), float(index))
        return sample if self.transform is None else self.transform(sample)


class SleepDataset(_Costed):
    """``num_samples`` tiny tensors; fetching one sleeps ``sleep_ms`` milliseconds."""

    def __init__(self, num_samples: int = 100_000, sleep_ms: float = 5.0, transform: Optional[Callable] = None):
        super().__init__(num_samples, transform)
        self.sleep_s = sleep_ms / 1000.0

    def cost(self) -> None:
        time.sleep(self.sleep_s)


class BurnDataset(_Costed):
    """``num_samples`` tiny tensors; fetching one spins until its thread has used ``burn_ms`` of CPU."""

    def __init__(self, num_samples: int = 100_000, burn_ms: float = 1.0, transform: Optional[Callable] = None):
        super().__init__(num_samples, transform)
        self.burn_s = burn_ms / 1000.0

    def cost(self) -> None:
        until = time.thread_time() + self.burn_s
        while time.thread_time() < until:
            pass


class ListBacked(Dataset):
    """``num_samples`` samples of ``sample_bytes`` random bytes, each its own Python object in a list.

    Every read writes the object's refcount into the page that holds it, so a worker forked from the
    process that built the list copies each page it reads (pytorch#13246): what a dataset of Python
    lists, dicts or PIL images does to a training script's memory.
    """

    data_source = "generated"

    def __init__(self, num_samples: int = 100_000, sample_bytes: int = 4096, seed: int = 0,
                 transform: Optional[Callable] = None):
        generator = np.random.default_rng(seed)
        self.samples = [generator.bytes(sample_bytes) for _ in range(num_samples)]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> torch.Tensor:
        sample = torch.from_numpy(np.frombuffer(self.samples[index], dtype=np.uint8).copy())
        return sample if self.transform is None else self.transform(sample)


class ArrayBacked(ListBacked):
    """The same samples in one numpy array: a read writes no page of it, so workers copy nothing."""

    def __init__(self, num_samples: int = 100_000, sample_bytes: int = 4096, seed: int = 0,
                 transform: Optional[Callable] = None):
        generator = np.random.default_rng(seed)
        self.samples = np.frombuffer(generator.bytes(num_samples * sample_bytes), dtype=np.uint8).reshape(
            num_samples, sample_bytes)
        self.transform = transform

    def __getitem__(self, index: int) -> torch.Tensor:
        sample = torch.from_numpy(self.samples[index].copy())
        return sample if self.transform is None else self.transform(sample)
