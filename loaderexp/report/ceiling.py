"""The report's "why": where a sample's time goes, this machine's limits and its ceiling, the predicted curve
beside the measured one (saying where they disagree), and what-ifs, for each stage profile in a sweep."""

from __future__ import annotations

import json
import re
import statistics
from typing import Any, Optional, Sequence

from loaderexp.model import CeilingModel
from loaderexp.model.limits import CeilingRange
from loaderexp.model.knee import AGREE, misses
from loaderexp.model.whatif import what_ifs
from loaderexp.report.busy import PACE_MOVED, run_pace
from loaderexp.report.params import short_key, varying_params
from loaderexp.result import BACKEND, NUM_WORKERS, RunResult, Status, param_text
from loaderexp.result import metrics as M
from loaderexp.result.ceiling import (RESTART_SHARE, Restart, epoch_samples, model_of, modelled, refit_of,
                                     refit_words, restart)


def by_profile(results: Sequence[RunResult]) -> list[list[RunResult]]:
    """The finished runs grouped by the stage profile they were modelled from (their dataset, transform, batch); a
    backend the model does not cover shares the profile, not the model (backend=spdl read 77% of the ceiling)."""
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        if r.finished and r.profile and not r.metrics.get(M.PRUNED) and modelled(r):
            groups.setdefault(json.dumps(r.profile.to_dict(), sort_keys=True), []).append(r)
    return list(groups.values())


APART = 0.15  # stages that add up to the loop within this are read as they are


def stage_table(runs: Sequence[RunResult], which: str = "") -> list[str]:
    """``which``: the settings the runs of this profile share, where a sweep has several profiles."""
    profile = runs[0].profile
    total = profile.cpu_s or 1e-12
    lines = [f"Where the time goes ({which + '; ' if which else ''}{profile.split}; {profile.samples:,} samples, one "
             "process, one thread):",
             f"  {'stage':<24} {'CPU ms/sample':>13} {'wall ms/sample':>14} {'% of CPU':>8}"]
    for stage in profile.stages:
        lines.append(f"  {stage.name:<24} {1000 * stage.cpu_s:>13.4f} {1000 * stage.wall_s:>14.4f} "
                     f"{100 * stage.cpu_s / total:>7.1f}%")
    lines.append(f"  {'sum of the stages':<24} {1000 * profile.cpu_s:>13.4f} {1000 * profile.wall_s:>14.4f}")
    # With a stage that wrote fresh memory the sum is a range too (heap_range.py); the loop is held against the
    # nearer end
    ends = [sum(s.low_cpu_s for s in profile.stages), sum(s.high_cpu_s for s in profile.stages)]
    loop = profile.single_cpu_s or 1e-12
    gap = min(max(loop, ends[0]), ends[1]) / loop - 1 if profile.single_cpu_s else 0.0
    shares = "-".join(dict.fromkeys(f"{100 * end / loop:.0f}" for end in ends)) + "%"
    batch = profile.single_batch
    at = f" at batches of {batch}" if batch else ""
    if batch and batch < profile.batch_size:  # a run's large batch comes fresh from the system, a small one need not
        at += f" (the run's {profile.batch_size} take too long to time: the fresh memory a batch maps may be missed)"
    lines.append(f"  a DataLoader(num_workers=0) loop{at}: {1000 * profile.single_cpu_s:.4f} ms CPU per sample (the "
                 f"stages add up to {shares} of it)")
    if abs(gap) > APART:  # an op the pass met at another moment of the host than the loop (docs/ceiling.md)
        lines.append(f"  the stages and the loop part by {100 * abs(gap):.0f}%: a stage's cost may be that far off, "
                     "and a what-if that takes one away with it")
    lines.extend(_pace_line(profile.reference_ms, runs))
    lines.extend(_fresh_memory(profile.stages))
    lines.append(f"  in a worker: {1000 * profile.worker_cpu_s:.4f} ms CPU, {1000 * profile.worker_wall_s:.4f} ms wall per "
                 f"sample ({profile.worker_basis}); the main process receives a batch in "
                 f"{1000 * profile.main_cpu_s_per_batch:.3f} ms CPU")
    return lines


def _pace_line(profiled: Optional[float], runs: Sequence[RunResult]) -> list[str]:
    """Whether the pass met the host at the runs' pace (a fixed piece of CPU work timed around each)."""
    paces = [p for p in (run_pace(r) for r in runs) if p is not None]
    if not profiled or not paces:
        return []
    around = statistics.median(paces)
    ratio = profiled / around
    if abs(ratio - 1) <= PACE_MOVED:
        return []
    return [f"  the pass met the host at another pace than the runs: a fixed piece of CPU work took {profiled:.2f} ms "
            f"of CPU around it, {around:.2f} around the runs (median; x{ratio:.2f}): its costs, and the limits and "
            f"what-ifs made from them, may read that much {'high' if ratio > 1 else 'low'}"]


def _fresh_memory(stages: Sequence[Any]) -> list[str]:
    """A profile's stages whose cost is partly the kernel handing over fresh memory: a range, the allocator's."""
    fresh = [s for s in stages if s.settled_cpu_s is not None]
    if not fresh:
        return []
    names, faults = _and([s.name for s in fresh]), _and([f"{s.faults:,.0f}" for s in fresh])
    ranges = _and([f"{1000 * s.low_cpu_s:.4f}-{1000 * s.high_cpu_s:.4f}" for s in fresh])
    return [f"  {names} write{'s' if len(fresh) == 1 else ''} fresh memory ({faults} page faults a sample in the "
            f"pass): {ranges} ms CPU a sample, the lower on a heap that keeps a batch's memory for the next batch, "
            "the higher where every large block comes fresh from the kernel; the pass met the figures above, and "
            "a worker may meet any between (docs/ceiling.md)"]


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def seen_rates(runs: Sequence[RunResult]) -> dict[str, float]:
    """What the sweep's runs reached: the ceiling is never below them."""
    return {f"num_workers={r.params.get(NUM_WORKERS) or 0}": r.metrics[M.THROUGHPUT] for r in runs
            if r.finished and r.metrics.get(M.THROUGHPUT)}


def sweep_ceilings(results: Sequence[RunResult]) -> list[tuple[list[RunResult], CeilingRange]]:
    """Each stage profile's runs with their ceiling as the sweep shows it: every run on the profile seen, and the
    least CPU per sample they used."""
    found = []
    for runs in by_profile(results):
        model = model_of(max(runs, key=lambda r: r.metrics[M.THROUGHPUT]), runs)
        if model is not None:
            found.append((runs, model.ceiling_range(seen_rates(runs))))
    return found


def ceiling_for(run: RunResult, ceilings: Sequence[tuple[list[RunResult], CeilingRange]]) -> Optional[CeilingRange]:
    return next((bound for runs, bound in ceilings if any(r is run for r in runs)), None)


def beyond(run: RunResult, bound: CeilingRange) -> bool:
    """The run went faster than the model's bound allows (its uncertainty included): the model is off there."""
    return bound.failed and run.metrics[M.THROUGHPUT] > bound.bound


def limit_lines(model: CeilingModel, runs: Sequence[RunResult] = (), others: Sequence[RunResult] = ()) -> list[str]:
    """``others``: the runs on the same pipeline through a backend the model does not describe."""
    bound = model.ceiling_range(seen_rates(runs))
    ceiling = bound.limit
    lines = ["This machine's limits (samples/s, each an upper bound from the costs):"]
    for limit in [*model.limits(), model.one_process()]:
        rate = f"{limit.rate:>12,.0f}" if limit.rate else f"{'-':>12}"
        mark = "  <- binds" if limit == ceiling else ""  # limits() makes new ones each call
        lines.append(f"  {limit.name:<13}{rate}  {limit.how}{'' if limit.applies else ' (does not apply)'}{mark}")
    lines.append(f"  The ceiling: {bound.text()}; {ceiling.name} binds: {ceiling.lift}.")
    if bound.failed:
        lines.append(f"  {'Past the bound' if bound.stream_past else 'The model is off'}: {bound.failure}.")
    return lines + _other_backends_lines(others, bound)


def curve_lines(runs: Sequence[RunResult], refit: Optional[dict[str, float]] = None) -> list[str]:
    """Predicted against measured, per run; the disagreements said; with ``refit`` (bench.predict's, as
    :func:`loaderexp.result.ceiling.refit_of` reads it), the refitted model's row too."""
    rows, off, ordered = [], [], []
    # runs of one worker count that differ in another knob (sampler=random,sequential) say which is which
    others = [k for k in varying_params(runs) if k != NUM_WORKERS]
    restarts = _restart_shares(runs)
    for r in sorted(runs, key=lambda r: (r.params.get(NUM_WORKERS) or 0)):
        model = model_of(r)
        if model is None:
            continue
        workers, rate = r.params.get(NUM_WORKERS) or 0, r.metrics[M.THROUGHPUT]
        predicted = model.predict(workers)
        if restarts:  # the steady stream's epoch with the start-up this run measured added
            predicted = 1.0 / (1.0 / predicted + restart(r).seconds / max(epoch_samples(r) * r.ranks, 1))
        rows.append((workers, rate, predicted))
        ordered.append(r)
        spread = r.metrics.get(M.THROUGHPUT_IQR, 0.0)
        if misses(predicted, rate, spread):
            named = ", ".join([f"num_workers={workers}", *(f"{short_key(k)}={param_text(r.params.get(k))}"
                                                            for k in others)])
            off.append(f"{named} (measured {rate:,.0f} +-{50 * spread:.0f}%, predicted {predicted:,.0f}, "
                       f"{100 * (predicted / rate - 1):+.0f}%)")
    if not rows:
        return []
    model = model_of(runs[0])
    at = (f", the CPU limit taken at what {model.profile.cores:g} workers did together: x{model.efficiency:.2f} of "
          "their costs" if model is not None and model.efficiency < 1 else "")
    labels = [(short_key(k), [param_text(r.params.get(k)) for r in ordered]) for k in others]
    width = max([8, *(len(text) for _, texts in labels for text in texts)])
    restarted = ("; each epoch's start-up as the run measured it added to the steady stream the model predicts"
                 if restarts else "")
    lines = [f"Predicted against measured (samples/s; the prediction is the model's, from the stage costs{at}"
             f"{restarted}):",
             "  " + "  ".join(f"{w:>{width}}" for w, _, _ in rows) + "  num_workers",
             *("  " + "  ".join(f"{t:>{width}}" for t in texts) + f"  {name}" for name, texts in labels),
             "  " + "  ".join(f"{m:>{width},.0f}" for _, m, _ in rows) + "  measured",
             "  " + "  ".join(f"{p:>{width},.0f}" for _, _, p in rows) + "  predicted"]
    if refit and model is not None:
        again = model.with_machine(**refit)
        lines.append("  " + "  ".join(f"{again.predict(w):>{width},.0f}" for w, _, _ in rows)
                     + f"  refitted (bench.predict: {refit_words(**refit)})")
    lines += _restart_lines(restarts)
    if off:
        lines.append(f"  The model and the measurements disagree by more than {100 * AGREE:.0f}% beyond half the "
                     "windows' spread (their IQR) at "
                     + "; ".join(off) + ": read the prediction there with care.")
    return lines


def _restart_shares(runs: Sequence[RunResult]) -> list[tuple[Restart, RunResult]]:
    """The runs whose epochs start their workers again at a cost the model's steady stream leaves out (short
    epochs: dataset=hf's 40 batches an epoch ran 2 workers at 11,994 samples/s against a steady 20,387), the
    largest share first."""
    found = [(restart(r), r) for r in runs]
    return sorted([(each, r) for each, r in found if each.share >= RESTART_SHARE], key=lambda item: -item[0].share)


def _restart_lines(restarts: Sequence[tuple[Restart, RunResult]]) -> list[str]:
    if not restarts:
        return []
    most, run = restarts[0]
    return [f"  Each epoch starts its workers again, as training does: num_workers={run.params.get(NUM_WORKERS)} "
            f"paid {1000 * most.seconds:.0f} ms an epoch past a steady batch, {100 * most.share:.0f}% of its epoch of "
            f"{epoch_samples(run):,} samples; loader.persistent_workers=true keeps them from epoch to epoch."]


def what_if_lines(model: CeilingModel, workers: int, values: list[int], measured: Optional[float] = None) -> list[str]:
    source = f", from the {measured:,.0f} samples/s it measured" if measured else ", the model's figures"
    lines = [f"What if (at num_workers={workers}{source}; each says how it was had and how far it may be off):"]
    for change in what_ifs(model, workers, values, measured):
        lines.append(f"  {change.change}: ceiling {change.ceiling_before:,.0f} -> {change.ceiling_after:,.0f} "
                     f"({100 * change.ceiling_gain:+.0f}%, {change.binding_after} binds); "
                     f"{change.at_workers_before:,.0f} -> {change.at_workers_after:,.0f} samples/s "
                     f"(+-{100 * change.uncertainty:.0f}%; {change.how})")
    return lines


def ceiling_sections(results: Sequence[RunResult], pick: Optional[RunResult] = None) -> list[str]:
    """The report's "why" block: one per stage profile."""
    sections, groups = [], by_profile(results)
    if not groups:  # said, not left out: an iterable dataset's sweep ended with its table and no word of the "why"
        reasons = sorted({r.info.ceiling for r in results if r.finished and r.info.ceiling})
        return [f"Why it is this fast: {reason}" for reason in reasons]
    axes = [k for k in varying_params([r for runs in groups for r in runs]) if k != NUM_WORKERS]
    for runs in groups:
        here = pick if pick is not None and pick in runs else max(runs, key=lambda r: r.metrics[M.THROUGHPUT])
        model = model_of(here, runs)
        inside = varying_params(runs)
        others = _other_backends(runs, results)
        # the sweep's other backends share the profile, not the model: the section says whose runs it is about
        which = ", ".join([*([f"{short_key(BACKEND)}={param_text(here.params.get(BACKEND))}"] if others else []),
                           *(f"{short_key(k)}={param_text(here.params.get(k))}" for k in axes
                             if k not in inside and len(groups) > 1)])
        lines = stage_table(runs, which)
        if model is not None:
            values = sorted({r.params.get(NUM_WORKERS) or 0 for r in runs})
            refit = next((found for r in results if r.status is Status.PREDICTED and r.profile == here.profile
                          and (found := refit_of(r))), None)
            lines += limit_lines(model, runs, others) + curve_lines(runs, refit)
            measured = here.metrics.get(M.THROUGHPUT) if here.finished else None
            lines += what_if_lines(model, here.params.get(NUM_WORKERS) or 0, values, measured)
        else:
            lines.append(f"  ({here.info.ceiling or 'not modelled'})")
        sections.append("\n".join(lines))
    return sections


def _other_backends(runs: Sequence[RunResult], results: Sequence[RunResult]) -> list[RunResult]:
    """The finished runs on this profile's pipeline through a backend the model does not describe."""
    profile = runs[0].profile
    return [r for r in results if r.finished and r.profile == profile and not modelled(r)
            and not r.metrics.get(M.PRUNED)]


def _other_backends_lines(others: Sequence[RunResult], bound: CeilingRange) -> list[str]:
    """The limits are DataLoader's: another backend's threads or nodes pay other costs, and may pass them."""
    if not others:
        return []
    key, names = short_key(BACKEND), list(dict.fromkeys(param_text(r.params.get(BACKEND)) for r in others))
    fastest = max(others, key=lambda r: r.metrics[M.THROUGHPUT])
    rate = fastest.metrics[M.THROUGHPUT]
    past = (f"; {key}={param_text(fastest.params.get(BACKEND))}, num_workers={fastest.params.get(NUM_WORKERS) or 0} "
            f"did {rate:,.0f} samples/s, {100 * (rate / bound.high - 1):.0f}% past them" if rate > bound.high else "")
    return [f"  These limits are DataLoader's (worker processes that pass each batch to the main process); "
            f"{key}={', '.join(names)} {'is' if len(names) == 1 else 'are'} not modelled: "
            f"{'its' if len(names) == 1 else 'their'} threads or processes pay other costs, and "
            f"{'its' if len(names) == 1 else 'their'} runs are not held to these limits{past}."]


def stage_metrics(results: Sequence[RunResult]) -> dict[str, float]:
    """Each stage's CPU per sample and share, as the sweep's parent run logs them (a suffix per profile when
    the sweep has several)."""
    groups, found = by_profile(results), {}
    for index, runs in enumerate(groups):
        profile = runs[0].profile
        suffix = f".{index}" if len(groups) > 1 else ""
        total = profile.cpu_s or 1e-12
        for stage in profile.stages:
            name = re.sub(r"[^A-Za-z0-9_.\- /]", "_", stage.name)
            found[f"{M.STAGE_CPU}.{name}{suffix}"] = round(1000 * stage.cpu_s, 5)
            found[f"{M.STAGE_SHARE}.{name}{suffix}"] = round(stage.cpu_s / total, 4)
            if stage.settled_cpu_s is not None and stage.fresh_cpu_s is not None:
                found[f"{M.STAGE_CPU_SETTLED}.{name}{suffix}"] = round(1000 * stage.settled_cpu_s, 5)
                found[f"{M.STAGE_CPU_FRESH}.{name}{suffix}"] = round(1000 * stage.fresh_cpu_s, 5)
    return found
