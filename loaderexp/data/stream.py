"""An IterableDataset that shards its stream across DataLoader workers with ``get_worker_info()``.

Each worker yields every ``num_workers``-th sample, so together they deliver each sample once.
``shard=False`` shows the classic mistake: every worker yields the whole stream, and the delivery
check reports each sample arriving once per worker.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional, Sequence

import torch
from torch.utils.data import IterableDataset, get_worker_info


class ShardedStream(IterableDataset):
    data_source = "generated"

    def __init__(
        self,
        num_samples: int = 20_000,
        shape: Sequence[int] = (3, 32, 32),
        num_classes: int = 10,
        shard: bool = True,
        seed: int = 0,
        transform: Optional[Callable] = None,
    ):
        self.num_samples = num_samples
        self.shape = tuple(shape)
        self.num_classes = num_classes
        self.shard = shard
        self.seed = seed
        self.transform = transform

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        worker = get_worker_info()
        start, step = 0, 1
        if self.shard and worker is not None:
            start, step = worker.id, worker.num_workers
        for index in range(start, self.num_samples, step):
            # Sample i is the same whichever worker makes it: a stream read from storage.
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
            image = torch.rand(self.shape, generator=generator)
            if self.transform is not None:
                image = self.transform(image)
            yield image, index % self.num_classes
