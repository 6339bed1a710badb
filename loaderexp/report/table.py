"""The summary table of a sweep: one row per configuration, notes, and the recommendation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from loaderexp.report.busy import busy_notes, moved_from, pace_cell, pace_notes, quota_notes
from loaderexp.model.limits import CeilingRange
from loaderexp.report.ceiling import beyond, ceiling_for, ceiling_sections, sweep_ceilings
from loaderexp.report.configurations import as_configurations
from loaderexp.report.confirm import Confirmation, RaceVerdicts, cannot_tell, confirmed_pick, names
from loaderexp.report.hosts import by_host_type, overlaps
from loaderexp.report.params import short_key, varying_params
from loaderexp.report.forecast import fill_forecasts, forecast_notes, prediction_note
from loaderexp.report.recommend import recommend
from loaderexp.result import NUM_WORKERS, TOLERANCE, RunResult, Status, param_text
from loaderexp.result import metrics as M
from loaderexp.result.ceiling import storage_read


def _fmt(value: Optional[float], digits: int = 1) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:,.{digits}f}"


def baseline(results: Sequence[RunResult]) -> Optional[RunResult]:
    """The num_workers=0 run (the fastest such one), else the slowest finished run."""
    finished = [r for r in results if r.finished and not r.metrics.get(M.PRUNED)]
    if not finished:
        return None
    zero = [r for r in finished if r.params.get(NUM_WORKERS) == 0]
    pool = zero or finished
    key = (lambda r: -r.metrics[M.THROUGHPUT]) if zero else (lambda r: r.metrics[M.THROUGHPUT])
    return sorted(pool, key=key)[0]


def summary_table(items: Sequence[tuple[Path, RunResult]], confirmation: Optional[Confirmation] = None) -> str:
    """One table and recommendation, or one per node type when the sweep ran on several; with the pick's
    confirmation side by side when there is one."""
    groups = by_host_type(items)
    if len(groups) == 1:
        text = _table(items, confirmation)
    else:
        text = "\n\n".join(f"== {kind}: {len(group)} runs on {_hostnames(group)}\n{_table(group)}"
                             for kind, group in groups.items())
    shared = overlaps(items)
    return "\n".join([text, *shared])


def _rate(result: Optional[RunResult]) -> Optional[float]:
    return result.metrics[M.THROUGHPUT] if result else None


def _hostnames(group: Sequence[tuple[Path, RunResult]]) -> str:
    return ", ".join(sorted({str(r.host.hostname) for _, r in group}))


def _table(items: Sequence[tuple[Path, RunResult]], confirmation: Optional[Confirmation] = None) -> str:
    every_run = [r for _, r in items]
    items, merged = as_configurations(items)
    results = [r for _, r in items]
    fill_forecasts(results)  # a sweep recorded before the forecast's rule changed: shown as the note says
    axes = varying_params(results) or [NUM_WORKERS]
    # The ranks per node are the machine's (its GPUs), not a knob: one recommendation per count.
    ranks = sorted({r.ranks for r in results})
    recs = {count: recommend([r for r in results if r.ranks == count]) for count in ranks}
    # Speed-up against the baseline with as many ranks.
    base_rates = {count: _rate(baseline([r for r in results if r.ranks == count])) for count in ranks}
    kinds = Columns(stepped=any(r.info.stepped for r in results),  # a step ran
                    ranked=any(r.metrics.get(M.RANK_COUNT, 1) > 1 for r in results),  # ranks loaded at once
                    cold=any(M.COLD in r.metrics for r in results),  # bench.cache=cold|both
                    ceiling=any(M.CEILING_FRACTION in r.metrics for r in results),
                    others=any(M.OTHERS_CPU in r.metrics for r in results),  # the host's other load
                    pace=moved_from(every_run))  # sharing it cannot see
    # The run the sweep answers with: the race's pick where it raced (it may replace the jobs' recommendation).
    picks = {count: rec.result if rec else None for count, rec in recs.items()}
    confirmed = confirmed_pick(confirmation, results)
    if confirmed is not None and confirmed.ranks in picks:
        picks[confirmed.ranks] = confirmed
    rows = [kinds.header(axes)]
    ceilings = sweep_ceilings(results) if kinds.ceiling else []
    raced = confirmation.beside(confirmed, TOLERANCE) if confirmation is not None else None
    for _, r in items:
        rows.append(_row(r, axes, base_rates[r.ranks], kinds, picks[r.ranks], ceiling_for(r, ceilings),
                         raced if picks[r.ranks] is confirmed else None))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [*merged, *_notes(items, kinds.ranked), *noise_advice(results), *busy_notes(results),
             *quota_notes(results), *pace_notes(every_run)]
    for count, rec in recs.items():
        if rec is None:
            continue
        moved = count == 1 and confirmed is not None and confirmed is not rec.result  # the race named another
        notes.append(rec.text_overruled() if moved else rec.text)
        if confirmation is not None and count == 1:
            notes.append(confirmation.text(axes, TOLERANCE))
            finished = [r for r in results if r.finished and not r.metrics.get(M.PRUNED)]
            notes += [t for t in [confirmation.unraced_ties(picks[count], finished, axes, TOLERANCE)] if t]
        for section in ceiling_sections([r for r in results if r.ranks == count], picks[count]):
            notes += ["", section]  # a blank line before each profile's section, as before the first
    return "\n".join(lines + ([""] + notes if notes else []))


@dataclass(frozen=True)
class Columns:
    """The table's optional columns, by what the sweep measured."""

    stepped: bool
    ranked: bool
    cold: bool
    ceiling: bool
    others: bool = False
    pace: Optional[float] = None  # the sweep's quickest reading of the fixed work, where the pace moved

    def header(self, axes: Sequence[str]) -> list[str]:
        return [*(short_key(a) for a in axes), "status", "samples/s", *(["slowest"] if self.ranked else []), "vs pick",
                "±IQR%", "MB/s", *(["cold/s", "cold MB/s"] if self.cold else []), "1st batch s", "epoch s",
                "wait p50/p95 ms", "speed-up", *(["ceil%"] if self.ceiling else []), "stall%",
                *(["bound"] if self.stepped else []), "h2d GB/s", "PSS MB", *(["others"] if self.others else []),
                *(["pace"] if self.pace else []), "delivery"]


def versus(r: RunResult, pick: Optional[RunResult], raced: Optional[RaceVerdicts] = None) -> str:
    """The run's rate against the pick's; ≈ when the gap is inside the tolerance or either run's measured spread
    (the recommendation's rule cannot tell them apart), or the race could not tell the two apart side by side;
    never when the race showed the run slower than the pick (its leader) beyond the tolerance: side by side beats
    the jobs' figures, measured one after another."""
    if pick is None or r is pick or M.THROUGHPUT not in r.metrics or M.THROUGHPUT not in pick.metrics:
        return "pick" if r is pick else "-"
    gap = r.metrics[M.THROUGHPUT] / pick.metrics[M.THROUGHPUT] - 1
    raced = raced or RaceVerdicts()
    if any(names(r, params) for params in raced.slower):
        return f"{100 * gap:+.1f}%"
    untold = any(names(r, params) for params in raced.untold)
    return f"{100 * gap:+.1f}%" + ("≈" if cannot_tell(r, pick, TOLERANCE) or untold else "")


NOISY_SHARE = 0.5  # this share of the runs noisy: the sweep says what to do rather than rank noise


def noise_advice(results: Sequence[RunResult]) -> list[str]:
    finished = [r for r in results if r.finished]
    noisy = [r for r in finished if r.metrics.get(M.NOISY)]
    notes = []
    if any(r.metrics.get(M.THROUGHPUT) for r in finished):
        notes.append("vs pick: each run's rate against the pick's (the confirmed pick's where the race confirmed one); "
                     f"≈: the gap is inside the {100 * TOLERANCE:.0f}% tolerance or the runs' measured spread, or the "
                     "race could not tell the two apart side by side: not a measured difference")
    if len(noisy) >= 2 and len(noisy) >= NOISY_SHARE * len(finished):
        worst = max(r.metrics.get(M.THROUGHPUT_IQR, 0.0) for r in noisy)
        notes.append(f"{len(noisy)} of {len(finished)} runs are noisy (IQR up to {100 * worst:.0f}%): this host's speed "
                     "changed while they ran, and runs measured one after another rank that change as well as the "
                     "settings. Tell them apart with longer windows and more of them (bench.min_window_s=2 "
                     "bench.max_repeats=12), on a quiet host (nothing else running; bench.shared_host_ok=false); the "
                     "side-by-side confirmation (bench.confirm_s) compares the pick with its rivals in interleaved "
                     "windows, which this drift does not move")
    return notes


def _ceiling_cell(r: RunResult, bound: Optional[CeilingRange]) -> str:
    """The run against its sweep's ceiling for the pipeline; 'off' where it beat the model's bound."""
    rate = r.metrics.get(M.THROUGHPUT)
    if bound is None or not rate:
        return "-"
    return "off" if beyond(r, bound) else _fmt(100 * min(rate / bound.high, 1.0), 0)


def _row(r: RunResult, axes: Sequence[str], base_rate: Optional[float], kinds: Columns,
         pick: Optional[RunResult], bound: Optional[CeilingRange] = None,
         raced: Optional[RaceVerdicts] = None) -> list[str]:
    stepped, ranked, cold, ceiling, others = kinds.stepped, kinds.ranked, kinds.cold, kinds.ceiling, kinds.others
    m = r.metrics
    rate = m.get(M.THROUGHPUT)
    epoch = m.get(M.EPOCH, m.get(M.EPOCH_ESTIMATE))
    epoch_text = _fmt(epoch, 2) + ("" if M.EPOCH in m or epoch is None else "~")
    return [
        *(param_text(r.params.get(a)) for a in axes),
        ("PRUNED" if m.get(M.PRUNED) else r.status) + ("*" if m.get(M.NOISY) else ""),
        f"({m[M.PREDICTED]:,.0f})" if r.status is Status.PREDICTED and M.PREDICTED in m else _fmt(rate, 0),
        *([_fmt(m.get(M.SLOWEST_RANK, rate), 0)] if ranked else []),
        versus(r, pick, raced),
        _fmt(100 * m[M.THROUGHPUT_IQR], 1) if m.get(M.REPEATS, 0) >= 2 else "-",
        _fmt(m.get(M.MEGABYTES), 1),
        *([_fmt(m.get(M.COLD), 0), _fmt(m.get(M.COLD_READ), 1)] if cold else []),
        _fmt(m.get(M.FIRST_BATCH), 3),
        epoch_text,
        f"{_fmt(m.get(M.WAIT_P50), 2)}/{_fmt(m.get(M.WAIT_P95), 2)}",
        f"{rate / base_rate:.2f}x" if rate and base_rate else "-",
        *([_ceiling_cell(r, bound)] if ceiling else []),
        _fmt(100 * m[M.STALL], 0) if M.STALL in m else "-",
        *([str(r.info.bound or "-").replace("-bound", "")] if stepped else []),
        _fmt(m.get(M.H2D_GBPS), 2) if m.get(M.H2D_MEASURED) else "n/m",
        f"({m[M.PSS_FORECAST]:,.0f})" if r.status is Status.PREDICTED and M.PSS_FORECAST in m else _fmt(m.get(M.PSS), 0),
        *([_fmt(m.get(M.OTHERS_CPU), 1)] if others else []),
        *([pace_cell(r, kinds.pace)] if kinds.pace else []),
        {True: "ok", False: "broken", None: "-"}[r.info.delivery_ok],  # not a run status: samples lost or repeated
    ]


def _notes(items: Sequence[tuple[Path, RunResult]], ranked: bool) -> list[str]:
    """What the table's marks mean, and the runs that did not finish."""
    results = [r for _, r in items]
    notes = []
    if any(r.metrics.get(M.PRUNED) for r in results):
        notes.append("PRUNED: a search's trial stopped after its first window, clearly behind the best trial so far "
                     "(bench.stop_below); not a candidate for the recommendation")
    if any(r.metrics.get(M.NOISY) for r in results):
        notes.append("* noisy: throughput IQR/median above the noise threshold across repeats")
    if any(r.metrics.get(M.EPOCH_ESTIMATE) for r in results):
        notes.append("~ epoch time estimated from start-up plus the steady-state rate (bench.budget=epochs measures it)")
    if any(M.COLD in r.metrics for r in results):
        notes.append("cold/s: the first epoch with the dataset's files evicted from the page cache, timed whole; "
                     "cold MB/s: the files read per second in it" + _storage_note(results))
    if any(M.OTHERS_CPU in r.metrics for r in results):
        notes.append("others: cores that processes outside loaderexp used on the host while the run measured (mean)")
    if any(M.CEILING_FRACTION in r.metrics for r in results):
        notes.append("ceil%: throughput against this machine's ceiling for the pipeline (at most; the model's, below)"
                     + ("; off: faster than the model's bound allows, so the model is off there" if any(
                         r.info.model_failure for r in results) else ""))
    if results and not any(r.metrics.get(M.H2D_MEASURED) for r in results):
        notes.append("n/m: " + str(results[0].info.h2d or "host-to-device copy not measured"))
    if any(r.status is Status.PREDICTED for r in results):
        notes.append(prediction_note(results))
        available = [r.metrics[M.AVAILABLE] for r in results if r.finished and r.metrics.get(M.AVAILABLE)]
        notes += forecast_notes(results, min(available) if available else None)
    for folder, r in items:
        if r.status not in (Status.FINISHED, Status.PREDICTED):
            notes.append(f"{folder.name}: {r.status}: {(r.error or '').splitlines()[0] if r.error else ''}")
    if ranked:
        notes.append("slowest: the slowest rank's samples/s (a synchronous step waits for it); samples/s is all "
                     "ranks together")
    notes += _datamodule_note(results)
    return notes


def _datamodule_note(results: Sequence[RunResult]) -> list[str]:
    """dataset=lightning: the DataModule's own settings, and what the sweep measured with them."""
    own = next((r.info.datamodule_baseline for r in results if r.info.datamodule_baseline), None)
    if not own:
        return []
    knobs = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
    text = ", ".join(f"{k}={own.get(k)}" for k in knobs)

    def value(params: dict, prefix: str, key: str) -> object:
        workers = params.get(prefix + "num_workers")
        if key in ("prefetch_factor", "persistent_workers") and not workers:
            return None  # inert without workers: a run's recorded default is not a difference
        found = params.get(prefix + key)
        return 2 if key == "prefetch_factor" and found is None else found  # None is DataLoader's 2 with workers

    def differs(r: RunResult) -> list[str]:
        return [k for k in knobs if f"loader.{k}" in r.params and value(r.params, "loader.", k) != value(own, "", k)]

    apart = [(r, differs(r)) for r in results if r.finished]
    same = [r for r, knobs_apart in apart if not knobs_apart]
    near = [(r, knobs_apart) for r, knobs_apart in apart if "num_workers" not in knobs_apart]
    if same:
        measured = f": {same[0].metrics[M.THROUGHPUT]:,.0f} samples/s measured with them"
    elif near:
        run, knobs_apart = near[0]
        had = ", ".join(f"{k}={value(run.params, 'loader.', k)}" for k in knobs_apart)
        measured = (f": not measured as written; the run at num_workers={own.get('num_workers')} had {had} "
                    f"({run.metrics[M.THROUGHPUT]:,.0f} samples/s)")
    else:
        measured = ": not among the runs (add its num_workers to the sweep to compare)"
    return [f"{own.get('datamodule')}.train_dataloader() as written: {text}, batch_size={own.get('batch_size')}, "
            f"sampler {own.get('sampler')}, collate_fn {own.get('collate_fn')}{measured}"]


def _storage_note(results: Sequence[RunResult]) -> str:
    storage = storage_read(results)
    files = next((r.metrics[M.FILE_MB] for r in results if M.FILE_MB in r.metrics), None)
    if not storage:
        return ""
    available = next((r.metrics[M.AVAILABLE] for r in results if M.AVAILABLE in r.metrics), None)
    fits = f", against {available:,.0f} MB available" if available else ""
    return (f" (the storage reads them cold at {storage:,.0f} MB/s; the files hold "
            f"{files:,.0f} MB{fits})" if files else "")
