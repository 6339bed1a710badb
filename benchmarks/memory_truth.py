"""loaderexp's memory figures against a plain training script's, side by side.

    python benchmarks/memory_truth.py                     # list- and array-backed data, 0, 1, 2 and 4 workers
    python benchmarks/memory_truth.py --samples 20000     # smaller (a smoke test)

The reference is written here, not by loaderexp: a fresh Python process imports torch, builds the
dataset, and reads one whole epoch through ``DataLoader(batch_size=128, shuffle=True, num_workers=W)``
while a thread reads the PSS of the process and its workers every 50 ms, and once more before the
epoch's last batch (its workers exit with it); the peak is what a training script holds.  loaderexp measures the same dataset and settings as a user runs it (``python -m loaderexp``,
its default budget) and reports ``pss_peak_mb``.  The script runs just before and just after loaderexp, and
the higher of its two peaks is the reference (a sampled peak can only be missed, never made up).
Target: within 15% everywhere, and the growth from 0 to 2 workers within 15% of the script's (of at least
2.25% of the 0-worker tree: a smaller growth is within the tree's own jitter).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import REPO  # noqa: E402
from loaderexp.result import metrics as M  # noqa: E402

SCRIPT = r"""
import json, os, sys, threading, time
import psutil, torch
from torch.utils.data import DataLoader
from loaderexp.data.calibration import ArrayBacked, ListBacked

kind, samples, sample_bytes, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
dataset = (ListBacked if kind == "list_backed" else ArrayBacked)(num_samples=samples, sample_bytes=sample_bytes)
me, peak, alone, stop = psutil.Process(), [0.0], [0.0], threading.Event()

def kb(path, keys):
    found = {}
    for line in open(path):
        key, _, value = line.partition(":")
        if key in keys:
            found[key] = int(value.split()[0]) * 1024
    return found

def pss() -> float:
    total, anon, files = 0.0, 0.0, 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            total += process.memory_full_info().pss
            rollup = kb(f"/proc/{process.pid}/smaps_rollup", ("Pss_Anon", "Pss_Shmem"))
            anon += rollup.get("Pss_Anon", 0) + rollup.get("Pss_Shmem", 0)
            files = max(files, kb(f"/proc/{process.pid}/status", ("RssFile",)).get("RssFile", 0))
        except (psutil.Error, OSError):
            pass
    # Alone on the machine: its anonymous pages by PSS (only the script and its workers map those), its
    # libraries' pages whole (PSS would split them with any other process that maps torch, as a test's does).
    alone[0] = max(alone[0], (anon + files) / 2**20)
    return total / 2**20

def watch() -> None:
    while not stop.wait(0.05):
        peak[0] = max(peak[0], pss())

threading.Thread(target=watch, daemon=True).start()
loader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=workers)
iterator = iter(loader)
for i, batch in enumerate(iterator):
    if i == len(loader) - 2:  # the epoch's end, its workers still alive (they exit with its last batch)
        peak[0] = max(peak[0], pss())
stop.set()
del iterator
print(json.dumps({"peak_mb": peak[0], "peak_alone_mb": alone[0]}))
"""


def script_peak(kind: str, samples: int, sample_bytes: int, workers: int) -> float:
    done = subprocess.run([sys.executable, "-c", SCRIPT, kind, str(samples), str(sample_bytes), str(workers)],
                          capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]


def loaderexp_peak(kind: str, samples: int, sample_bytes: int, workers: int, folder: Path) -> tuple[float, dict]:
    out = folder / f"{kind}-{workers}"
    done = subprocess.run([sys.executable, "-m", "loaderexp", f"dataset={kind}", f"dataset.num_samples={samples}",
                           f"dataset.sample_bytes={sample_bytes}", f"loader.num_workers={workers}", "tracking=none",
                           f"hydra.run.dir={out}"], capture_output=True, text=True, cwd=REPO)
    if done.returncode:
        sys.exit(f"loaderexp failed:\n{done.stderr[-3000:]}")
    result = json.loads((out / "result.json").read_text())
    return result["metrics"][M.PSS], result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--sample-bytes", type=int, default=4096)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2, 4])
    args = parser.parse_args()
    print(f"host: {len(os.sched_getaffinity(0))} CPUs; {args.samples:,} samples of {args.sample_bytes:,} bytes "
          f"({args.samples * args.sample_bytes / 2**20:,.0f} MB of data); batch 128, one whole epoch\n")
    print(f"{'dataset':>12} {'workers':>7} {'script MB':>10} {'loaderexp MB':>13} {'ratio':>6}  how loaderexp got it")
    failed, peaks = 0, {}
    with tempfile.TemporaryDirectory(prefix="loaderexp-memory-") as tmp:
        for kind in ("list_backed", "array_backed"):
            for workers in args.workers:
                before = script_peak(kind, args.samples, args.sample_bytes, workers)
                ours, result = loaderexp_peak(kind, args.samples, args.sample_bytes, workers, Path(tmp))
                script = max(before, script_peak(kind, args.samples, args.sample_bytes, workers))
                peaks[(kind, workers)] = (script, ours)
                ratio = ours / script
                failed += abs(ratio - 1) > 0.15
                print(f"{kind:>12} {workers:>7} {script:>10,.0f} {ours:>13,.0f} {ratio:>6.2f}  "
                      f"{result['info'].get('memory_basis', '')}")
    print()
    for kind in ("list_backed", "array_backed"):
        if (kind, 0) in peaks and (kind, 2) in peaks:
            script_growth = peaks[(kind, 2)][0] - peaks[(kind, 0)][0]
            our_growth = peaks[(kind, 2)][1] - peaks[(kind, 0)][1]
            # 15% of the growth; of a growth too small to tell apart from the tree's jitter, 15% of 15% of the tree.
            allowed = 0.15 * max(abs(script_growth), 0.15 * peaks[(kind, 0)][0])
            close = abs(our_growth - script_growth) <= allowed
            failed += not close
            print(f"{kind}: 0 -> 2 workers adds {script_growth:+,.0f} MB in the script, {our_growth:+,.0f} MB by "
                  f"loaderexp: {'within' if close else 'NOT within'} {allowed:,.0f} MB")
    print(f"\ntarget (within 15% everywhere, and the 0 -> 2 growth): {'met' if not failed else 'NOT met'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
