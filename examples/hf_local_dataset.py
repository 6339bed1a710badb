"""A Hugging Face dataset from local files, measured as its Trainer reads it (dataset=hf; pip install -e ".[hf]").

Writes a small tokenised-text dataset with ``save_to_disk`` (a stand-in for your preprocessed one; nothing comes
from the Hub), then sweeps num_workers over it in torch format:

    python examples/hf_local_dataset.py [FOLDER] [--quick]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def write(folder: Path, rows: int = 5000, length: int = 128) -> None:
    import datasets
    import numpy as np

    generator = np.random.default_rng(0)
    table = {"input_ids": generator.integers(0, 30000, (rows, length)).tolist(),
             "attention_mask": np.ones((rows, length), dtype=np.int8).tolist(),
             "label": generator.integers(0, 2, rows).tolist()}
    datasets.Dataset.from_dict(table).save_to_disk(str(folder))


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    folder = Path(arguments[0] if arguments else "data/hf_text").resolve()
    if not folder.exists():
        write(folder)
    quick = ["bench=quick", "bench.confirm_s=0", "tracking=none"] if "--quick" in sys.argv else []
    sweep = ["-m", "dataset=hf", f"dataset.path={folder}", "dataset.generate=false", "loader.num_workers=0,1,2",
             "loader.batch_size=32", *quick]
    raise SystemExit(subprocess.call([sys.executable, "-m", "loaderexp", *sweep]))
