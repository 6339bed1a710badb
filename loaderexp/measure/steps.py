"""Stand-ins for a training step, and the consumer that hands each batch to one.

``none`` only loads (and copies): the loader's ceiling.  ``sleep`` takes a fixed time on the host,
like a step on an accelerator that the host just waits for.  ``matmul`` does real work on the
chosen device *with the batch*: it projects the batch's samples and multiplies on, then waits for
its own stream (as ``loss.item()`` would), not for every stream.

A step cannot start before its batch is on the device: the consumer waits for each copy's end
event first: on the compute stream for a device step, on the host for ``sleep`` and ``none``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch

from loaderexp.measure.loop import Clock
from loaderexp.measure.transfer import HostToDevice, tensors_of


def make_step(kind: str, ms: float, size: int, repeat: int, device: torch.device) -> Optional[Callable[[Any], None]]:
    if kind == "none":
        return None
    if kind == "sleep":
        seconds = ms / 1000.0
        return lambda batch: time.sleep(seconds)
    if kind == "matmul":
        return MatmulStep(size, repeat, device)
    raise ValueError(f"step.kind={kind!r}; valid: none, sleep, matmul")


def samples_tensor(batch: Any) -> torch.Tensor:
    """The batch's first tensor with a sample dimension, as ``(samples, features)`` floats."""
    for tensor in tensors_of(batch):
        if tensor.dim() > 0:
            return tensor.reshape(tensor.shape[0], -1).float()
    raise ValueError("step=matmul needs a batch with at least one tensor of samples")


class MatmulStep:
    """``(samples x features) @ (features x size)``, then ``repeat`` multiplies by a square matrix."""

    on_device = True  # its kernels queue behind the copy on the compute stream

    def __init__(self, size: int, repeat: int, device: torch.device):
        self.device = device
        self.size = size
        self.repeat = repeat
        self.square = torch.randn(size, size, device=device) / size**0.5
        self.projection: Optional[torch.Tensor] = None

    def __call__(self, batch: Any) -> torch.Tensor:
        x = samples_tensor(batch)
        if self.projection is None or self.projection.shape[0] != x.shape[1]:
            self.projection = torch.randn(x.shape[1], self.size, device=self.device) / x.shape[1] ** 0.5
        out = x @ self.projection
        for _ in range(self.repeat):
            out = out @ self.square
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
        return out


class Consumer:
    """What the training loop does with each batch: copy it to the device, wait for it, step.

    With ``prefetch`` (``device.prefetch=true``, as Lightning's and NVIDIA's data prefetchers do)
    the copy of batch N+1 is queued before step N runs, so with pinned memory it overlaps the step;
    the last batch of a repeat is stepped by :meth:`flush`, outside the measured window.
    Keeps the host time of each part for the measured batches, and on CUDA the device time of
    each measured step (events around it on the compute stream, after its wait for the copy), so
    the copy is not counted again as compute.
    """

    def __init__(self, to_device: HostToDevice, step: Optional[Callable[[Any], None]],
                 clock: Clock = time.perf_counter, prefetch: bool = False):
        self.to_device = to_device
        self.step = step
        self.clock = clock
        self.prefetch = prefetch
        self.on_device = bool(getattr(step, "on_device", False))
        self.pending: Optional[tuple[Any, Any, bool]] = None
        self.copy_s = 0.0
        self.step_s = 0.0
        self._step_events: list[tuple[Any, Any]] = []

    def __call__(self, batch: Any, measured: bool) -> None:
        start = self.clock()
        moved = self.to_device(batch, measured)
        copied = self.clock()
        if measured:
            self.copy_s += copied - start
        current = (moved, self.to_device.ready, measured)
        if self.prefetch:
            current, self.pending = self.pending, current
            if current is None:
                return  # the first batch: only copied, its step comes with the next one
        self._run_step(*current)
        if measured:
            self.step_s += self.clock() - copied

    def flush(self) -> None:
        """Step the batch a prefetch still holds (between repeats, unmeasured)."""
        if self.pending is not None:
            moved, ready, _ = self.pending
            self.pending = None
            self._run_step(moved, ready, False)

    def _run_step(self, moved: Any, ready: Any, measured: bool) -> None:
        self.to_device.wait(ready, self.on_device)
        if self.step is None:
            return
        timed = measured and self.on_device and self.to_device.cuda
        if timed:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        self.step(moved)
        if timed:
            end.record()
            self._step_events.append((begin, end))

    def device_step_s(self) -> Optional[float]:
        """Device time of the measured steps (CUDA), without the copies they waited for; else None."""
        if not self._step_events:
            return None
        torch.cuda.synchronize(self.to_device.device)
        return sum(begin.elapsed_time(end) for begin, end in self._step_events) / 1000
