"""Where the configs live, the resolvers they use, composition, and the typed spec a composed config becomes."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import sys
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import MissingMandatoryValue

from loaderexp.config.errors import ConfigError
from loaderexp.config.folders import job_folder
from loaderexp.config.schema import Config, TargetNode, backend_schema
from loaderexp.config.store import register_configs
from loaderexp.result.facts import HostFacts

NODES = ("dataset", "sampler", "transform")  # the free-form groups built with instantiate
RESOLVED_CONFIG = "resolved_config.yaml"  # what each run writes beside result.json: its whole spec, resolved


def config_dir() -> Path:
    """``conf/`` of a clone when the package runs from one, else the copy shipped in the wheel."""
    beside_package = Path(__file__).resolve().parents[2] / "conf"
    if (beside_package / "config.yaml").is_file():
        return beside_package
    return Path(str(resources.files("loaderexp.conf")))


def _register_resolvers() -> None:
    if not OmegaConf.has_resolver("abspath"):
        # Paths become absolute at compose time, so a job's result never depends on its cwd.
        OmegaConf.register_new_resolver("abspath", lambda p: str(Path(p).expanduser().resolve()))
    if not OmegaConf.has_resolver("project_root"):
        # The clone's root (or the installed package's folder): where examples/ lives.
        OmegaConf.register_new_resolver("project_root", lambda: str(config_dir().parent))
    if not OmegaConf.has_resolver("loaderexp_job_folder"):
        # A sweep job's folder: its number, or resuming, the folder of its configuration (folders.py).
        OmegaConf.register_new_resolver("loaderexp_job_folder", job_folder)


_register_resolvers()
register_configs()


def compose(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose the real config outside a Hydra app (tests, notebooks, the report)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides or []))


def composed_spec(cfg: DictConfig) -> Config:
    """The composed config as the frozen schema dataclasses, ``transform: auto`` still unresolved."""
    if "hydra" in cfg:  # a config composed with Hydra's own node (a sweeper's): not part of a run
        cfg = copy.deepcopy(cfg)
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]
    try:
        spec = OmegaConf.to_object(cfg)
    except MissingMandatoryValue as error:  # a preset's ``???``: the user must name it
        key = error.full_key or "?"
        raise ConfigError([f"{key} is required and was not given: set {key}=... on the command line or in your "
                           f"config (conf/{key.split('.')[0]}/ says what it takes)"]) from None
    if not isinstance(spec, Config):  # composed without the schema (a test's bare YAML)
        raise ConfigError([f"the config was not composed against base_config (got {type(spec).__name__})"])
    return dataclasses.replace(spec, **{group: TargetNode(dict(getattr(spec, group))) for group in NODES})


def to_spec(cfg: DictConfig) -> Config:
    """The typed spec of a run: the composed config, frozen, with the dataset's usual transform in place
    of ``transform: auto``."""
    return resolve_auto_transform(composed_spec(cfg))


def config_from_file(path: Path) -> DictConfig:
    """A run's config from the ``resolved_config.yaml`` it wrote (:data:`RESOLVED_CONFIG`), against the schema
    again: to measure that run again, changed or not."""
    from loaderexp.config.store import structured

    loaded = OmegaConf.load(path)
    stack = OmegaConf.select(loaded, "backend.name")  # its options compose against its own schema
    return OmegaConf.merge(structured(Config), {"backend": structured(backend_schema(stack))}, loaded)


def spec_from_file(path: Path) -> Config:
    """A run's typed spec from the ``resolved_config.yaml`` it wrote."""
    return composed_spec(config_from_file(path))


def resolve_auto_transform(spec: Config) -> Config:
    """Replace ``transform: {name: auto}`` by the dataset's ``default_transform`` node."""
    if spec.transform.name != "auto":
        return spec
    default = spec.dataset.default_transform
    path = config_dir() / "transform" / f"{default}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError([f"dataset.default_transform={default!r} is not a transform; valid: {', '.join(choices)}"])
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    # What `transform=auto` carries (transform.api=v2) goes into the usual transform, which must take it.
    auto_defaults = OmegaConf.to_container(OmegaConf.load(config_dir() / "transform" / "auto.yaml"))
    for key, value in spec.transform.node.items():
        if key == "name":
            continue
        if key in node:
            node[key] = value
        elif value != auto_defaults.get(key):
            raise ConfigError([f"transform.{key}={value}: the dataset's usual transform ({default}) takes no {key}; "
                               f"choose one that does, e.g. transform=to_tensor transform.{key}={value}"])
    return dataclasses.replace(spec, transform=TargetNode(node))


def plain(value: Any) -> Any:
    """A spec (or any part of it) as plain dicts, lists and scalars: enums by their value."""
    if isinstance(value, TargetNode):
        return plain(value.node)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"loader": {"num_workers": 4}}`` -> ``{"loader.num_workers": 4}`` (lists stay values)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def spec_params(spec: Config) -> dict[str, Any]:
    """The resolved, flattened parameters that identify a run (what result.json and MLflow record)."""
    return flatten(plain(spec))


def config_hash(params: Mapping[str, Any], host: HostFacts) -> str:
    """Stable identity of a configuration measured on a host (for resuming sweeps)."""
    ignored = ("tracking.", "data_root", "resume")
    key = {k: v for k, v in params.items() if not k.startswith(ignored)}
    blob = json.dumps([key, host.hostname, host.cpu_count], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def apply_python_path(spec: Config) -> None:
    """Put the dataset's and the step's ``python_path`` folders on sys.path (spawned workers inherit it)."""
    folders = spec.dataset.python_path + ([spec.step.python_path] if spec.step.python_path else [])
    for folder in folders:
        if folder not in sys.path:
            sys.path.insert(0, folder)
