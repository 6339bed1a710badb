"""What a launcher needs before a sweep's first job: checked, so a sweep never waits for ever.

``hydra/launcher=ray`` asks each job for one ``loaderexp_host`` resource (one per node, so no two
measurements share a node).  On a cluster whose nodes were started without it, Ray queues the jobs
for good, its autoscaler printing "No available node types can fulfill resource request" every
35 s.  The cluster is joined here, as the launcher would join it, and the sweep stops with one line
saying how to start the nodes when no node offers what a job asks for.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from omegaconf import DictConfig, OmegaConf


def check_launcher(config: DictConfig) -> None:
    if "RayLauncher" in str(OmegaConf.select(config, "hydra.launcher._target_") or ""):
        check_ray_resources(config)


def check_ray_resources(config: DictConfig) -> None:
    import ray

    init = OmegaConf.to_container(config.hydra.launcher.ray.init, resolve=True) or {}
    remote = OmegaConf.to_container(config.hydra.launcher.ray.remote, resolve=True) or {}
    wanted: dict[str, Any] = dict(remote.get("resources") or {})
    if not wanted:
        return
    if not ray.is_initialized():  # the launcher's own start_ray then finds it joined
        ray.init(**init)
    offered = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    missing = {key: amount for key, amount in wanted.items()
               if not any(node.get(key, 0) >= amount for node in offered)}
    if not missing:
        return
    ray.shutdown()
    asked = json.dumps(missing)
    print(f"loaderexp: error: hydra/launcher=ray: no node of the Ray cluster at {init.get('address', 'auto')} offers "
          f"{asked} (hydra.launcher.ray.remote.resources), so no job could ever start; start every node with "
          f"`ray start ... --resources='{asked}'` (one per node: one measurement per node), or ask for other "
          "resources with hydra.launcher.ray.remote.resources; the sweep did not start", file=sys.stderr)
    raise SystemExit(2)
