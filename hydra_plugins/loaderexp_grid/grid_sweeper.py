"""``hydra/sweeper=grid``: Hydra's basic sweeper (the cartesian grid), each job's config composed once.

The basic sweeper composes every job's config before launching any of them, so that a bad override
fails before a job runs, and the launcher then composes each one again.  A composition of loaderexp's
config tree costs about 0.3 s on a 2-core host: 0.6 s a job, 2 minutes of a 200-job sweep, was
Hydra composing the same config twice.  Here the launcher gets the config the check composed.
"""

# No `from __future__ import annotations`: Hydra's plugin scan runs this module without entering it
# in sys.modules, and dataclasses then cannot resolve string annotations.
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

KEPT_AT_MOST = 500  # composed configs waiting for their launch (about 0.2 MB each); past it, composed again


@dataclass
class GridSweeperConf:
    _target_: str = "hydra_plugins.loaderexp_grid.grid_sweeper.GridSweeper"
    max_batch_size: Optional[int] = None  # as the basic sweeper's: jobs composed, checked and launched together
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="grid", node=GridSweeperConf, provider="loaderexp")


class ComposedOnce:
    """A Hydra config loader that hands each job's composed config out twice at the cost of one
    composition: once to the sweeper's check, then to the launcher, which owns it (and sets the job's
    number in it).  Everything else is the wrapped loader's.  Pickled (Ray and submitit ship the
    loader with each job), it is the wrapped loader alone, without the configs it holds."""

    def __init__(self, loader: Any):
        self._loader = loader
        self._composed: Dict[Tuple[str, ...], DictConfig] = {}

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: List[str]) -> DictConfig:
        key = tuple(sweep_overrides)
        if key in self._composed:
            return self._composed.pop(key)
        config = self._loader.load_sweep_config(master_config, sweep_overrides)
        if len(self._composed) < KEPT_AT_MOST:
            self._composed[key] = config
        return config

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def __reduce__(self):
        return (ComposedOnce, (self._loader,))


class GridSweeper(Sweeper):
    """The basic sweeper held, not subclassed: Hydra's plugin scan executes its module again, which
    rebinds the name its methods' ``super(BasicSweeper, self)`` looks up to a new class."""

    def __init__(self, max_batch_size: Optional[int], params: Optional[Dict[str, str]] = None) -> None:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

        self.basic = BasicSweeper(max_batch_size, params)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        once = HydraContext(config_loader=ComposedOnce(hydra_context.config_loader), callbacks=hydra_context.callbacks)
        self.basic.setup(hydra_context=once, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        return self.basic.sweep(arguments)
