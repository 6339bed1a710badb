"""``python -m loaderexp.report``: a sweep's table, recommendation and plot, from its folder or MLflow."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from loaderexp.report.configurations import as_configurations
from loaderexp.report.confirm import Confirmation, confirmed_pick
from loaderexp.report.export import export
from loaderexp.report.load import confirmation_from_mlflow, load_results, results_from_mlflow
from loaderexp.report.params import X_AXIS, varying_params
from loaderexp.report.plot import plot_throughput
from loaderexp.report.recommend import recommend
from loaderexp.report.table import summary_table
from loaderexp.result import RunResult, write_whole


def write_report(items: Sequence[tuple[Path, RunResult]], folder: Path, title: str = "",
                 confirmation: Optional[Confirmation] = None) -> tuple[str, Optional[Path]]:
    """The table (printed and saved as report.txt) and the plot (throughput.png) in ``folder``."""
    text = summary_table(items, confirmation)
    return text, save_report(text, items, folder, title, confirmation)


def save_report(text: str, items: Sequence[tuple[Path, RunResult]], folder: Path, title: str = "",
                confirmation: Optional[Confirmation] = None) -> Optional[Path]:
    """``text`` as report.txt and the plot in ``folder``: the plot's path (None without one); OSError as it comes."""
    folder.mkdir(parents=True, exist_ok=True)
    write_whole(folder / "report.txt", text + "\n")
    results = [r for _, r in as_configurations(items)[0]]
    axes = varying_params(results)
    plot = None
    if any(X_AXIS in r.params for r in results if r.finished):
        plot = plot_throughput(results, axes, folder / "throughput.png", title, pick=marked_pick(results, confirmation))
    return plot


def marked_pick(results: Sequence[RunResult], confirmation: Optional[Confirmation]) -> Optional[tuple[RunResult, str]]:
    """The run the report answers with, and how it was had: the confirmed pick, or the recommendation's."""
    confirmed = confirmed_pick(confirmation, results)
    if confirmed is not None:
        return confirmed, "confirmed pick"
    chosen = recommend(results)
    return (chosen.result, "pick (unconfirmed)") if chosen is not None else None


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderexp.report", description=__doc__)
    parser.add_argument("sweep", help="a multirun folder (outputs/multiruns/<date>/<time>), or with --uri the "
                                      "MLflow run id of a sweep's parent run")
    parser.add_argument("--uri", help="read the sweep from this MLflow tracking URI instead of a folder")
    parser.add_argument("--out", type=Path, help="where report.txt and throughput.png go (default: the sweep folder)")
    parser.add_argument("--export", type=Path, metavar="DIR",
                        help="also write the recommendation for your training here: loader.yaml (a Hydra config "
                             "group file), dataloader_kwargs.json, PyTorch, Lightning and Hugging Face snippets")
    args = parser.parse_args(argv)
    logging.basicConfig(format="loaderexp: %(levelname)s: %(message)s")
    if args.uri:
        try:
            items = results_from_mlflow(args.uri, args.sweep)
        except LookupError as error:  # a line of its own, not argparse's usage: the arguments were fine
            print(f"loaderexp: error: {error.args[0]}", file=sys.stderr)
            raise SystemExit(2) from None
        out = args.out or Path("outputs") / "reports" / args.sweep
        with tempfile.TemporaryDirectory() as scratch:  # the pick confirmed side by side, as the sweep logged it
            confirmation = Confirmation.read(confirmation_from_mlflow(args.uri, args.sweep, Path(scratch)))
        source = f"MLflow run {args.sweep} ({args.uri})"
    else:
        folder = Path(args.sweep)
        if not folder.is_dir():
            parser.error(f"sweep={folder}: no such folder")
        items = load_results(folder)
        confirmation = Confirmation.read(folder)
        out = args.out or folder
        source = str(folder)
    if not items:
        parser.error(f"sweep={args.sweep}: no runs found")
    text = summary_table(items, confirmation)
    print(text)  # first: a place the files cannot go costs the files, not the answer
    failed = False
    try:
        plot = save_report(text, items, out, confirmation=confirmation)
        print(f"\nreport: {out / 'report.txt'}" + (f", plot: {plot}" if plot else ""))
    except OSError as error:
        failed = args.out is not None  # the sweep's own folder read-only: the table above is what was asked for
        print(f"loaderexp: {'error' if failed else 'note'}: report.txt and the plot were not written to {out}: "
              f"{_why(error)}" + ("" if failed else " (--out DIR writes them elsewhere)"), file=sys.stderr)
    if args.export:
        try:
            written = export(items, args.export, source, confirmation)
        except OSError as error:
            print(f"loaderexp: error: could not export the recommendation to {args.export}: {_why(error)}",
                  file=sys.stderr)
            raise SystemExit(1) from None
        if not written:
            parser.error(f"sweep={args.sweep}: no finished run to recommend, nothing exported")
        print(f"exported the recommendation: {', '.join(str(p) for p in written)}")
    if failed:
        raise SystemExit(1)


def _why(error: OSError) -> str:
    """An OSError in a few words: the path it met and the system's reason."""
    return f"{error.filename}: {error.strerror}" if error.filename and error.strerror else str(error)
