"""The schema in Hydra's ConfigStore: each group's dataclass as ``base_<group>``, the whole as ``base_config``.

The dataclasses are frozen (a spec must not change once composed), and OmegaConf marks a frozen
dataclass's nodes read-only, which would refuse every override and every YAML value.  The stored
nodes are the same typed nodes with that flag cleared: types and keys are still checked at compose
time, and ``OmegaConf.to_object`` still builds the frozen classes.
"""

from __future__ import annotations

from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from loaderexp.config.schema import BACKEND_OPTIONS, GROUPS, Config


def writable(node: Any) -> Any:
    """``node`` with OmegaConf's read-only flag cleared on it and everything below it."""
    node._set_flag("readonly", None)
    if isinstance(node, DictConfig):
        for key in node.keys():
            writable(node._get_node(key))
    return node


def structured(schema: type) -> DictConfig:
    return writable(OmegaConf.structured(schema))


def register_configs() -> None:
    store = ConfigStore.instance()
    store.store(name="base_config", node=structured(Config))
    for group, schema in GROUPS.items():
        store.store(group=group, name=f"base_{group}", node=structured(schema))
    for name, schema in BACKEND_OPTIONS.items():
        store.store(group="backend", name=f"base_backend_{name}", node=structured(schema))
    # config.yaml selects hydra/sweeper=grid; its plugin's module stores that option when imported
    import hydra_plugins.loaderexp_grid.grid_sweeper  # noqa: F401
