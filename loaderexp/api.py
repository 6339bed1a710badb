"""loaderexp from Python: ``loaderexp.measure(dataset, **knobs)`` and ``loaderexp.sweep(dataset, grid)``.

For notebooks and scripts that already hold their dataset (or LightningDataModule) as an object.
Both go the command line's way: ``measure`` is one run of :func:`loaderexp.runner.run` (its measuring
process, result.json, its MLflow run), ``sweep`` is ``python -m loaderexp -m`` itself (the parent
run, the confirmation of the pick, the exported recommendation), the dataset named by key
(:mod:`loaderexp.data.objects`).  Anything else the CLI takes goes in ``overrides``.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import itertools
import logging
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from loaderexp.config import ConfigError, compose, composed_spec
from loaderexp.config.schema import LoaderConfig
from loaderexp.data.objects import register
from loaderexp.result import RunResult, param_text  # a value as the config writes it: null, true
from loaderexp.result import metrics as M

KNOBS = tuple(f.name for f in dataclasses.fields(LoaderConfig))
ROW_METRICS = {"samples_per_s": M.THROUGHPUT, "iqr": M.THROUGHPUT_IQR, "pss_mb": M.PSS,
               "of_ceiling": M.CEILING_FRACTION}


def _knob_overrides(knobs: Mapping[str, Any]) -> list[str]:
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise ConfigError([f"{unknown[0]}: not a DataLoader knob loaderexp sweeps; valid: {', '.join(KNOBS)} "
                           "(anything else: overrides=['bench=quick', ...])"])
    return [f"loader.{k}={param_text(v)}" for k, v in knobs.items()]


def _dataset_overrides(dataset: Any, folder: Path) -> list[str]:
    if dataset is None:
        return []  # the config's own dataset (overrides may name one: dataset=cifar10)
    key, pickled = register(dataset, folder)
    found = ["dataset=object", f"dataset.key={key}", f"dataset.name={type(dataset).__name__}"]
    if pickled is not None:
        return [*found, f"dataset.pickled={pickled}"]
    # Only this process holds it: measure here, not in a forked measuring process.
    return [*found, "bench.isolate=false"]


def _tracking_overrides(tracking: Optional[str], experiment: Optional[str]) -> list[str]:
    found = ["tracking=none"] if tracking == "none" else [f"tracking.uri={tracking}"] if tracking else []
    return found + ([f"tracking.experiment={experiment}"] if experiment else [])


def _in_main_process(name: str) -> None:
    import multiprocessing

    if multiprocessing.parent_process() is not None:  # a measuring process importing the user's script again
        raise RuntimeError("loaderexp.measure/sweep was called while a measuring process imported your script: put "
                           "the script's own code under `if __name__ == \"__main__\":` (as DataLoader's workers "
                           "need with spawn)")
    unguarded = unguarded_call()
    if unguarded is not None:  # the measuring processes would import the script, and call this, again
        print(f"loaderexp: error: {unguarded}: loaderexp.{name}() runs at the top level of the script; put the "
              "script's own code under `if __name__ == \"__main__\":` (loaderexp's measuring processes import the "
              "script again, as DataLoader's workers do with spawn, and would start it again)", file=sys.stderr)
        raise SystemExit(2)


def unguarded_call() -> Optional[str]:
    """``file:line`` when loaderexp is called from a script run as ``__main__`` (a file, not a notebook, a REPL
    or stdin) by a top-level statement outside an ``if __name__ == "__main__":`` block; None otherwise."""
    import __main__ as main

    path = getattr(main, "__file__", None)
    if not path or not os.path.isfile(path):
        return None
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    statement = next((node for node in tree.body if node.lineno <= line <= (node.end_lineno or node.lineno)), None)
    return None if statement is None or _main_guard(statement) else f"{path}:{line}"


def _main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.comparators) != 1:
        return False
    sides = [node.test.left, node.test.comparators[0]]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    values = {s.value for s in sides if isinstance(s, ast.Constant)}
    return isinstance(node.test.ops[0], ast.Eq) and names == {"__name__"} and values == {"__main__"}


def measure(dataset: Any = None, *, overrides: Sequence[str] = (), tracking: Optional[str] = None,
            experiment: Optional[str] = None, output_dir: Optional[Path] = None, **knobs: Any) -> RunResult:
    """Measure ``dataset`` (a map-style or iterable Dataset, or a LightningDataModule; None: the config's
    own) with the DataLoader ``knobs`` (num_workers=4, pin_memory=True, ...), as one run of the CLI.

    ``tracking``: an MLflow tracking URI, ``"none"`` for result.json only, or None for the config's
    (MLflow's sqlite store ./mlflow.db).  Returns the run's result: ``.metrics``, ``.params``, ``.info``."""
    from loaderexp.runner import JobContext, run
    from loaderexp.track.tracker import check_store

    _in_main_process("measure")
    folder = Path(output_dir or Path("outputs") / "runs" / time.strftime("%Y-%m-%d/%H-%M-%S")).resolve()
    composed = [*_dataset_overrides(dataset, folder), *_knob_overrides(knobs), *overrides,
                *_tracking_overrides(tracking, experiment)]
    config = compose(composed)
    check_store(composed_spec(config))  # a store that cannot be used is said before anything is measured
    with _from_a_notebook_or_a_pipe():
        return run(config, JobContext(output_dir=folder, overrides=composed))


@contextmanager
def _from_a_notebook_or_a_pipe() -> Iterator[None]:
    """What the measuring processes and the user need when ``__main__`` is no file: a notebook, ``python -``.

    Python's process start (spawn, forkserver) runs ``__main__.__file__`` again in the new process; for
    ``<stdin>`` that is no file, and the start fails: the name is hidden while loaderexp starts its processes
    (a dataset defined there travels by value, :mod:`loaderexp.data.objects`).  Without Python logging set
    up (a notebook), the wait for a host another measurement holds is said on stderr, not in silence."""
    import __main__ as main

    path = getattr(main, "__file__", None)
    hidden = path is not None and not os.path.isfile(path)
    if hidden:
        del main.__file__
    waits = logging.getLogger("loaderexp.execute.host_lock")
    said = logging.StreamHandler(sys.stderr) if not logging.getLogger().handlers else None
    if said is not None:
        said.setFormatter(logging.Formatter("loaderexp: %(message)s"))
        waits.addHandler(said)
        waits.setLevel(logging.INFO)
    try:
        yield
    finally:
        if hidden:
            main.__file__ = path
        if said is not None:
            waits.removeHandler(said)


@dataclass
class SweepReport:
    """What ``python -m loaderexp -m`` ends with, as values: one row per run, the recommendation, the files."""

    rows: list[dict[str, Any]]
    results: list[RunResult]
    text: str  # the report's table and recommendation, as printed
    folder: Path  # the sweep folder (export/ holds the recommendation for your training)
    recommendation: Optional[dict[str, Any]] = None  # the picked run's row
    exported: list[Path] = field(default_factory=list)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        """A notebook's view: the rows as a table, the pick in bold, the report's text below it."""
        varied = [k for k in KNOBS if len({str(row.get(k)) for row in self.rows}) > 1]
        columns = [*(varied or ["num_workers"]), "status", *ROW_METRICS]

        def cell(value: Any) -> str:
            if isinstance(value, float):
                return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
            text = "" if value is None else str(value)
            return html.escape(text)

        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join(
            "<tr" + (' style="font-weight:bold"' if row is self.recommendation else "") + ">"
            + "".join(f"<td>{cell(row.get(c, ''))}</td>" for c in columns) + "</tr>" for row in self.rows)
        return (f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                f"<details><summary>report ({html.escape(str(self.folder))})</summary>"
                f"<pre>{html.escape(self.text)}</pre></details>")


def sweep(dataset: Any = None, grid: Optional[Mapping[str, Sequence[Any]]] = None, *, overrides: Sequence[str] = (),
          tracking: Optional[str] = None, experiment: Optional[str] = None, sweep_dir: Optional[Path] = None,
          **knobs: Any) -> SweepReport:
    """Every combination of ``grid`` (DataLoader knobs to lists of values: ``{"num_workers": range(4)}``)
    over ``dataset``, as ``python -m loaderexp -m`` sweeps it; ``knobs`` fix the others."""
    _in_main_process("sweep")
    grid = dict(grid or {"num_workers": [0, 1, 2]})
    folder = Path(sweep_dir or Path("outputs") / "multiruns" / time.strftime("%Y-%m-%d/%H-%M-%S")).resolve()
    _knob_overrides({k: None for k in grid})  # the grid's keys are knobs too
    axes = [f"loader.{k}=" + ",".join(param_text(v) for v in values) for k, values in grid.items()]
    if not all(grid.values()):
        raise ConfigError([f"grid: {next(k for k, v in grid.items() if not v)} has no values"])
    arguments = ["-m", *axes, *_dataset_overrides(dataset, folder / "dataset"), *_knob_overrides(knobs), *overrides,
                 *_tracking_overrides(tracking, experiment), f"hydra.sweep.dir={folder}"]
    with _from_a_notebook_or_a_pipe():
        _multirun(arguments)
    return _report(folder, len(list(itertools.product(*grid.values()))))


def _multirun(arguments: list[str]) -> None:
    """``python -m loaderexp`` in this process (its launcher runs the jobs here, so the dataset is at hand)."""
    from hydra.core.global_hydra import GlobalHydra

    from loaderexp.__main__ import entry

    GlobalHydra.instance().clear()  # a notebook's own compose() left Hydra initialised
    saved = sys.argv
    sys.argv = ["loaderexp", *arguments]
    try:
        entry()
    except SystemExit as stopped:  # Hydra refused the config, or the sweep could not start: said above
        if stopped.code == 130:  # Ctrl-C: recorded and said above; the caller's own code sees it as ever
            raise KeyboardInterrupt from None
        if stopped.code:
            raise RuntimeError(f"the sweep did not run (exit status {stopped.code}): its error is printed above") \
                from None
    finally:
        sys.argv = saved
        GlobalHydra.instance().clear()


def _report(folder: Path, planned: int) -> SweepReport:
    from loaderexp.report import load_results, summary_table
    from loaderexp.report.confirm import Confirmation
    from loaderexp.report.export import recommended

    items = load_results(folder)
    if not items:
        raise RuntimeError(f"the sweep recorded none of its {planned} runs in {folder}: see its log above")
    rows = [_row(job, r) for job, r in items]
    confirmation = Confirmation.read(folder)
    picks = recommended(items, confirmation)
    # By folder: with repeats of one configuration merged, the pick is a merged copy of one of its runs.
    chosen = next((row for row, (job, _) in zip(rows, items) if picks and job == picks[0].folder), None)
    exported = sorted((folder / "export").rglob("*")) if (folder / "export").is_dir() else []
    return SweepReport(rows, [r for _, r in items], summary_table(items, confirmation), folder, chosen,
                       [p for p in exported if p.is_file()])


def _row(folder: Path, result: RunResult) -> dict[str, Any]:
    knobs = {k.split(".", 1)[1]: v for k, v in result.params.items() if k.startswith("loader.")}
    figures = {name: result.metrics.get(metric) for name, metric in ROW_METRICS.items()}
    return {**knobs, "status": result.status, **figures, "run_id": result.run_id, "folder": str(folder)}
