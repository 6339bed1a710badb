"""Where a sample's life is split for the profile: an ImageFolder's file read and JPEG decode, a dataset's fetch with
its ``transform`` set aside and each operation of the transform, a dataset's ``__getitems__`` (a batch at a time,
as DataLoader's fetcher calls it), or its ``__getitem__`` whole."""

from __future__ import annotations

import inspect
import io
import sys
from typing import Any, Callable, Optional


def transform_ops(transform: Optional[Callable]) -> list[tuple[str, Callable]]:
    """A transform's operations by name: a Compose's elements (a repeated class gets #2, #3), or itself."""
    if transform is None:
        return []
    named, seen = [], {}
    for op in list(getattr(transform, "transforms", None) or [transform]):
        inner = getattr(op, "func", op)  # functools.partial
        name = getattr(inner, "__name__", None) if inspect.isroutine(inner) else type(op).__name__
        name = name or type(op).__name__
        seen[name] = seen.get(name, 0) + 1
        named.append((name if seen[name] == 1 else f"{name}#{seen[name]}", op))
    return named


def _is_image_folder(dataset: Any) -> bool:
    folder = sys.modules.get("torchvision.datasets.folder")
    if folder is None:  # an ImageFolder would have imported it; importing it here costs ~2 s per profile
        return False
    DatasetFolder, default_loader, pil_loader = folder.DatasetFolder, folder.default_loader, folder.pil_loader
    return isinstance(dataset, DatasetFolder) and getattr(dataset, "loader", None) in (default_loader, pil_loader)


class Split:
    """How one sample is fetched in stages: [(stage name, fn(index or previous output) -> output)]."""

    def __init__(self, dataset: Any):
        self.dataset = dataset
        self.transform = getattr(dataset, "transform", None)
        # a batch's indices -> its samples, where the dataset fetches batches (DataLoader calls it, not __getitem__)
        self.batched: Optional[Callable[[list[int]], Any]] = getattr(dataset, "__getitems__", None) or None
        if self.transform is not None or _is_image_folder(dataset):
            self.batched = None  # split sample by sample, each operation of its transform on its own
        if _is_image_folder(dataset):
            self.text = "ImageFolder: file read, JPEG decode, then each transform operation"
            self.fetch = [("read", self._read), ("decode", self._decode)]
        elif self.transform is not None:
            self.text = (f"{type(dataset).__name__}: __getitem__ with its transform set aside, then each "
                         "transform operation")
            self.fetch = [("fetch", self._untransformed)]
        elif self.batched:
            self.text = (f"{type(dataset).__name__}: its __getitems__ is one stage, a batch's samples at a time as "
                         "DataLoader's fetcher calls it (it has no transform attribute to split it at)")
            self.fetch = [("__getitems__", self.batched)]
        else:
            self.text = (f"{type(dataset).__name__}: its __getitem__ is one stage (it has no transform attribute "
                         "to split it at)")
            self.fetch = [("__getitem__", dataset.__getitem__)]
        self.ops = transform_ops(self.transform) if self.transform is not None else []

    def _read(self, index: int) -> bytes:
        with open(self.dataset.samples[index][0], "rb") as f:
            return f.read()

    @staticmethod
    def _decode(data: bytes) -> Any:
        from PIL import Image

        return Image.open(io.BytesIO(data)).convert("RGB")

    def _untransformed(self, index: int) -> Any:
        self.dataset.transform = None
        try:
            return self.dataset[index]
        finally:
            self.dataset.transform = self.transform

    def finish(self, raw: Any, index: int) -> Any:
        """The fetched (untransformed) sample as the dataset returns it once transformed."""
        if _is_image_folder(self.dataset):
            return raw, self.dataset.samples[index][1]
        return raw


def apply_op(op: Callable, sample: Any) -> Any:
    """A transform applies to the image of an (image, target) pair, as torchvision's datasets apply it."""
    if isinstance(sample, tuple) and sample:
        return (op(sample[0]), *sample[1:])
    return op(sample)
