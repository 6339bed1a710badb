"""A user's own training step, as loaderexp runs it by config alone (conf/step/custom.yaml).

loaderexp calls ``step._target_`` once per job with the device (and ``step.kwargs``) and calls
what it returns with every batch, already on that device.  Here: a small CNN, its loss and an
Adam step, which is what "my training" means for most people; replace the model with your own.
A step that runs on the GPU sets ``on_device = True`` and ends by waiting for its own stream (as
``loss.item()`` does), so loaderexp can tell its device time from the copy's.

    python -m loaderexp step=custom loader.num_workers=2
    python -m loaderexp step=custom step.kwargs.width=64
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class SmallCnnStep:
    on_device = True

    def __init__(self, device: torch.device, width: int = 32, num_classes: int = 10, lr: float = 1e-3):
        self.device = device
        self.model = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(2 * width, num_classes),
        ).to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.loss = nn.CrossEntropyLoss()

    def __call__(self, batch: Any) -> None:
        images, labels = batch  # the dataset's (images, labels), collated and on the device
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.model(images), labels)
        loss.backward()
        self.optimizer.step()
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()


def make_step(device: torch.device, **kwargs: Any) -> SmallCnnStep:
    """The factory ``step._target_`` names: called once per job with the device."""
    return SmallCnnStep(device, **kwargs)
