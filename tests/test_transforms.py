"""Each transform preset in both of torchvision's APIs, recorded as a run's param."""

from __future__ import annotations

import pytest
import torch
from PIL import Image
from torchvision import transforms as v1
from torchvision.transforms import v2

from loaderexp.data.transforms import cifar_train, imagenet_train, to_tensor


@pytest.mark.parametrize("preset,size", [(cifar_train, 32), (imagenet_train, 224), (to_tensor, 40)])
def test_each_preset_in_both_apis_gives_the_same_kind_of_tensor(preset, size):
    image = Image.new("RGB", (48, 40), color=(200, 100, 50))
    for api, module in (("v1", v1), ("v2", v2)):
        transform = preset(api=api)
        assert isinstance(transform, module.Compose)
        out = transform(image)
        assert out.dtype == torch.float32 and out.shape[0] == 3
        if preset is not to_tensor:
            assert out.shape[-1] == size


def test_an_unknown_api_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"transform.api=v3: valid: v1, v2"):
        cifar_train(api="v3")


def test_the_transforms_experiment_sweeps_both_apis():
    from hydra import compose, initialize_config_dir

    from loaderexp.config import config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["+experiment=transforms"], return_hydra_config=True)
    assert cfg.hydra.sweeper.params["transform.api"] == "v1,v2"
    assert cfg.transform.name == "cifar_train" and cfg.tracking.experiment == "transforms"
