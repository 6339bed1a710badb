"""In-memory tensors with no decode work: what remains is the DataLoader's own overhead."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch
from torch.utils.data import Dataset


class SyntheticImages(Dataset):
    """``num_samples`` float32 images of ``shape`` and int64 labels, made once from ``seed``."""

    data_source = "generated"

    def __init__(
        self,
        num_samples: int = 20_000,
        shape: Sequence[int] = (3, 32, 32),
        num_classes: int = 10,
        seed: int = 0,
        transform: Optional[Callable] = None,
    ):
        generator = torch.Generator().manual_seed(seed)
        self.images = torch.rand((num_samples, *shape), generator=generator)
        self.targets = torch.randint(0, num_classes, (num_samples,), generator=generator)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        image = self.images[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[index]


class SyntheticBatches(SyntheticImages):
    """Pre-batched: item ``i`` is the ``batch`` images from ``i x batch`` on, one slice of the tensor, for
    ``loader.batch_size=null`` (DataLoader's automatic batching off: the dataset's items are batches).
    What a dataset that reads whole shards or record blocks looks like; the last item may be short."""

    def __init__(self, batch: int = 64, **kwargs):
        super().__init__(**kwargs)
        self.batch = batch

    def __len__(self) -> int:
        return -(-len(self.targets) // self.batch)

    def __getitem__(self, index: int):
        start = index * self.batch
        images = self.images[start:start + self.batch]
        if self.transform is not None:
            images = self.transform(images)
        return images, self.targets[start:start + self.batch]
