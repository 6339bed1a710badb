"""A sweep through SLURM on a one-node cluster this script brings up, beside the same sweep run in process.

    python benchmarks/slurm_sweep.py                                   # the quickstart's sweep
    python benchmarks/slurm_sweep.py 'loader.num_workers=range(0,3)' dataset=synthetic

Needs root and Debian's slurm-wlm and munge (benchmarks/slurm_cluster.py builds the cluster in a
temporary folder and stops it afterwards).  Prints both tables, each sweep's wall time and the
ratio, and how long each SLURM job queued for the node: every job is an exclusive sbatch job
(conf/hydra/launcher/slurm.yaml), so on one node they run one after the other.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.slurm_cluster import available, one_node_cluster  # noqa: E402

DEFAULT_SWEEP = ["loader.num_workers=range(0,5)", "loader.pin_memory=true,false"]


def sweep(overrides: list[str], folder: Path, launcher: str, env: dict[str, str]) -> tuple[float, str]:
    done = common.sweep([f"hydra/launcher={launcher}", *overrides], folder / launcher, env=env)
    elapsed = done.seconds
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "status  samples/s" in line)
    end = next(i for i, line in enumerate(lines) if "jobs recorded in" in line)
    return elapsed, "\n".join(lines[start:end + 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", default=DEFAULT_SWEEP)
    args = parser.parse_args()
    if available():
        sys.exit(f"SLURM: {available()}")
    with tempfile.TemporaryDirectory(prefix="loaderexp-slurm-sweep-") as tmp:
        folder = Path(tmp)
        local_s, local_table = sweep(args.overrides, folder, "basic", {})
        with one_node_cluster() as slurm_env:
            slurm_s, slurm_table = sweep(args.overrides, folder, "slurm", slurm_env)
        results = [json.loads(p.read_text()) for p in sorted((folder / "slurm").glob("*/result.json"))]
        waits = [r["info"].get("waited_for_host_s", 0.0) for r in results]
        spans = sorted((r["info"]["measured_from"], r["info"]["measured_until"]) for r in results)
        overlapping = sum(1 for a, b in zip(spans, spans[1:]) if b[0] < a[1])
    print(f"== in process (hydra/launcher=basic): {local_s:.1f} s\n{local_table}\n")
    print(f"== SLURM (hydra/launcher=slurm, one node, --exclusive): {slurm_s:.1f} s\n{slurm_table}\n")
    print(f"SLURM/in process wall time: {slurm_s / local_s:.2f}x; {len(results)} SLURM jobs, "
          f"{overlapping} measured while another did, host-lock wait max {max(waits, default=0):.2f} s")


if __name__ == "__main__":
    main()
