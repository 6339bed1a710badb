"""torchvision's FakeData: PIL images made on the fly from a seeded RNG (no files, some CPU per sample)."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from torchvision.datasets import FakeData


class FakeImages(FakeData):
    data_source = "generated"

    def __init__(
        self,
        size: int = 2000,
        image_size: Sequence[int] = (3, 224, 224),
        num_classes: int = 10,
        random_offset: int = 0,
        transform: Optional[Callable] = None,
    ):
        super().__init__(size=size, image_size=tuple(image_size), num_classes=num_classes,
                         random_offset=random_offset, transform=transform)
