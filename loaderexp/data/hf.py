"""``dataset=hf``: a Hugging Face ``datasets`` dataset from local files, in the torch format a Trainer reads.

``path`` is a folder written by ``Dataset.save_to_disk`` (read with ``load_from_disk``); or
``builder`` (parquet, csv, json, arrow, imagefolder ...) with ``data_files``, read by the packaged
builder of that name.  Neither touches the Hub: the Hub is switched off before ``datasets`` is imported.
With ``generate: true`` and no folder at ``path``, a small image-classification set is written there
once (what the preset measures on a fresh machine).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from loaderexp.data.generated import build_once


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def from_local(path: Optional[str] = None, builder: Optional[str] = None,
               data_files: Union[str, Sequence[str], dict, None] = None, split: str = "train",
               format: Optional[str] = "torch", columns: Optional[Sequence[str]] = None, generate: bool = False,
               num_samples: int = 5000, size: int = 32, seed: int = 0) -> Any:
    """The dataset (``split`` of a DatasetDict), with its format set (``format: null`` keeps Python objects)."""
    _offline()
    import datasets

    if builder:
        if not data_files:
            raise ValueError(f"dataset.builder={builder}: give dataset.data_files, the local files it reads")
        loaded: Any = datasets.load_dataset(builder, data_files=data_files, split=split)
    else:
        if not path:
            raise ValueError("dataset.path: a folder written by save_to_disk (or dataset.builder with data_files)")
        if generate:
            write_example(Path(path), num_samples, size, seed)
        if not Path(path).exists():
            raise FileNotFoundError(2, "No such file or directory", path)
        loaded = datasets.load_from_disk(path)
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise ValueError(f"dataset.split={split}: {path} holds the splits {', '.join(loaded)}")
            loaded = loaded[split]
    if format is not None:
        loaded = loaded.with_format(format, columns=list(columns) if columns else None)
    loaded.data_source = "generated" if generate else "real"
    return loaded


def write_example(folder: Path, num_samples: int, size: int, seed: int) -> str:
    """A small image-classification set (uint8 HWC images, int labels) saved with save_to_disk, once."""

    def write(tmp: Path) -> dict:
        import datasets
        import numpy as np

        datasets.disable_progress_bars()
        generator = np.random.default_rng(seed)
        features = datasets.Features({"image": datasets.Array3D((size, size, 3), "uint8"),
                                      "label": datasets.ClassLabel(num_classes=10)})

        def rows(start: int, stop: int) -> dict:
            return {"image": generator.integers(0, 256, (stop - start, size, size, 3), dtype=np.uint8),
                    "label": generator.integers(0, 10, stop - start)}

        parts = [datasets.Dataset.from_dict(rows(i, min(i + 1000, num_samples)), features=features)
                 for i in range(0, num_samples, 1000)]
        datasets.concatenate_datasets(parts).save_to_disk(str(tmp))
        return {"samples": num_samples}

    return build_once(folder, {"kind": "hf-example", "num_samples": num_samples, "size": size, "seed": seed}, write)
