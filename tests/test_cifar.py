"""The generated CIFAR-10 copy is the archive's own format, read by torchvision's CIFAR10."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
import torchvision

from loaderexp.data.cifar import FOLDER, cifar10
from loaderexp.data.generated import build_once, read_identity


@pytest.fixture(scope="module")
def train(data_root):
    return cifar10(str(data_root), train=True)


def test_generated_copy_loads_through_torchvision_with_the_right_shapes(train, data_root):
    assert isinstance(train, torchvision.datasets.CIFAR10)
    assert train.data_source == "generated"
    assert len(train) == 50_000
    assert train.data.shape == (50_000, 32, 32, 3) and train.data.dtype == np.uint8
    image, label = train[123]
    assert image.size == (32, 32) and image.mode == "RGB"
    assert 0 <= label < 10
    assert train.classes[0] == "airplane" and len(train.classes) == 10
    test = cifar10(str(data_root), train=False)
    assert len(test) == 10_000


def test_files_are_the_archive_format(train, data_root):
    with open(data_root / FOLDER / "data_batch_1", "rb") as f:
        batch = pickle.load(f, encoding="latin1")
    assert set(batch) >= {"data", "labels", "batch_label", "filenames"}
    assert batch["data"].shape == (10_000, 3072) and batch["data"].dtype == np.uint8
    assert len(batch["labels"]) == 10_000


def test_pixels_have_image_like_statistics(train):
    pixels = train.data[:5000].astype(np.float32) / 255
    mean, std = pixels.mean(axis=(0, 1, 2)), pixels.std(axis=(0, 1, 2))
    assert np.all((mean > 0.35) & (mean < 0.6)), mean
    assert np.all((std > 0.15) & (std < 0.35)), std
    # Neighbouring pixels correlate strongly, as in photographs (white noise would give ~0).
    left, right = pixels[:, :, :-1, :].ravel(), pixels[:, :, 1:, :].ravel()
    assert np.corrcoef(left, right)[0, 1] > 0.8
    counts = np.bincount(train.targets, minlength=10)
    assert counts.min() > 4000


def test_training_transform_gives_normalised_tensors(train):
    from loaderexp.data.transforms import cifar_train

    train.transform = cifar_train()
    image, _ = train[0]
    train.transform = None
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert -3 < float(image.mean()) < 3


def test_copy_is_reused_and_rebuilt_when_its_identity_changes(tmp_path):
    calls = []

    def write(folder):
        folder.mkdir(parents=True)
        (folder / "data.bin").write_bytes(b"x" * 10)
        calls.append(folder)
        return {"files": 1}

    target = tmp_path / "gen"
    assert build_once(target, {"size": 1}, write) == "built"
    assert build_once(target, {"size": 1}, write) == "reused"
    assert len(calls) == 1
    assert build_once(target, {"size": 2}, write) == "built"
    assert read_identity(target) == {"size": 2}
    user = tmp_path / "mine"
    user.mkdir()
    (user / "real.bin").write_bytes(b"y")
    assert build_once(user, {"size": 1}, write) == "user data"
    assert (user / "real.bin").exists() and len(calls) == 2
