"""Pipelines where one operation dominates, for the ceiling model's checks (benchmarks/ceiling.py): one op that
is plain CPU work, one that is a torchvision tensor op.  Used as transform targets on ``dataset=synthetic``:

    python -m loaderexp dataset=synthetic transform=to_tensor transform._target_=benchmarks.pipelines.cpu_op
"""

from __future__ import annotations

import time

import torch
from torchvision import transforms as T

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)


class Burn:
    """Spins until its thread has used ``ms`` of CPU: an operation whose cost is CPU and nothing else."""

    def __init__(self, ms: float):
        self.seconds = ms / 1000.0

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        until = time.thread_time() + self.seconds
        while time.thread_time() < until:
            pass
        return image


class Scale:
    """A cheap tensor op beside the costly one."""

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image * 0.5


def cpu_op(api: str = "v1", ms: float = 0.4) -> T.Compose:
    """A cheap op, a 0.4 ms CPU burn, a flip: the burn dominates."""
    return T.Compose([Scale(), Burn(ms), T.RandomHorizontalFlip()])


def tensor_op(api: str = "v1", kernel: int = 9) -> T.Compose:
    """A Gaussian blur (torchvision, on the tensor), then normalise: the blur dominates."""
    return T.Compose([T.GaussianBlur(kernel, sigma=2.0), T.Normalize(MEAN, STD)])
