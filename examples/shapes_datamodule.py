"""A user's LightningDataModule, measured as it trains (conf/experiment/lightning.yaml names it).

loaderexp calls ``prepare_data()`` and ``setup("fit")``, takes ``train_dataloader()`` apart (its
dataset, sampler, collate_fn and batch size) and sweeps the DataLoader knobs over them; the knobs
written here (num_workers=0, no pinning) are recorded as the DataModule's baseline.

    pip install -e ".[lightning]"
    python -m loaderexp -m +experiment=lightning 'loader.num_workers=range(0,3)'

Yours the same way: ``dataset=lightning sampler=datamodule dataset._target_=mypackage.MyDataModule`` with its
own arguments as ``+dataset.<name>=...`` (only those reach it).
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, random_split

from shapes_dataset import ShapesDataset


def stack_batch(rows):
    """The DataModule's own collate: images stacked, labels as one tensor."""
    images, labels = zip(*rows)
    return torch.stack(images), torch.tensor(labels)


class ShapesDataModule(pl.LightningDataModule):
    def __init__(self, num_samples: int = 5000, size: int = 64, batch_size: int = 64, val_fraction: float = 0.1,
                 seed: int = 0):
        super().__init__()
        self.save_hyperparameters()
        self.train_set = self.val_set = None

    def prepare_data(self):
        pass  # the shapes are drawn on the fly: nothing to download or unpack

    def setup(self, stage: str):
        full = ShapesDataset(self.hparams.num_samples, self.hparams.size, self.hparams.seed)
        val = int(len(full) * self.hparams.val_fraction)
        split = torch.Generator().manual_seed(self.hparams.seed)
        self.train_set, self.val_set = random_split(full, [len(full) - val, val], generator=split)

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True, num_workers=0,
                          collate_fn=stack_batch)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size, collate_fn=stack_batch)
