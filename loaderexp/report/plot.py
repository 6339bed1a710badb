"""Throughput against num_workers, one line per combination of the sweep's other axes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from loaderexp.report.hosts import host_type
from loaderexp.report.params import X_AXIS
from loaderexp.result import DATASET_NAME, RunResult, param_text
from loaderexp.result import metrics as M
from loaderexp.result.ceiling import model_of


def plot_throughput(results: Sequence[RunResult], axes: Sequence[str], path: Path, title: str = "",
                    pick: Optional[tuple[RunResult, str]] = None) -> Path:
    """Write a PNG: median throughput per point, the IQR across repeats as error bars; with a stage profile,
    the model's predicted curve (dashed) and this machine's ceiling (its range as a band); the pick (a run and
    how it was had) marked.  Titled with the dataset and the host unless ``title`` is given."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    finished = [r for r in results if r.finished and X_AXIS in r.params]
    series: dict[str, list[RunResult]] = {}
    others = [a for a in axes if a != X_AXIS]
    several_hosts = len({host_type(r) for r in finished}) > 1  # the same grid on node types, side by side
    for r in finished:
        label = ", ".join(f"{a.split('.')[-1]}={param_text(r.params.get(a))}" for a in others)
        if several_hosts:
            label = f"{host_type(r)}{': ' + label if label else ''}"
        label = label or "measured"
        series.setdefault(label, []).append(r)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ceilings: set[tuple[str, float, float]] = set()
    for label, runs in sorted(series.items()):
        runs = sorted(runs, key=lambda r: r.params[X_AXIS])
        xs = [r.params[X_AXIS] for r in runs]
        ys = [r.metrics[M.THROUGHPUT] for r in runs]
        spread = [r.metrics.get(M.THROUGHPUT_IQR, 0.0) * y / 2 for r, y in zip(runs, ys)]
        drawn = ax.errorbar(xs, ys, yerr=spread, marker="o", capsize=3, label=label)
        model = next((m for m in (model_of(r, runs) for r in runs) if m is not None), None)
        if model is not None:  # the model's curve beside the measured points, in the same colour
            dense = list(range(min(xs), max(xs) + 1))
            ax.plot(dense, [model.predict(x) for x in dense], linestyle="--", alpha=0.6,
                    color=drawn.lines[0].get_color(), label=f"{label}: predicted" if len(series) > 1 else "predicted")
            bound = model.ceiling_range({str(x): y for x, y in zip(xs, ys)})
            ceilings.add((bound.limit.name, round(bound.low, -1), round(bound.high, -1)))
    for name, low, high in sorted(ceilings):  # the range: at least what was seen, at most the binding limit
        ax.axhspan(low, high, color="grey", alpha=0.15, linewidth=0)
        ax.axhline(high, linestyle=":", color="grey", alpha=0.8)
        text = f"ceiling {low:,.0f}-{high:,.0f}/s ({name})" if high > low * 1.005 else f"ceiling {high:,.0f}/s ({name})"
        ax.annotate(text, (ax.get_xlim()[0], high), textcoords="offset points", xytext=(4, 4), fontsize="small",
                    color="grey")
    _mark(ax, pick)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # worker counts are whole numbers
    ax.set_xlabel("num_workers")
    ax.set_ylabel("samples / s (median of repeats, bars: IQR)")
    ax.set_title(title or default_title(finished), fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    if len(series) > 1 or ceilings or pick is not None:
        ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _mark(ax, pick: Optional[tuple[RunResult, str]]) -> None:
    """The pick as a star on its point, labelled with how it was had."""
    if pick is not None and X_AXIS in pick[0].params:
        chosen, how = pick
        x, y = chosen.params[X_AXIS], chosen.metrics[M.THROUGHPUT]
        ax.plot([x], [y], marker="*", markersize=16, color="black", linestyle="none", zorder=5,
                label=f"{how}: num_workers={x}")


def default_title(results: Sequence[RunResult]) -> str:
    """What was loaded, and where: ``DataLoader throughput: cifar10 on <CPU>, 2 CPUs``."""
    datasets = sorted({str(r.params.get(DATASET_NAME)) for r in results if r.params.get(DATASET_NAME)})
    hosts = sorted({host_type(r) for r in results})
    what = ", ".join(datasets) or "DataLoader throughput"
    return f"{what} on {hosts[0]}" if len(hosts) == 1 else f"{what} on {len(hosts)} host types"
