"""Where the configs live, the resolvers they use, composition, and plain-value views of a config."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from loaderexp.config.schema import register_configs
from loaderexp.config.validation import ConfigError


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


_register_resolvers()
register_configs()


def to_plain(node: Any) -> Any:
    """A resolved plain-Python copy (dicts, lists, scalars): safe to pickle into workers."""
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    return node


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


def run_params(cfg: DictConfig) -> dict[str, Any]:
    """The resolved, flattened parameters that identify a run (what MLflow logs as params)."""
    plain = to_plain(cfg)
    plain.pop("hydra", None)
    return flatten(plain)


def config_hash(params: Mapping[str, Any], host: Mapping[str, Any]) -> str:
    """Stable identity of a configuration measured on a host (for resuming sweeps)."""
    ignored = ("tracking.", "data_root", "resume")
    key = {k: v for k, v in params.items() if not k.startswith(ignored)}
    blob = json.dumps([key, host.get("hostname"), host.get("cpu_count")], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def compose(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose the real config outside a Hydra app (tests, notebooks, the report)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides or []))


def apply_python_path(plain: Mapping[str, Any]) -> None:
    """Put the dataset's and the step's ``python_path`` folders on sys.path (spawned workers inherit it)."""
    import sys

    for node in (plain["dataset"], plain.get("step") or {}):
        folders = node.get("python_path") or []
        for folder in [folders] if isinstance(folders, str) else folders:
            if folder not in sys.path:
                sys.path.insert(0, folder)


def resolve_auto_transform(plain: dict[str, Any]) -> dict[str, Any]:
    """Replace ``transform: {name: auto}`` by the dataset's ``default_transform`` node."""
    if plain["transform"].get("name") == "auto":
        default = plain["dataset"].get("default_transform", "none")
        path = config_dir() / "transform" / f"{default}.yaml"
        if not path.is_file():
            choices = sorted(p.stem for p in path.parent.glob("*.yaml"))
            raise ConfigError([f"dataset.default_transform={default!r} is not a transform; valid: {', '.join(choices)}"])
        plain["transform"] = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    return plain
