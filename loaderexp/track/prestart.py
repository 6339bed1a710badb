"""The Hydra callback that starts the measuring processes' server with the app (conf/hydra/default.yaml):
a Hydra piece, so it lives with the other callbacks in ``track``, not in ``execute``, which Hydra never reaches."""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from loaderexp.config import composed_spec
from loaderexp.execute.child import prestart, target_modules


class PrestartCallback(Callback):
    """The forkserver measuring processes come from imports torch while Hydra sets up the first job."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            spec = composed_spec(config)
        except Exception:  # noqa: BLE001 - a bad config is the job's to report; the server starts with it then
            return
        if spec.bench.isolate:
            prestart(target_modules(spec))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.on_run_start(config)
