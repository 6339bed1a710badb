"""Every config file composes; typos, wrong types and bad combinations fail before any work."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from loaderexp.config import ConfigError, config_dir, to_spec, validate


def all_config_files():
    for path in sorted(config_dir().rglob("*.yaml")):
        group = path.parent.relative_to(config_dir()).as_posix()
        if group == ".":
            yield pytest.param(None, path.stem, id=path.name)
        else:
            yield pytest.param(group, path.stem, id=f"{group}/{path.name}")


@pytest.mark.parametrize("group,name", list(all_config_files()))
def test_every_config_file_composes(compose_cfg, group, name):
    if (group, name) == ("dataset", "lightning"):  # the user's DataModule is required: none, and it says so
        with pytest.raises(ConfigError, match=r"^dataset\._target_ is required"):
            to_spec(compose_cfg(["dataset=lightning"]))
        spec = to_spec(compose_cfg(["dataset=lightning", "dataset._target_=mydm.MyDM"]))
        assert spec.dataset.target == "mydm.MyDM" and set(spec.dataset.keyword_arguments) == {"batch_size"}
        return
    if group is None:
        overrides = []
    elif group == "experiment":
        overrides = [f"+experiment={name}"]
    elif group == "hydra":
        overrides = [f"hydra={name}"]
    else:
        overrides = [f"{group}={name}"]
    cfg = compose_cfg(overrides)
    spec = to_spec(cfg)
    assert spec.loader.batch_size is None or spec.loader.batch_size >= 1
    assert spec.dataset.target
    if group in ("dataset", "sampler"):
        assert getattr(spec, group).name == name  # the file's own name is what runs and reports show


def test_defaults_are_the_classic_cifar_run(compose_cfg):
    spec = to_spec(compose_cfg([]))
    assert spec.dataset.name == "cifar10"
    assert spec.transform.name == "cifar_train"
    assert spec.transform.get("api") == "v1"  # classic torchvision.transforms, as most CIFAR code writes it
    assert spec.tracking.uri.startswith("sqlite:////")  # absolute path
    assert spec.data_root.startswith("/")


def test_experiment_defines_a_named_sweep(compose_cfg):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["+experiment=classic"], return_hydra_config=True)
    assert cfg.tracking.experiment == "classic"
    assert cfg.hydra.sweeper.params["loader.num_workers"] == "range(0,20)"
    assert cfg.hydra.sweeper.params["loader.pin_memory"] == "true,false"


@pytest.mark.parametrize(
    "override",
    ["loader.num_workers=many", "loader.pin_memory=maybe", "loader.bogus=1", "bench.budget=forever", "device.type=tpu"],
)
def test_wrong_type_or_unknown_key_fails_at_compose_time(compose_cfg, override):
    with pytest.raises((ConfigCompositionException, ValidationError)) as error:
        compose_cfg([override])
    assert override.split("=")[0].split(".")[-1] in str(error.value) + str(error.value.__cause__)


def test_unknown_group_option_lists_the_choices(compose_cfg):
    with pytest.raises(ConfigCompositionException) as error:
        compose_cfg(["dataset=imagenet21k"])
    message = str(error.value)
    assert "dataset" in message and "cifar10" in message and "synthetic" in message


def check(compose_cfg, overrides, cuda=False, cpus=2):
    return validate(to_spec(compose_cfg(overrides)), cuda_available=cuda, cpus=cpus)


def test_cross_field_problems_are_gathered_into_one_error(compose_cfg):
    with pytest.raises(ConfigError) as error:
        check(compose_cfg, ["loader.batch_size=0", "loader.num_workers=1", "loader.prefetch_factor=0",
                            "bench.repeats=0", "bench.min_repeats=5", "bench.max_repeats=2"])
    problems = error.value.problems
    assert len(problems) == 4
    text = str(error.value)
    assert "loader.batch_size=0" in text
    assert "loader.prefetch_factor=0: must be null or an integer >= 1" in text
    assert "bench.repeats=0: must be null (adaptive) or >= 1" in text
    assert "bench.max_repeats=2: must be >= bench.min_repeats=5" in text


def test_knobs_that_configure_workers_are_not_applied_without_them(compose_cfg):
    """DataLoader refuses them at num_workers=0: the sweep's baseline runs without, and says so."""
    from loaderexp.config.validation import without_inapplicable

    warnings = check(compose_cfg, ["loader.num_workers=0", "loader.prefetch_factor=4", "loader.persistent_workers=true"])
    assert any("loader.prefetch_factor=4, loader.persistent_workers=true not applied" in w for w in warnings)
    spec = to_spec(compose_cfg(["loader.num_workers=0", "loader.prefetch_factor=4", "loader.timeout=5"]))
    loader, dropped = without_inapplicable(spec.loader)
    assert dropped == ["loader.prefetch_factor=4", "loader.timeout=5"]
    assert loader.prefetch_factor is None and loader.timeout == 0
    with_workers = to_spec(compose_cfg(["loader.num_workers=2", "loader.prefetch_factor=4"])).loader
    assert without_inapplicable(with_workers) == (with_workers, [])


def test_collate_fn_that_cannot_be_imported(compose_cfg):
    with pytest.raises(ConfigError, match=r"loader.collate_fn=no.such.collate: cannot be imported"):
        check(compose_cfg, ["loader.collate_fn=no.such.collate"])


def test_negative_workers_and_timeout_without_workers(compose_cfg):
    with pytest.raises(ConfigError) as error:
        check(compose_cfg, ["loader.num_workers=-1", "loader.timeout=-1"])
    text = str(error.value)
    assert "loader.num_workers=-1" in text and "loader.timeout=-1: must be >= 0" in text


def test_cuda_requested_without_cuda_names_valid_choices(compose_cfg):
    with pytest.raises(ConfigError, match=r"device.type=cuda.*valid here: auto, cpu"):
        check(compose_cfg, ["device=cuda"], cuda=False)


def test_legal_but_pointless_settings_warn(compose_cfg):
    warnings = check(compose_cfg, ["loader.pin_memory=true", "loader.num_workers=8"], cuda=False, cpus=2)
    assert any("pin_memory=true with no accelerator" in w for w in warnings)
    assert any("num_workers=8 exceeds the 2 CPUs" in w for w in warnings)


def test_dataset_target_that_cannot_be_imported(compose_cfg):
    """It says why on the same line: Hydra's first line ends at a colon ("Error loading 'no.such.Dataset':")."""
    with pytest.raises(ConfigError, match=r"dataset._target_=no.such.Dataset: cannot be imported "
                                          r"\(ModuleNotFoundError: No module named 'no'; are you sure that module "
                                          r"'no' is installed\?\)"):
        check(compose_cfg, ["dataset._target_=no.such.Dataset"])


def test_a_dataset_of_whole_batches_refuses_the_loaders_batching(compose_cfg):
    """dataset=synthetic_batches with the default batch of 128: every job failed in its workers ("stack expects
    each tensor to be equal size" on the short last item); now one line before any worker starts."""
    with pytest.raises(ConfigError, match=r"loader.batch_size=128: dataset=synthetic_batches yields whole batches "
                                          r"\(each item is one\): set loader.batch_size=null"):
        check(compose_cfg, ["dataset=synthetic_batches"])
    check(compose_cfg, ["dataset=synthetic_batches", "loader.batch_size=null"])


def test_dataset_argument_the_target_does_not_take(compose_cfg):
    with pytest.raises(ConfigError, match=r"takes no argument colour; valid: .*num_samples.* \(leave one out with "
                                          r"~dataset.colour\)"):
        check(compose_cfg, ["dataset=synthetic", "+dataset.colour=red"])


class NoArguments:
    """A user's dataset that takes no argument: README's `dataset=custom dataset._target_=...` recipe."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> int:
        return index


def test_your_own_dataset_gets_only_the_arguments_you_give(compose_cfg):
    """dataset=custom gave the worked example's num_samples, size and seed to every class: one that takes none of
    them was refused ("takes no argument num_samples, seed, size; valid: "), the README's recipe with it."""
    check(compose_cfg, ["dataset=custom", "dataset._target_=tests.test_config.NoArguments"])
    with pytest.raises(ConfigError, match=r"takes no argument size; valid: none \(leave one out with ~dataset.size\)"):
        check(compose_cfg, ["dataset=custom", "dataset._target_=tests.test_config.NoArguments", "+dataset.size=3"])


def test_every_loader_knob_is_a_dataloader_argument_of_the_same_name():
    """build_loader passes the loader node straight to DataLoader: a new knob is a schema field and a YAML line."""
    import dataclasses
    import inspect

    from torch.utils.data import DataLoader

    from loaderexp.config.schema import LoaderConfig

    knobs = {f.name for f in dataclasses.fields(LoaderConfig)}
    assert knobs <= set(inspect.signature(DataLoader).parameters)


# A preset's own name: the one key it may state even where it equals the schema's default.
IDENTITY = {"backend": "name", "step": "kind", "tracking": "backend", "device": "type"}


def schema_group_files():
    from loaderexp.config.schema import GROUPS

    for group in GROUPS:
        for path in sorted((config_dir() / group).glob("*.yaml")):
            yield pytest.param(group, path, id=f"{group}/{path.name}")


@pytest.mark.parametrize("group,path", list(schema_group_files()))
def test_a_preset_states_only_what_it_changes(group, path):
    """Defaults are stated once, in the schema: a YAML file of a schema-backed group sets only what differs."""
    import dataclasses

    from omegaconf import OmegaConf

    from loaderexp.config.schema import GROUPS

    defaults = GROUPS[group]()
    written = {k: v for k, v in OmegaConf.to_container(OmegaConf.load(path)).items() if k != "defaults"}
    identity = IDENTITY.get(group)
    if identity is not None:
        assert str(written.get(identity, getattr(defaults, identity).value if hasattr(getattr(defaults, identity),
                                                                                      "value") else "")) == path.stem
    restated = [k for k, v in written.items() if k != identity and k in {f.name for f in dataclasses.fields(defaults)}
                and not isinstance(v, str) and v == getattr(defaults, k)]
    restated += [k for k, v in written.items() if k != identity and isinstance(v, str) and
                 "${" not in v and str(getattr(getattr(defaults, k, None), "value", getattr(defaults, k, None))) == v]
    assert restated == [], f"{path.name} restates the schema's default of {restated}"


def test_a_config_file_that_is_not_yaml_is_one_line_naming_the_file_and_line(tmp_path):
    """Round two, item 9: Hydra's own report is a traceback of ~90 lines with the file at the bottom."""
    import subprocess
    import sys

    from tests.conftest import REPO

    folder = tmp_path / "conf" / "dataset"
    folder.mkdir(parents=True)
    (folder / "mine.yaml").write_text("defaults:\n  - base_dataset\nname: mine\n  bad: [1, 2\n")
    done = subprocess.run([sys.executable, "-m", "loaderexp", "--config-dir", str(tmp_path / "conf"), "dataset=mine",
                           "tracking=none"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"loaderexp: error: {folder / 'mine.yaml'}:4: not YAML: mapping values are not allowed here"]


def test_the_grid_sweeper_composes_each_job_once_and_hands_the_launcher_what_the_check_composed(data_root):
    """Hydra's basic sweeper composes every job to check it, then its launcher composes each again (0.3 s a
    job here); loaderexp's grid composes once, the same config, and ships no held configs with a job."""
    import pickle

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from hydra_plugins.loaderexp_grid.grid_sweeper import ComposedOnce
    from loaderexp.config.store import register_configs

    class Counted(ConfigLoaderImpl):
        compositions = 0

        def load_sweep_config(self, master_config, sweep_overrides):
            Counted.compositions += 1
            return super().load_sweep_config(master_config, sweep_overrides)

    register_configs()
    loader = Counted(config_search_path=create_config_search_path(str(config_dir())))
    master = loader.load_configuration("config", overrides=["hydra/sweeper=grid"], run_mode=RunMode.MULTIRUN)
    jobs = [["dataset=synthetic", f"loader.num_workers={n}"] for n in range(3)]
    once = ComposedOnce(loader)
    checked = [once.load_sweep_config(master, job) for job in jobs]  # the sweeper's check
    launched = [once.load_sweep_config(master, job) for job in jobs]  # the launcher's
    assert Counted.compositions == 3
    assert [c.loader.num_workers for c in launched] == [0, 1, 2] and all(a is b for a, b in zip(checked, launched))
    fresh = ConfigLoaderImpl(config_search_path=create_config_search_path(str(config_dir())))
    assert OmegaConf.to_container(launched[1]) == OmegaConf.to_container(fresh.load_sweep_config(master, jobs[1]))
    assert once.load_sweep_config(master, jobs[0]) is not launched[0]  # handed out once: a third ask composes anew
    assert Counted.compositions == 4
    holding = ComposedOnce(fresh)
    holding.load_sweep_config(master, ["dataset=synthetic", "loader.num_workers=5"])  # held, waiting for its launch
    shipped = pickle.loads(pickle.dumps(holding))  # as Ray and submitit send the loader with each job
    assert shipped._composed == {} and isinstance(shipped._loader, ConfigLoaderImpl)
    assert master.hydra.sweeper._target_.endswith("GridSweeper")
