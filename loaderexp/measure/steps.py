"""Stand-ins for a training step, so a run can tell whether compute waits for data.

``none`` only loads (and copies): the loader's ceiling.  ``sleep`` takes a fixed time, like a
step on an accelerator that the host just waits for.  ``matmul`` does real work on the chosen
device and synchronises, so its time is the compute's own.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch

from loaderexp.measure.loop import Clock
from loaderexp.measure.transfer import HostToDevice


def make_step(kind: str, ms: float, size: int, repeat: int, device: torch.device) -> Optional[Callable[[Any], None]]:
    if kind == "none":
        return None
    if kind == "sleep":
        seconds = ms / 1000.0
        return lambda batch: time.sleep(seconds)
    if kind == "matmul":
        return MatmulStep(size, repeat, device)
    raise ValueError(f"step.kind={kind!r}; valid: none, sleep, matmul")


class MatmulStep:
    def __init__(self, size: int, repeat: int, device: torch.device):
        self.device = device
        self.repeat = repeat
        self.matrix = torch.randn(size, size, device=device) / size**0.5

    def __call__(self, batch: Any) -> None:
        out = self.matrix
        for _ in range(self.repeat):
            out = out @ self.matrix
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


class Consumer:
    """What the training loop does with each batch: copy it to the device, then step.

    Keeps the host time of each part for the measured batches, to tell copy from compute.
    """

    def __init__(self, to_device: HostToDevice, step: Optional[Callable[[Any], None]], clock: Clock = time.perf_counter):
        self.to_device = to_device
        self.step = step
        self.clock = clock
        self.copy_s = 0.0
        self.step_s = 0.0

    def __call__(self, batch: Any, measured: bool) -> None:
        start = self.clock()
        moved = self.to_device(batch, measured)
        copied = self.clock()
        if self.step is not None:
            self.step(moved)
        if measured:
            self.copy_s += copied - start
            self.step_s += self.clock() - copied
