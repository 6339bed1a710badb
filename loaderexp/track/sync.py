"""Import into MLflow the results a sweep could not log (the store was down): one command, nothing lost.

    python -m loaderexp.sync outputs/multiruns/<date>/<time>                 # to the URI the sweep used
    python -m loaderexp.sync outputs/multiruns/<date>/<time> --uri http://127.0.0.1:5000

Each job's result.json says whether it reached MLflow (``logged``); the ones that did not become
runs under the sweep's parent run (a new parent in another store), and are marked as logged.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

from loaderexp.report import load_results
from loaderexp.result import NUM_WORKERS, TRACKING_EXPERIMENT, TRACKING_URI, Status
from loaderexp.track.tracker import MlflowTracker, close_stale_runs, log_result, opening_tags


def sync(sweep_dir: Path, uri: Optional[str] = None, experiment: Optional[str] = None) -> int:
    """Log every unlogged result below ``sweep_dir``; returns how many were imported."""
    pending = [(folder, r) for folder, r in load_results(sweep_dir) if not r.logged and r.status not in (Status.RUNNING, Status.PREDICTED)]
    if not pending:
        return 0
    first = pending[0][1].params
    uri = uri or first[TRACKING_URI]
    experiment = experiment or first[TRACKING_EXPERIMENT]
    tracker = MlflowTracker(uri, experiment)
    parent_id = _parent(tracker, sweep_dir)
    for folder, result in pending:
        tags = {**opening_tags(result, folder), "loaderexp.imported": "true"}
        if _run(tracker, result.run_id) is None:
            # The run was never created (or lives in another store): make it now.
            name = f"{NUM_WORKERS}={result.params.get(NUM_WORKERS)} ({folder.name})"
            result.run_id = tracker.start_run(name, tags, parent_id)
        log_result(tracker, result.run_id, result, folder)
        result.logged = True
        result.write(folder)
    return len(pending)


def _run(tracker: MlflowTracker, run_id: Optional[str]):
    """The run with this id in the tracker's store, or None."""
    if not run_id:
        return None
    try:
        return tracker.client.get_run(run_id)
    except Exception:
        return None


def _parent(tracker: MlflowTracker, sweep_dir: Path) -> str:
    """The sweep's own parent run when it lives in this store, else a new one for the import."""
    record = sweep_dir / "sweep.json"
    if record.is_file():
        saved = json.loads(record.read_text())
        # Run ids are unique: found here, it is the same store, whatever address it is served at now.
        found = _run(tracker, saved.get("parent_run_id"))
        if found is not None:
            close_stale_runs(tracker, found.info.run_id)  # jobs a killed sweep left RUNNING
            if found.info.status == Status.RUNNING:
                tracker.end_run(found.info.run_id, Status.FINISHED)  # the sweep could not close it itself
            return found.info.run_id
    parent = tracker.start_run(f"imported {sweep_dir}", {"loaderexp.sweep": "parent", "loaderexp.sweep_dir": str(sweep_dir)})
    tracker.end_run(parent, Status.FINISHED)
    return parent


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderexp.sync", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--uri", help="tracking URI (default: the one the sweep used)")
    parser.add_argument("--experiment", help="experiment name (default: the sweep's)")
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        parser.error(f"sweep_dir={args.sweep_dir}: no such folder")
    count = sync(args.sweep_dir, args.uri, args.experiment)
    print(f"imported {count} run(s) from {args.sweep_dir}" if count else "nothing to import: every result is in MLflow")

