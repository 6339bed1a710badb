"""Host-to-device copies of each batch, timed with CUDA events on a dedicated copy stream.

Without CUDA nothing is copied and the result says so (``measured=False`` with the reason):
a CPU-only machine has no host-to-device transfer to time, and a made-up number would mislead.
Whether batches really arrived in pinned memory is checked either way: the DataLoader silently
skips pinning without an accelerator and for batch types it does not know.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from loaderexp.harness.records import TransferStats


def tensors_of(batch: Any) -> list[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [t for value in batch.values() for t in tensors_of(value)]
    if isinstance(batch, (list, tuple)):
        return [t for value in batch for t in tensors_of(value)]
    return []


def batch_bytes(batch: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_of(batch))


def _move(batch: Any, device: torch.device, non_blocking: bool) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: _move(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        moved = [_move(v, device, non_blocking) for v in batch]
        return moved if isinstance(batch, list) else tuple(moved)
    return batch


def batch_size_and_bytes(batch: Any) -> tuple[int, int]:
    """Samples (the leading size of the first tensor that has one: a scalar field such as a dict's
    ``{"epoch": tensor(3), ...}`` is not the batch) and bytes of a collated batch, in one walk."""
    tensors = tensors_of(batch)
    if not tensors:
        return 1, 0
    samples = next((int(t.shape[0]) for t in tensors if t.dim() > 0), 1)
    return samples, sum(t.numel() * t.element_size() for t in tensors)


def is_pinned(batch: Any) -> bool:
    tensors = tensors_of(batch)
    return bool(tensors) and all(t.is_pinned() for t in tensors)


class HostToDevice:
    """Moves batches to ``device``; on CUDA each copy is bracketed by events on a copy stream.

    The copy is only queued: :attr:`ready` is the event that marks its end, and the consumer waits
    for it before the step uses the batch (:meth:`wait`), as a training step's first kernel must.
    """

    def __init__(self, device: torch.device, non_blocking: bool = True):
        self.device = device
        self.non_blocking = non_blocking
        self.cuda = device.type == "cuda"
        self.ready: Optional[Any] = None  # the end event of the latest copy (None without CUDA)
        self._events: list[tuple[Any, Any]] = []
        self._batches = 0
        self._pinned = 0
        self._bytes = 0
        self.stream = torch.cuda.Stream(device) if self.cuda else None
        # Without an accelerator nothing can be pinned, and asking only warns: don't ask.
        self._can_pin = torch.cuda.is_available()

    def __call__(self, batch: Any, measured: bool = True) -> Any:
        if measured:
            self._batches += 1
            self._pinned += self._can_pin and is_pinned(batch)
        if not self.cuda:
            return batch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            start.record(self.stream)
            moved = _move(batch, self.device, self.non_blocking)
            end.record(self.stream)
        # The copy's memory is used on the compute stream: the caching allocator must not hand it
        # out again before that stream is done with it.
        for tensor in tensors_of(moved):
            tensor.record_stream(torch.cuda.current_stream(self.device))
        self.ready = end
        if measured:
            self._events.append((start, end))
            self._bytes += batch_bytes(batch)
        return moved

    def wait(self, ready: Any, on_device: bool) -> None:
        """Wait for a copy to end: the compute stream waits (a step's kernels queue behind it), or,
        for a step that runs on the host or no step at all, the host itself."""
        if ready is None:
            return
        if on_device:
            torch.cuda.current_stream(self.device).wait_event(ready)
        else:
            ready.synchronize()

    def stats(self) -> TransferStats:
        if not self.cuda:
            reason = "CUDA not available" if not torch.cuda.is_available() else f"device is {self.device}"
            return TransferStats(False, f"{reason}: host-to-device copy not measured", self._batches, self._pinned)
        torch.cuda.synchronize(self.device)  # events are only readable once recorded
        total = sum(start.elapsed_time(end) for start, end in self._events)
        return TransferStats(True, "", self._batches, self._pinned, self._bytes, total)
