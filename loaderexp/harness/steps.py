"""Stand-ins for a training step, and the consumer that hands each batch to one.

``none`` only loads (and copies): the loader's ceiling.  ``sleep`` takes a fixed time on the host,
like a step on an accelerator that the host just waits for.  ``matmul`` does real work on the
chosen device *with the batch*: it projects the batch's samples and multiplies on, then waits for
its own stream (as ``loss.item()`` would), not for every stream.  ``model`` trains a torchvision
model on the batch (forward, backward, optimizer step), and ``custom`` is the user's own step.
Each is the factory its ``conf/step/*.yaml`` names as ``_target_``: called with the device and the
step's knobs its signature names (``ms``, ``size``, ...).

A step cannot start before its batch is on the device: the consumer waits for each copy's end
event first: on the compute stream for a device step, on the host for ``sleep`` and ``none``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch

from loaderexp.harness.loop import Clock
from loaderexp.harness.records import StepTimes
from loaderexp.harness.transfer import HostToDevice, tensors_of


def sleep_step(device: torch.device, ms: float) -> Callable[[Any], None]:
    """``step=sleep``: ``ms`` milliseconds on the host per batch, like a step the host only waits for."""
    seconds = ms / 1000.0
    return lambda batch: time.sleep(seconds)


class ModelStep:
    """A training step of a torchvision model on the batch: forward, loss, backward, SGD step.

    Built without pretrained weights (nothing is downloaded).  The batch's first tensor of images
    is the input (uint8 images are scaled to [0, 1]) and its first 1-d integer tensor the labels.
    Like ``loss.item()``, it waits for its own stream at the end, not for every stream.
    """

    on_device = True

    def __init__(self, device: torch.device, model: str, num_classes: int, lr: float):
        import torchvision

        self.device = device
        self.model = torchvision.models.get_model(model, weights=None, num_classes=num_classes).to(device).train()
        self.num_classes = num_classes
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.loss = torch.nn.CrossEntropyLoss()

    @staticmethod
    def config_problems(model: str, **_: Any) -> list[str]:
        """``step.model`` must be a model torchvision can build by name."""
        import torchvision

        names = sorted(torchvision.models.list_models(module=torchvision.models))
        if model in names:
            return []
        return [f"step.model={model}: not a torchvision classification model; valid: {', '.join(names)}"]

    def __call__(self, batch: Any) -> torch.Tensor:
        images, labels = images_and_labels(batch, self.num_classes)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.model(images), labels)
        loss.backward()
        self.optimizer.step()
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
        return loss.detach()


def images_and_labels(batch: Any, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(images, labels) from a collated batch: its first tensor of 4 dimensions (N, C, H, W) and
    its first 1-d integer tensor of as many labels (class 0 for all when it has none)."""
    tensors = tensors_of(batch)
    images = next((t for t in tensors if t.dim() == 4), None)
    if images is None:
        raise ValueError("step=model needs a batch of images (a tensor N x C x H x W); "
                         f"this batch holds tensors of shapes {[tuple(t.shape) for t in tensors]}")
    if not images.is_floating_point():
        images = images.float() / 255
    labels = next((t for t in tensors if t.dim() == 1 and not t.is_floating_point() and len(t) == len(images)), None)
    if labels is None:
        labels = torch.zeros(len(images), dtype=torch.long, device=images.device)
    return images, labels.long().clamp_(0, num_classes - 1)


def samples_tensor(batch: Any) -> torch.Tensor:
    """The batch's first tensor with a sample dimension, as ``(samples, features)`` floats."""
    for tensor in tensors_of(batch):
        if tensor.dim() > 0:
            return tensor.reshape(tensor.shape[0], -1).float()
    raise ValueError("step=matmul needs a batch with at least one tensor of samples")


class MatmulStep:
    """``(samples x features) @ (features x size)``, then ``repeat`` multiplies by a square matrix."""

    on_device = True  # its kernels queue behind the copy on the compute stream

    def __init__(self, device: torch.device, size: int, repeat: int):
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
                 clock: Clock = time.perf_counter, prefetch: bool = False, cpu_clock: Clock = time.process_time):
        self.to_device = to_device
        self.step = step
        self.clock = clock
        self.cpu_clock = cpu_clock  # the process's CPU, every thread: a step on the CPU runs on torch's intra-op ones
        self.prefetch = prefetch
        self.on_device = bool(getattr(step, "on_device", False))
        self.pending: Optional[tuple[Any, Any, bool]] = None
        self.copy_s = 0.0
        self.step_s = 0.0
        self.step_cpu_s = 0.0
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
        cpu = self.cpu_clock()
        self._run_step(*current)
        if measured:
            self.step_s += self.clock() - copied
            self.step_cpu_s += self.cpu_clock() - cpu

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

    def times(self) -> StepTimes:
        """What the measured batches' copies and steps took (read once, after the windows)."""
        return StepTimes(has_step=self.step is not None, copy_s=self.copy_s, step_s=self.step_s,
                         device_step_s=self.device_step_s(), step_cpu_s=self.step_cpu_s)
