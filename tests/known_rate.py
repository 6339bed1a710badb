"""A dataset whose true rate is known on any machine: each sample costs a fixed sleep and no CPU.

With ``W`` workers the loader makes ``W`` batches per batch time, however few cores there are, so
many-worker behaviour shows on a 2-core machine. The true rate still includes what sleep overshoots
and what each batch costs to pass between processes: :func:`bare_loop_rate` measures it with a
long, well-warmed ``for batch in loader`` loop, written here and not by loaderexp.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset


class SleepDataset(Dataset):
    """``num_samples`` tiny tensors; fetching one sleeps ``sleep_ms`` milliseconds."""

    def __init__(self, num_samples: int = 100_000, sleep_ms: float = 5.0):
        self.num_samples = num_samples
        self.sleep_s = sleep_ms / 1000.0

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        return torch.full((4,), float(index))


def loaderexp_overrides(workers: int, batch_size: int, sleep_ms: float, repo: str) -> list[str]:
    """The same data set and loader as a loaderexp run (``dataset=custom`` pointed at this class)."""
    return [
        "dataset=custom", "dataset._target_=tests.known_rate.SleepDataset", f"dataset.python_path={repo}",
        "~dataset.size", "~dataset.seed", f"+dataset.sleep_ms={sleep_ms}", "dataset.num_samples=100000",
        f"loader.batch_size={batch_size}", f"loader.num_workers={workers}", "tracking=none",
    ]


def bare_loop_rate(dataset: Dataset, batch_size: int, num_workers: int, rounds: int = 100) -> float:
    """Samples/s of a plain loop over ``rounds`` x ``num_workers`` batches after a generous warm-up.

    One round is one batch per worker; with 100 rounds, where the loop starts and stops inside a
    round moves the rate by at most 1%.
    """
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
    per_round = max(num_workers, 1)
    warmup = 4 * per_round + 2
    measured = rounds * per_round
    iterator = iter(loader)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    for _ in range(measured):
        next(iterator)
    elapsed = time.perf_counter() - start
    del iterator
    return measured * batch_size / elapsed
