"""What a launcher needs before a sweep's first job: checked, so a sweep never waits for ever.

``hydra/launcher=ray`` asks each job for one ``loaderexp_host`` resource (one per node, so no two
measurements share a node) and one CPU.  On a cluster where no node offers both (started without the
resource, or with ``--num-cpus=0``), Ray queues the jobs for good, its autoscaler printing "No available
node types can fulfill resource request" every 35 s.  The cluster is joined here, as the launcher would join it, and the sweep stops with one line
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
    custom: dict[str, Any] = dict(remote.get("resources") or {})
    if not custom:
        return
    # What one job asks of one node, all together: Ray's default of one CPU a task, a GPU if asked, and ours.
    wanted = {"CPU": remote.get("num_cpus", 1), **({"GPU": remote["num_gpus"]} if remote.get("num_gpus") else {}),
              **custom}
    wanted = {key: amount for key, amount in wanted.items() if amount}
    if not ray.is_initialized():  # the launcher's own start_ray then finds it joined
        try:
            ray.init(**init)
        except ConnectionError as error:  # Ray's own words name a flag of its CLI, not what to do here
            print(f"loaderexp: error: hydra/launcher=ray: no Ray cluster at {init.get('address', 'auto')} "
                  f"(hydra.launcher.ray.init.address, from $RAY_ADDRESS; auto: one `ray start` made on this "
                  f"machine): start one with `ray start --head --resources='{json.dumps(custom)}'` "
                  "(docs/clusters.md), or leave hydra/launcher=ray out to run the jobs here; the sweep did not "
                  "start", file=sys.stderr)
            raise SystemExit(2) from error
    offered = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    if any(all(node.get(key, 0) >= amount for key, amount in wanted.items()) for node in offered):
        return
    ray.shutdown()
    nodes = "; ".join(json.dumps({key: node.get(key, 0) for key in wanted}) for node in offered) or "none alive"
    host = json.dumps(custom)
    print(f"loaderexp: error: hydra/launcher=ray: no node of the Ray cluster at {init.get('address', 'auto')} offers "
          f"{json.dumps(wanted)} together, what each job asks for (hydra.launcher.ray.remote), so no job could ever "
          f"start (the nodes offer: {nodes}); start every node with `ray start ... --num-cpus=N "
          f"--resources='{host}'` (one {', '.join(custom)} per node: one measurement per node), or ask for other "
          "resources with hydra.launcher.ray.remote; the sweep did not start", file=sys.stderr)
    raise SystemExit(2)
