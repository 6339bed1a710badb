"""A torchvision ImageFolder of JPEG files on disk: the decode-bound workload of ImageNet training.

When the folder is missing loaderexp writes one (``count`` images of ``width`` x ``height`` in
``classes`` class folders, photo-like content so JPEG sizes are realistic) and reuses it on later
runs; a folder loaderexp did not write is read as it is, never touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
from PIL import Image
from torchvision.datasets import ImageFolder

from loaderexp.data.generated import build_once

GENERATOR_VERSION = 1


class GeneratedImageFolder(ImageFolder):
    """ImageFolder that also knows its mean file size (for bytes read per second)."""

    def __init__(self, root: str, transform: Optional[Callable] = None, data_source: str = "user"):
        super().__init__(root, transform=transform)
        self.data_source = data_source
        sizes = [Path(path).stat().st_size for path, _ in self.samples]
        self.mean_sample_bytes = float(np.mean(sizes)) if sizes else 0.0


def image_folder(
    root: str,
    generate: bool = True,
    count: int = 2000,
    classes: int = 10,
    width: int = 320,
    height: int = 256,
    quality: int = 90,
    seed: int = 0,
    transform: Optional[Callable] = None,
) -> GeneratedImageFolder:
    """The ImageFolder at ``root``; with ``generate`` a missing folder is written first."""
    folder = Path(root)
    source = "user"
    if generate:
        identity = {"kind": "imagefolder", "version": GENERATOR_VERSION, "count": count, "classes": classes,
                    "width": width, "height": height, "quality": quality, "seed": seed}
        state = build_once(folder, identity, lambda tmp: write_jpegs(tmp, count, classes, width, height, quality, seed))
        source = "user" if state == "user data" else "generated"
    if not folder.is_dir() or not any(folder.iterdir()):
        raise FileNotFoundError(f"dataset.root={root}: no image folder there (set dataset.generate=true to write one)")
    return GeneratedImageFolder(str(folder), transform=transform, data_source=source)


def photo_like(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """An RGB uint8 image of smooth colour regions, soft edges and sensor-like noise."""
    coarse = rng.uniform(0, 255, size=(4, 5, 3)).astype(np.uint8)
    base = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC), dtype=np.float32)
    detail = rng.uniform(-40, 40, size=(height // 8, width // 8, 3)).astype(np.float32)
    detail_img = Image.fromarray(np.clip(detail + 128, 0, 255).astype(np.uint8)).resize((width, height), Image.BILINEAR)
    image = base + (np.asarray(detail_img, dtype=np.float32) - 128) + rng.normal(0, 6, size=base.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def write_jpegs(folder: Path, count: int, classes: int, width: int, height: int, quality: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    total = 0
    for c in range(classes):
        (folder / f"class_{c:03d}").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        path = folder / f"class_{i % classes:03d}" / f"img_{i:06d}.jpg"
        Image.fromarray(photo_like(rng, width, height)).save(path, "JPEG", quality=quality)
        total += path.stat().st_size
    return {"images": count, "bytes": total, "mean_bytes": total / max(count, 1)}
