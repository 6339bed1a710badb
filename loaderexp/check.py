"""``python -m loaderexp.check --baseline <run id | sweep folder | run folder>``: has the loader become slower?

Measures the baseline's configuration again on this host, as a sweep's job measures (the same runner,
its measuring process and figures), and compares the two runs' windows: the change in throughput with
a 95% interval over both runs' windows, not one number against another (window by window when both
followed the same schedule, else Welch's over the two samples).

Exit 1 when throughput fell by more than ``--tolerance`` with that confidence (the whole interval below
-tolerance), or when the new measurement failed; 0 otherwise (an interval that reaches past -tolerance
but not wholly is said, not failed: a noisy host must not cry wolf); 2 when they cannot be compared
(another node type, no such baseline).  ``key=value`` arguments change the baseline's settings first.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from omegaconf import OmegaConf

from loaderexp.config import Config, ConfigError, compose
from loaderexp.config.store import structured
from loaderexp.execute.dispatch import host_facts
from loaderexp.report.confirm import Confirmation
from loaderexp.report.export import recommended
from loaderexp.report.hosts import host_type, host_type_of
from loaderexp.report.load import download_runs, load_results
from loaderexp.result import RESULT_FILE, RunResult, param_text
from loaderexp.result import metrics as M
from loaderexp.result.paired import Difference, independent_difference, paired_difference
from loaderexp.runner import RESOLVED_CONFIG, JobContext, run

log = logging.getLogger("loaderexp")
MIN_WINDOWS = 5  # the new run's windows, at least: the interval narrows with them
SCHEDULE = ("warmup_batches", "round_size")  # with bench.batches: where each window falls in the epochs
BATCHES = "bench.batches"
SHOWN = ("loader.num_workers", "loader.batch_size", "loader.pin_memory", "loader.prefetch_factor",
         "loader.persistent_workers", "dataset.name", "backend.name", "dist.nproc_per_node")


class CannotCompare(Exception):
    """The baseline cannot be measured again here: one line that says why."""


def baseline_run(baseline: str, uri: Optional[str], host: str, scratch: Path) -> tuple[Path, RunResult]:
    """The run to measure again: a run folder's, a sweep folder's pick (for this node type), or an MLflow
    run's (a sweep parent's pick)."""
    path = Path(baseline)
    if not path.exists():
        if "/" in baseline or baseline.startswith("."):
            raise CannotCompare(f"--baseline {baseline}: no such folder")
        try:
            path = download_runs(uri or _default_uri(), baseline, scratch)
        except LookupError as error:
            raise CannotCompare(str(error)) from None
    if (path / RESULT_FILE).is_file():
        return path, RunResult.read(path / RESULT_FILE)
    items = [(f, r) for f, r in load_results(path) if r.status == "FINISHED"]
    if not items:
        raise CannotCompare(f"--baseline {baseline}: no finished run there")
    here = [p for p in recommended(items, Confirmation.read(path)) if p.host == host]
    if not here:
        kinds = sorted({p.host for p in recommended(items)})
        raise CannotCompare(f"--baseline {baseline} was measured on {'; '.join(kinds)}, this host is {host}: "
                            "run the check on a host of that type")
    pick = min(here, key=lambda p: p.ranks)  # one rank per node unless the sweep only measured more
    return pick.folder, pick.result


def _default_uri() -> str:
    return str(compose([]).tracking.uri)


def config_to_measure(folder: Path, overrides: Sequence[str], uri: Optional[str]) -> "OmegaConf":
    """The baseline's resolved config, its changes applied, measured with enough windows for an interval
    and without the sweep-level passes (profile, prediction)."""
    resolved = folder / RESOLVED_CONFIG
    if not resolved.is_file():
        raise CannotCompare(f"{folder}: no {RESOLVED_CONFIG} to measure it again from")
    cfg = OmegaConf.merge(structured(Config), OmegaConf.load(resolved))
    bench = cfg.bench
    bench.min_repeats = max(bench.min_repeats, MIN_WINDOWS)
    bench.max_repeats = max(bench.max_repeats, bench.min_repeats)
    if bench.repeats is not None:
        bench.repeats = max(bench.repeats, MIN_WINDOWS)
    bench.profile_s, bench.predict, bench.stop_below, cfg.resume = 0.0, False, None, False
    cfg.tracking.backend = "mlflow" if uri else "none"
    if uri:
        cfg.tracking.uri, cfg.tracking.experiment = uri, "loaderexp-check"
    try:
        return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    except Exception as error:  # omegaconf's validation errors name the key
        raise ConfigError([f"{' '.join(overrides)}: {str(error).splitlines()[0]}"]) from None


def windows(result: RunResult) -> list[float]:
    rates = result.info.get("repeat_rates") or []
    return [float(r) for r in rates] or ([result.metrics[M.THROUGHPUT]] if M.THROUGHPUT in result.metrics else [])


def compared(base: RunResult, now: RunResult) -> tuple[Difference, str]:
    """The change, and how it was paired: window by window when both runs measured the same schedule (the same
    budget: each window's place in the epochs, its warm-up, its length), so what a place does to a window
    (an epoch's start, a full prefetch queue) is the same on both sides; else the windows as two samples."""
    same = all(base.info.get(k) == now.info.get(k) for k in SCHEDULE) and base.params.get(BATCHES) == \
        now.params.get(BATCHES)
    a, b = windows(base), windows(now)
    if same and min(len(a), len(b)) >= 2:
        return paired_difference(a, b), "paired window by window: both runs measured the same schedule"
    return independent_difference(a, b), "the two runs' windows as two samples (Welch)"


def verdict(difference: Difference, tolerance: float) -> tuple[int, str]:
    if difference.high < -tolerance:
        return 1, (f"REGRESSION: throughput fell by more than {100 * tolerance:.0f}% with 95% confidence "
                   f"(the whole interval is below -{100 * tolerance:.0f}%)")
    if difference.low >= -tolerance:
        return 0, f"OK: no fall beyond the {100 * tolerance:.0f}% tolerance (the whole interval is above it)"
    return 0, (f"OK, not shown either way: the interval reaches below -{100 * tolerance:.0f}% but not wholly; "
               "more windows (bench.min_repeats=10) or a quieter host would tell")


def settings(result: RunResult) -> str:
    return ", ".join(f"{k.split('.')[-1]}={param_text(result.params[k])}" for k in SHOWN if k in result.params)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderexp.check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="a run folder, a sweep folder (its pick) or an MLflow run "
                                                          "id (a run, or a sweep's parent: its pick)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="the fall allowed (default 0.05: 5%%)")
    parser.add_argument("--uri", help="the MLflow store: where a run id is found, and where this check's run is "
                                      "logged (experiment loaderexp-check); default: a run id is looked up in the "
                                      "default store, the check's run stays in its folder")
    parser.add_argument("--out", type=Path, help="the check's run folder (default: outputs/checks/<time>)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="changes to the baseline's settings")
    args = parser.parse_args(argv)
    logging.basicConfig(format="loaderexp: %(levelname)s: %(message)s", level=logging.INFO)
    if not 0 <= args.tolerance < 1:
        parser.error(f"--tolerance {args.tolerance}: a fraction in [0, 1), e.g. 0.05 for 5%")
    host = host_type_of(host_facts(isolate=True))
    with tempfile.TemporaryDirectory(prefix="loaderexp-baseline-") as scratch:
        try:
            folder, base = baseline_run(args.baseline, args.uri, host, Path(scratch))
            if host_type(base) != host:
                raise CannotCompare(f"--baseline {args.baseline} was measured on {host_type(base)}, this host is "
                                    f"{host}: run the check on a host of that type")
            cfg = config_to_measure(folder, args.overrides, args.uri)
        except (CannotCompare, ConfigError) as error:
            print(f"loaderexp check: cannot compare: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    out = args.out or Path("outputs") / "checks" / time.strftime("%Y-%m-%d_%H-%M-%S")
    now = run(cfg, JobContext(output_dir=out.resolve(), overrides=list(args.overrides)))
    print(f"loaderexp check: {settings(base)}, on {host}")
    print(f"  baseline  {base.metrics.get(M.THROUGHPUT, 0):>12,.0f} samples/s  ({len(windows(base))} windows; "
          f"{base.run_id or folder})")
    if now.status != "FINISHED":
        print(f"  now       the measurement {now.status}: {now.error}")
        print("REGRESSION: the baseline's configuration no longer measures")
        raise SystemExit(1)
    print(f"  now       {now.metrics[M.THROUGHPUT]:>12,.0f} samples/s  ({len(windows(now))} windows; {out})")
    difference, how = compared(base, now)
    print(f"  change    {difference.text()}, {how}")
    code, text = verdict(difference, args.tolerance)
    print(text)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
