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
