"""loaderexp from a script or a notebook: measure a dataset you hold as an object, then sweep it.

    python examples/measure_from_python.py            # ./mlflow.db gets the runs, as the CLI's do
    python examples/measure_from_python.py --quick    # a short measurement, no MLflow (what the tests run)

In a script the measuring process imports it again: keep the work under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import sys

import torch
from torch.utils.data import Dataset

import loaderexp


class NoisyImages(Dataset):
    """A user's dataset: each sample is made on the fly (a little CPU per sample)."""

    def __init__(self, count: int = 4000, size: int = 32):
        self.count, self.size = count, size

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(index)
        return torch.rand(3, self.size, self.size, generator=generator), index % 10


def main(quick: bool) -> None:
    options = {"overrides": ["bench=quick", "bench.confirm_s=0"], "tracking": "none"} if quick else {}
    dataset = NoisyImages(2000 if quick else 20000)
    one = loaderexp.measure(dataset, num_workers=1, batch_size=64, **options)
    print(f"num_workers=1: {one.metrics['throughput_samples_per_s']:,.0f} samples/s ({one.status})")
    report = loaderexp.sweep(dataset, {"num_workers": [0, 1, 2]}, batch_size=64, **options)
    for row in report:
        print(f"num_workers={row['num_workers']}: {row['samples_per_s']:,.0f} samples/s")
    print(f"pick: num_workers={report.recommendation['num_workers']}; for your training: "
          f"{', '.join(p.name for p in report.exported)} in {report.folder / 'export'}")


if __name__ == "__main__":
    main("--quick" in sys.argv)
