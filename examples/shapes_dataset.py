"""A user's own Dataset, as loaderexp runs it by config alone (conf/dataset/custom.yaml).

Each sample draws a filled circle or square into a float image: some real CPU work per sample,
like a user's decoding or rendering.  Keep such a class in an importable module (not in
``__main__``): workers started with ``spawn`` or ``forkserver`` import it again by name.

    python -m loaderexp dataset=custom loader.num_workers=2
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch.utils.data import Dataset


class ShapesDataset(Dataset):
    CLASSES = ("circle", "square")

    def __init__(self, num_samples: int = 5000, size: int = 64, seed: int = 0, transform: Optional[Callable] = None):
        self.num_samples = num_samples
        self.size = size
        self.seed = seed
        self.transform = transform
        self.targets = [(seed + i) % 2 for i in range(num_samples)]
        grid = torch.arange(size, dtype=torch.float32)
        self.ys, self.xs = torch.meshgrid(grid, grid, indexing="ij")

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        cx, cy = (torch.rand(2, generator=generator) * 0.5 + 0.25) * self.size
        radius = float(torch.rand(1, generator=generator)) * self.size / 4 + self.size / 8
        if self.targets[index] == 0:
            mask = (self.xs - cx) ** 2 + (self.ys - cy) ** 2 <= radius**2
        else:
            mask = ((self.xs - cx).abs() <= radius) & ((self.ys - cy).abs() <= radius)
        colour = torch.rand(3, 1, 1, generator=generator)
        image = mask.float().unsqueeze(0) * colour + torch.rand(3, self.size, self.size, generator=generator) * 0.1
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[index]
