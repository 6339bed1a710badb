"""``hydra/sweeper=search``: an adaptive search instead of the full grid (see loaderexp.search.sweeper).

Hydra finds this plugin in the ``hydra_plugins`` namespace package; the config is registered in
its ConfigStore here.  The class stays thin: everything that decides lives in loaderexp.search.
"""

# No `from __future__ import annotations`: Hydra's plugin scan runs this module without entering it
# in sys.modules, and dataclasses then cannot resolve string annotations.
from dataclasses import dataclass, field
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from loaderexp.result import TOLERANCE


@dataclass
class SearchSweeperConf:
    _target_: str = "hydra_plugins.loaderexp_search.search_sweeper.SearchSweeper"
    max_trials: int = 40  # jobs launched at most (pruned ones included)
    patience: int = 6  # stop after this many trials in a row that move neither the best nor the pick's workers
    sampler: str = "tpe"  # tpe | gp | random (Optuna's)
    seed: int = 0
    prune: bool = True  # stop a trial after its first window when it is clearly behind the best so far
    prune_margin: float = 0.2  # "clearly": this far below the best trial's rate
    tolerance: float = TOLERANCE  # the recommendation's: the fewest workers within this of the best
    params: Optional[Any] = field(default_factory=dict)  # the space, as in the basic sweeper's params


ConfigStore.instance().store(group="hydra/sweeper", name="search", node=SearchSweeperConf, provider="loaderexp")


class SearchSweeper(Sweeper):
    def __init__(self, max_trials: int, patience: int, sampler: str, seed: int, prune: bool, prune_margin: float,
                 tolerance: float, params: Optional[DictConfig] = None) -> None:
        from loaderexp.search.sweeper import Search

        self.search = Search(max_trials, patience, sampler, seed, prune, prune_margin, tolerance, params)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.search.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        return self.search.sweep(arguments)
