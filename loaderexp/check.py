"""``python -m loaderexp.check --baseline <run id | sweep folder | run folder>``: has the loader become slower?

Measures the baseline's configuration again on this host, ``--runs`` times (3), as a sweep's job
measures (the same runner, its measuring process and figures), and compares the runs: the change in
throughput with a 95% interval from the spread between whole runs, not one number against another.
Windows of one run share the host's moment and agree more closely than two runs minutes apart do on a
busy host: an interval from windows alone would call that drift a regression.

Exit 1 when throughput fell by more than ``--tolerance`` with that confidence (the whole interval below
-tolerance), or when the new measurement failed; 0 otherwise (an interval that reaches past -tolerance
but not wholly is said, not failed: a noisy host must not cry wolf); 2 when they cannot be compared
(another node type, no such baseline, a baseline that holds no measurement, or a host whose other load
while this check measured differs from the baseline's by more than a quarter core or a tenth of its
cores, or whose pace at a fixed piece of CPU work moved by more than 15% and the fall is not beyond what that
explains: the host, not the code, would decide).  ``key=value`` arguments change the baseline's settings first.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from loaderexp.config import RESOLVED_CONFIG, ConfigError, compose, config_from_file
from loaderexp.execute.dispatch import host_facts
from loaderexp.report.busy import BUSY_CORES, BUSY_SHARE, PACE_MOVED, run_pace
from loaderexp.report.confirm import Confirmation
from loaderexp.report.export import recommended
from loaderexp.report.hosts import host_type
from loaderexp.report.load import download_runs, load_results
from loaderexp.result import (BACKEND, BATCH_SIZE, DATASET_NAME, NUM_WORKERS, PIN_MEMORY, RANKS, RESULT_FILE,
                              TOLERANCE, RunResult, param_text)
from loaderexp.result import metrics as M
from loaderexp.result.paired import Difference, Verdict, runs_difference
from loaderexp.runner import JobContext, run

log = logging.getLogger("loaderexp")
SHOWN = (NUM_WORKERS, BATCH_SIZE, PIN_MEMORY, "loader.prefetch_factor", "loader.persistent_workers", DATASET_NAME,
         BACKEND, RANKS)


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
    items = [(f, r) for f, r in load_results(path) if r.finished]
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


def config_to_measure(folder: Path, overrides: Sequence[str], uri: Optional[str]) -> DictConfig:
    """The baseline's resolved config, its changes applied, without the sweep-level passes (profile,
    prediction)."""
    resolved = folder / RESOLVED_CONFIG
    if not resolved.is_file():
        raise CannotCompare(f"{folder}: no {RESOLVED_CONFIG} to measure it again from")
    cfg = config_from_file(resolved)
    bench = cfg.bench  # its windows as the baseline took them: each run's median is comparable
    bench.profile_s, bench.predict, bench.stop_below, cfg.resume = 0.0, False, None, False
    cfg.tracking.backend = "mlflow" if uri else "none"
    if uri:
        cfg.tracking.uri, cfg.tracking.experiment = uri, "loaderexp-check"
    try:
        return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    except Exception as error:  # omegaconf's validation errors name the key
        raise ConfigError([f"{' '.join(overrides)}: {str(error).splitlines()[0]}"]) from None


def run_rates(result: RunResult) -> list[float]:
    """A run's rate: its median over its windows; a configuration measured several times (a sweep's repeats of
    one configuration, pin_memory without an accelerator) counts each time."""
    rates = result.info.configuration_rates or [result.metrics.get(M.THROUGHPUT)]
    return [float(r) for r in rates if r]


def verdict(difference: Difference, tolerance: float) -> tuple[int, str]:
    """One-sided, as the question is (did it fall?): a fall beyond the tolerance is Difference.verdict's SLOWER;
    no fall is shown when the whole interval is above -tolerance."""
    if difference.verdict(tolerance) is Verdict.SLOWER:
        return 1, (f"REGRESSION: throughput fell by more than {100 * tolerance:.0f}% with 95% confidence "
                   f"(the whole interval is below -{100 * tolerance:.0f}%)")
    if difference.low >= -tolerance:
        return 0, f"OK: no fall beyond the {100 * tolerance:.0f}% tolerance (the whole interval is above it)"
    return 0, (f"OK, not shown either way: the interval reaches below -{100 * tolerance:.0f}% but not wholly; "
               "more runs (--runs 5) or a quieter host would tell")


def settings(result: RunResult) -> str:
    label = lambda key: key.removeprefix("loader.").removesuffix(".name")  # noqa: E731 - dataset=cifar10
    return ", ".join(f"{label(key)}={param_text(result.params[key])}" for key in SHOWN if key in result.params)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loaderexp.check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="a run folder, a sweep folder (its pick) or an MLflow run "
                                                          "id (a run, or a sweep's parent: its pick)")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE,
                        help=f"the fall allowed (default {TOLERANCE:g}: {100 * TOLERANCE:g}%%)")
    parser.add_argument("--uri", help="the MLflow store: where a run id is found, and where this check's run is "
                                      "logged (experiment loaderexp-check); default: a run id is looked up in the "
                                      "default store, the check's run stays in its folder")
    parser.add_argument("--runs", type=int, default=3, help="measure the configuration this many times, each in "
                                                              "its own measuring process (default 3, at least 2)")
    parser.add_argument("--out", type=Path, help="the check's run folder (default: outputs/checks/<time>)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="changes to the baseline's settings")
    args = parser.parse_args(argv)
    logging.basicConfig(format="loaderexp: %(levelname)s: %(message)s", level=logging.INFO)
    if args.runs < 2:
        parser.error(f"--runs {args.runs}: at least 2 (the spread between runs is what the interval is made of)")
    if not 0 <= args.tolerance < 1:
        parser.error(f"--tolerance {args.tolerance}: a fraction in [0, 1), e.g. 0.05 for 5%")
    host = host_facts(isolate=True).kind
    with tempfile.TemporaryDirectory(prefix="loaderexp-baseline-") as scratch:
        try:
            folder, base = baseline_run(args.baseline, args.uri, host, Path(scratch))
            if host_type(base) != host:
                raise CannotCompare(f"--baseline {args.baseline} was measured on {host_type(base)}, this host is "
                                    f"{host}: run the check on a host of that type")
            if not base.finished or not run_rates(base):
                reason = f": {base.error.splitlines()[0]}" if base.error else ""
                raise CannotCompare(f"--baseline {args.baseline} holds no measurement (status {base.status}{reason}); "
                                    "a baseline is a finished run")
            cfg = config_to_measure(folder, args.overrides, args.uri)
        except (CannotCompare, ConfigError) as error:
            print(f"loaderexp check: cannot compare: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    out = (args.out or Path("outputs") / "checks" / time.strftime("%Y-%m-%d_%H-%M-%S")).resolve()
    now = [run(cfg, JobContext(output_dir=out / f"run{i}", overrides=list(args.overrides))) for i in range(args.runs)]
    print(f"loaderexp check: {settings(base)}, on {host}")
    raise SystemExit(compared(base, folder, now, out, args.tolerance))


def compared(base: RunResult, folder: Path, now: list[RunResult], out: Path, tolerance: float) -> int:
    """Print the baseline, now and the change (one statistic: the runs' geometric mean), and the exit code."""
    before = run_rates(base)
    print(f"  baseline  {geometric_mean(before):>12,.0f} samples/s  ({len(before)} run"
          f"{'s' if len(before) > 1 else ''}: {', '.join(f'{r:,.0f}' for r in before)}; {base.run_id or folder})")
    failed = [r for r in now if not r.finished]
    if failed:
        print(f"  now       the measurement {failed[0].status}: {failed[0].error}")
        print("REGRESSION: the baseline's configuration no longer measures")
        return 1
    rates = [r.metrics[M.THROUGHPUT] for r in now]
    print(f"  now       {geometric_mean(rates):>12,.0f} samples/s  ({len(rates)} runs: "
          f"{', '.join(f'{r:,.0f}' for r in rates)}; {out})")
    difference = runs_difference(before, rates)
    print(f"  change    {difference.text()}: the interval counts how far this host's speed moves between runs")
    busy = host_load_differs(base, now)
    if busy:
        print(f"loaderexp check: cannot compare: {busy}")
        return 2
    slower = pace_now(base, now)
    if slower is not None and slower > 1 + PACE_MOVED and not difference.high < (1 - tolerance) / slower - 1:
        print(f"loaderexp check: cannot compare: the host's pace moved: a fixed piece of CPU work took x{slower:.2f} "
              "the CPU now that it took while the baseline measured (sharing that the host's own counters do not show: "
              "a neighbour below the VM, steal unreported, a moving clock), and the fall is not beyond what that "
              "explains; run the check again at another moment, or measure the baseline again here")
        return 2
    code, text = verdict(difference, tolerance)
    print(text)
    return code


def pace_now(base: RunResult, now: Sequence[RunResult]) -> Optional[float]:
    """How much slower the host ran a fixed piece of CPU work now than around the baseline (the runs' paces, the
    median of now's; None where either has none: a baseline from before loaderexp timed it).  A fall beyond what
    this explains (below (1 - tolerance) / pace - 1 with 95% confidence) is still the code's: a 3x slower loader
    still fails."""
    before, after = run_pace(base), [p for p in (run_pace(r) for r in now) if p is not None]
    if before is None or not after:
        return None
    return statistics.median(after) / before


def geometric_mean(rates: Sequence[float]) -> float:
    """What runs_difference compares: the runs' geometric mean (a median here and a mean in the change would
    be two statistics of one sample)."""
    positive = [r for r in rates if r > 0]
    return statistics.geometric_mean(positive) if positive else 0.0


def host_load_differs(base: RunResult, now: Sequence[RunResult]) -> str:
    """Why the host's other load makes the two incomparable ("" when it does not): a slower figure on a busier
    host is the host's, not the code's."""
    before, after = base.metrics.get(M.OTHERS_CPU), [r.metrics.get(M.OTHERS_CPU) for r in now]
    if before is None or None in after:
        return ""  # a baseline measured before loaderexp recorded the host's load: compared as before
    load = statistics.fmean(after)
    cores = base.host.cpus_usable or 1
    if abs(load - before) < max(BUSY_CORES, BUSY_SHARE * cores):
        return ""
    return (f"the host was {'busier' if load > before else 'quieter'} now: other processes used {load:.1f} of "
            f"{cores:g} cores while it measured, {before:.1f} while the baseline did; run the check where both "
            "see the same host (a quiet one, or the same shared one), or measure the baseline again here")


if __name__ == "__main__":
    main()
