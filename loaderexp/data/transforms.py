"""Training transforms in both of torchvision's APIs: the classic ``torchvision.transforms`` (v1,
the default: what most training code and the typical hand-written loop use) and transforms v2.

Each preset takes ``api`` (``transform.api=v1|v2``), and a run records which one ran: on 32x32
PIL images the v2 pipeline is the slower one (``+experiment=transforms`` measures it).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
APIS = ("v1", "v2")


def _module(api: str) -> Any:
    if api == "v1":
        from torchvision import transforms

        return transforms
    if api == "v2":
        from torchvision.transforms import v2

        return v2
    raise ValueError(f"transform.api={api}: valid: {', '.join(APIS)} (classic torchvision.transforms, or v2)")


def _as_float_tensor(api: str) -> list:
    """A PIL image (or uint8 tensor) to a float32 tensor in [0, 1]."""
    t = _module(api)
    return [t.ToTensor()] if api == "v1" else [t.ToImage(), t.ToDtype(torch.float32, scale=True)]


def cifar_train(crop: int = 32, padding: int = 4, api: str = "v1") -> Callable:
    """Random crop with padding, horizontal flip, to a float tensor, normalize."""
    t = _module(api)
    return t.Compose([t.RandomCrop(crop, padding=padding), t.RandomHorizontalFlip(), *_as_float_tensor(api),
                      t.Normalize(CIFAR_MEAN, CIFAR_STD)])


def imagenet_train(size: int = 224, api: str = "v1") -> Callable:
    """Random resized crop to ``size``, horizontal flip, to a float tensor, normalize."""
    t = _module(api)
    return t.Compose([t.RandomResizedCrop(size, antialias=True), t.RandomHorizontalFlip(), *_as_float_tensor(api),
                      t.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def to_tensor(api: str = "v1") -> Callable:
    """A PIL image to a float tensor in [0, 1], nothing else."""
    return _module(api).Compose(_as_float_tensor(api))
