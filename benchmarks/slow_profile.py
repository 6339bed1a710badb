"""``bench.predict`` when the profile meets a slow moment of the host: processes burning cores run until the sweep's
stage profile is written, then stop, so the profile reads the host slow and the jobs measure it quiet.

    python benchmarks/slow_profile.py                   # 0, 1 and 2 burning cores; grid 0..6
    python benchmarks/slow_profile.py --burners 2 --grid 0-16

For each load it prints how many settings the predicted grid measured, whether the model was refitted on the runs
(and how), the table's PREDICTED note, and the pick, beside the naive loop's pick (one whole epoch per setting on
the quiet host, benchmarks/adaptive_vs_epochs.py's: a reference loaderexp did not compute).  What a user must get:
the naive loop's pick, with either the model confirmed (or refitted and checked) or the settings measured.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.adaptive_vs_epochs import naive_pick, run_naive  # noqa: E402
from benchmarks.common import REPO  # noqa: E402
from loaderexp.report import load_results  # noqa: E402
from loaderexp.report.confirm import Confirmation  # noqa: E402
from loaderexp.report.export import recommended  # noqa: E402
from loaderexp.result import Status  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402


def predicted_sweep(data_root: Path, workers: list[int], folder: Path, burners: int) -> dict:
    """The predicted grid with ``burners`` cores burning until its profile is written."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    burning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    command = [sys.executable, "-m", "loaderexp", "-m", f"loader.num_workers={','.join(map(str, workers))}",
               "bench.predict=true", f"tracking.uri=sqlite:///{folder.parent / 'mlflow.db'}", f"hydra.sweep.dir={folder}"]
    sweep = subprocess.Popen(command, cwd=folder.parent, env={**os.environ, "LOADEREXP_DATA_ROOT": str(data_root)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while sweep.poll() is None and not any((folder / "profiles").glob("*.json")):
            time.sleep(0.05)
    finally:
        for burner in burning:
            burner.kill()
            burner.wait()
    _, err = sweep.communicate()
    if sweep.returncode != 0:
        sys.exit(f"the sweep failed ({sweep.returncode}):\n{err[-3000:]}")
    results = [r for _, r in load_results(folder)]
    measured = sorted(r.workers for r in results if r.status is Status.FINISHED)
    refits = {f"{name} {r.metrics[key]:g}" for r in results for key, name in
              ((M.MODEL_REFIT, "cores' rate"), (M.MODEL_SCALE, "scale")) if r.metrics.get(key)}
    note = next((line for line in (folder / "report.txt").read_text().splitlines() if line.startswith("PREDICTED:")),
                "")
    pick = recommended(load_results(folder), Confirmation.read(folder))[0].result.workers
    return {"measured": measured, "refit": ", ".join(sorted(refits)) or "none", "note": note, "pick": pick}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--burners", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--grid", default="0-6")
    args = parser.parse_args()
    low, _, high = args.grid.partition("-")
    workers = list(range(int(low), int(high) + 1))
    data_root = Path(os.environ.get("LOADEREXP_DATA_ROOT", REPO / "data")).resolve()
    subprocess.run([sys.executable, "-c", "import sys; from loaderexp.data.cifar import cifar10; cifar10(root=sys.argv[1])",
                    str(data_root)], cwd=REPO, check=True)  # generated once, outside every timing
    print(f"host: {len(os.sched_getaffinity(0))} CPUs; CIFAR-10 (generated copy); num_workers {args.grid}\n")
    wrong = 0
    with tempfile.TemporaryDirectory() as scratch:
        for burners in args.burners:
            done = predicted_sweep(data_root, workers, Path(scratch) / f"burners{burners}" / "sweep", burners)
            _, rates = run_naive(data_root, workers)
            reference = naive_pick(rates)
            wrong += done["pick"] != reference
            print(f"profile beside {burners} burning core(s): measured {len(done['measured'])} of {len(workers)} "
                  f"(num_workers {', '.join(map(str, done['measured']))}); refit: {done['refit']}; pick "
                  f"{done['pick']}, the naive loop's {reference}{'' if done['pick'] == reference else '  <- NOT the same'}")
            print(f"  {done['note']}\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
