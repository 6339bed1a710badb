"""Training transforms built with torchvision's transforms v2."""

from __future__ import annotations

import torch
from torchvision.transforms import v2

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _as_float_tensor() -> list:
    """A PIL image (or uint8 tensor) to a float32 tensor in [0, 1]."""
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


def cifar_train(crop: int = 32, padding: int = 4) -> v2.Compose:
    """Random crop with padding, horizontal flip, to a float tensor, normalize."""
    return v2.Compose([v2.RandomCrop(crop, padding=padding), v2.RandomHorizontalFlip(), *_as_float_tensor(),
                       v2.Normalize(CIFAR_MEAN, CIFAR_STD)])


def imagenet_train(size: int = 224) -> v2.Compose:
    """Random resized crop to ``size``, horizontal flip, to a float tensor, normalize."""
    return v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(), *_as_float_tensor(),
                       v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def to_tensor() -> v2.Compose:
    """A PIL image to a float tensor in [0, 1], nothing else."""
    return v2.Compose(_as_float_tensor())
