"""Compare a sweep's runs: a table, a recommendation with its reason, and a plot.

``python -m loaderexp.report outputs/multiruns/<date>/<time>`` reads the jobs' result.json files.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from loaderexp.result import RESULT_FILE, RunResult

# Params that identify a run but never explain a speed difference.
IGNORED_PARAMS = ("tracking.", "data_root", "bench.", "dataset.root")


def load_results(sweep_dir: Path) -> list[tuple[Path, RunResult]]:
    """Every job's result below ``sweep_dir``, in job order."""
    found = []
    for path in Path(sweep_dir).rglob(RESULT_FILE):
        found.append((path.parent, RunResult.read(path)))
    return sorted(found, key=lambda item: _job_order(item[0]))


def _job_order(folder: Path) -> tuple:
    return (0, int(folder.name), "") if folder.name.isdigit() else (1, 0, str(folder))


def varying_params(results: Sequence[RunResult]) -> list[str]:
    """Params whose value differs between runs: the sweep's axes."""
    keys: list[str] = []
    for result in results:
        for key in result.params:
            if key not in keys and not key.startswith(IGNORED_PARAMS):
                keys.append(key)
    return [k for k in keys if len({str(r.params.get(k)) for r in results}) > 1]


def _short(key: str) -> str:
    return key.split(".", 1)[1] if key.startswith("loader.") else key


def param_text(value: object) -> str:
    """A param as Hydra's override syntax writes it (true, null)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def _fmt(value: Optional[float], digits: int = 1) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:,.{digits}f}"


def baseline(results: Sequence[RunResult]) -> Optional[RunResult]:
    """The num_workers=0 run (the fastest such one), else the slowest finished run."""
    finished = [r for r in results if r.status == "FINISHED"]
    if not finished:
        return None
    zero = [r for r in finished if r.params.get("loader.num_workers") == 0]
    pool = zero or finished
    key = (lambda r: -r.metrics["throughput_samples_per_s"]) if zero else (lambda r: r.metrics["throughput_samples_per_s"])
    return sorted(pool, key=key)[0]


def summary_table(items: Sequence[tuple[Path, RunResult]]) -> str:
    results = [r for _, r in items]
    axes = varying_params(results) or ["loader.num_workers"]
    base = baseline(results)
    base_rate = base.metrics["throughput_samples_per_s"] if base else None
    header = [*(_short(a) for a in axes), "status", "samples/s", "±IQR%", "MB/s", "1st batch s", "epoch s", "wait p50/p95 ms",
              "speed-up", "stall%", "h2d GB/s", "PSS MB", "delivery"]
    rows = [header]
    for folder, r in items:
        m = r.metrics
        rate = m.get("throughput_samples_per_s")
        epoch = m.get("epoch_time_s", m.get("epoch_time_est_s"))
        epoch_text = _fmt(epoch, 2) + ("" if "epoch_time_s" in m or epoch is None else "~")
        delivery = r.info.get("delivery_ok")
        row = [
            *(param_text(r.params.get(a)) for a in axes),
            r.status + ("*" if m.get("noisy") else ""),
            _fmt(rate, 0),
            _fmt(100 * m["throughput_iqr_rel"], 1) if m.get("repeats", 0) >= 2 else "-",
            _fmt(m.get("throughput_mb_per_s"), 1),
            _fmt(m.get("time_to_first_batch_s"), 3),
            epoch_text,
            f"{_fmt(m.get('wait_p50_ms'), 2)}/{_fmt(m.get('wait_p95_ms'), 2)}",
            f"{rate / base_rate:.2f}x" if rate and base_rate else "-",
            _fmt(100 * m["stall_fraction"], 0) if "stall_fraction" in m else "-",
            _fmt(m.get("h2d_gbps"), 2) if m.get("h2d_measured") else "n/m",
            _fmt(m.get("pss_peak_mb"), 0),
            {True: "ok", False: "FAILED", None: "-"}[delivery],
        ]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = []
    if any(r.metrics.get("noisy") for r in results):
        notes.append("* noisy: throughput IQR/median above the noise threshold across repeats")
    if any(r.metrics.get("epoch_time_est_s") for r in results):
        notes.append("~ epoch time estimated from start-up plus the steady-state rate (bench.budget=epochs measures it)")
    if results and not any(r.metrics.get("h2d_measured") for r in results):
        notes.append("n/m: " + str(results[0].info.get("h2d", "host-to-device copy not measured")))
    failed = [(f, r) for f, r in items if r.status != "FINISHED"]
    for folder, r in failed:
        notes.append(f"{folder.name}: {r.status}: {(r.error or '').splitlines()[0] if r.error else ''}")
    rec = recommend(results)
    if rec is not None:
        notes.append(rec.text)
    return "\n".join(lines + ([""] + notes if notes else []))


@dataclass
class Recommendation:
    result: RunResult
    best: RunResult
    within_noise: bool
    text: str


NOISE_ALLOWANCE_CAP = 3  # a measured spread widens the tolerance to at most 3x itself


def recommend(results: Sequence[RunResult], tolerance: float = 0.05) -> Optional[Recommendation]:
    """The fewest workers whose throughput the sweep cannot tell from the best: each worker costs
    memory and a core.

    A run is close to the best when it is within ``tolerance`` of it, or within the spread
    measured across its repeats (IQR/median of either run, up to 3x ``tolerance``): a gap
    smaller than the noise is not a measured difference.
    """
    finished = [r for r in results if r.status == "FINISHED" and r.info.get("delivery_ok") is not False]
    if not finished:
        return None
    best = max(finished, key=lambda r: r.metrics["throughput_samples_per_s"])
    best_rate = best.metrics["throughput_samples_per_s"]

    def noise(run: RunResult) -> float:
        return max(best.metrics.get("throughput_iqr_rel", 0.0), run.metrics.get("throughput_iqr_rel", 0.0))

    def gap(run: RunResult) -> float:
        return 1 - run.metrics["throughput_samples_per_s"] / best_rate if best_rate else 0.0

    close = [r for r in finished if gap(r) <= max(tolerance, min(noise(r), NOISE_ALLOWANCE_CAP * tolerance))]
    chosen = min(close, key=lambda r: (r.params.get("loader.num_workers", 0), -r.metrics["throughput_samples_per_s"]))
    rate = chosen.metrics["throughput_samples_per_s"]
    within_noise = chosen is not best and gap(chosen) <= noise(chosen)
    settings = ", ".join(f"{_short(k)}={param_text(chosen.params.get(k))}" for k in varying_params(finished))
    settings = settings or "the defaults"
    text = f"Recommendation: {settings}: {rate:,.0f} samples/s"
    if chosen is best:
        text += " (the fastest run)."
    else:
        text += (
            f", {100 * gap(chosen):.1f}% below the fastest ({best_rate:,.0f} samples/s, "
            f"num_workers={best.params.get('loader.num_workers')}) with fewer workers"
        )
        if gap(chosen) <= tolerance:
            text += f", inside the {100 * tolerance:.0f}% tolerance"
            text += "; the difference is inside the measured noise." if within_noise else "."
        else:
            text += (f": the difference is inside the measured noise (IQR {100 * noise(chosen):.1f}% of the median),"
                     " so the sweep cannot tell them apart.")
    return Recommendation(chosen, best, within_noise, text)


def results_from_mlflow(uri: str, parent_run_id: str) -> list[tuple[Path, RunResult]]:
    """A sweep's child runs, read back from MLflow as results (for sweeps run elsewhere)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    parent = client.get_run(parent_run_id)
    runs = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'", max_results=10_000
    )
    items = []
    for run in sorted(runs, key=lambda r: r.info.start_time):
        params = {k: _parse(v) for k, v in run.data.params.items()}
        info = {k[len("info."):]: _parse(v) for k, v in run.data.tags.items() if k.startswith("info.")}
        result = RunResult(status=run.info.status, params=params, metrics=dict(run.data.metrics), info=info,
                           error=run.data.tags.get("error"), run_id=run.info.run_id)
        items.append((Path(run.data.tags.get("loaderexp.output_dir", run.info.run_id)), result))
    return items


def _parse(text: str):
    """A param or tag back to the value it was logged from (numbers, booleans, null)."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def write_report(items: Sequence[tuple[Path, RunResult]], folder: Path, title: str = "") -> tuple[str, Optional[Path]]:
    """The table (printed and saved as report.txt) and the plot (throughput.png) in ``folder``."""
    from loaderexp.plot import X_AXIS, plot_throughput

    text = summary_table(items)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text(text + "\n")
    results = [r for _, r in items]
    axes = varying_params(results)
    plot = None
    if any(X_AXIS in r.params for r in results if r.status == "FINISHED"):
        plot = plot_throughput(results, axes, folder / "throughput.png", title)
    return text, plot


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderexp.report", description=__doc__)
    parser.add_argument("sweep", help="a multirun folder (outputs/multiruns/<date>/<time>), or with --uri the "
                                      "MLflow run id of a sweep's parent run")
    parser.add_argument("--uri", help="read the sweep from this MLflow tracking URI instead of a folder")
    parser.add_argument("--out", type=Path, help="where report.txt and throughput.png go (default: the sweep folder)")
    args = parser.parse_args(argv)
    if args.uri:
        items = results_from_mlflow(args.uri, args.sweep)
        out = args.out or Path("outputs") / "reports" / args.sweep
    else:
        folder = Path(args.sweep)
        if not folder.is_dir():
            parser.error(f"sweep={folder}: no such folder")
        items = load_results(folder)
        out = args.out or folder
    if not items:
        parser.error(f"sweep={args.sweep}: no runs found")
    text, plot = write_report(items, out)
    print(text)
    print(f"\nreport: {out / 'report.txt'}" + (f", plot: {plot}" if plot else ""))


if __name__ == "__main__":
    main()
