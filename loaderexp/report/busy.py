"""Whether the host was shared while the sweep measured: the other processes' CPU beside the figures.

Under contention more workers can genuinely win (they take a larger share of the CPU from the other
processes): that is a true figure of the shared moment, not of the machine the user will train on,
so the report says which one the user is looking at, and when runs met very different loads."""

from __future__ import annotations

from typing import Optional, Sequence

from loaderexp.model.limits import cores_word
from loaderexp.result import RunResult
from loaderexp.result import metrics as M

BUSY_CORES = 0.25  # others using this much (or BUSY_SHARE of the usable cores) make the host busy
BUSY_SHARE = 0.10
UNEVEN_SHARE = 0.25  # runs whose others' load differs by this share of the cores met different hosts


def others_of(run: RunResult) -> Optional[float]:
    return run.metrics.get(M.OTHERS_CPU)


def busy_notes(results: Sequence[RunResult]) -> list[str]:
    """One line when others used more than a small share of the host, one more when the runs met
    loads too different to rank them as if on one host."""
    measured = [(r, others_of(r)) for r in results if r.finished and others_of(r) is not None]
    if not measured:
        return []
    cores = max((r.host.cpus_usable or 0 for r, _ in measured), default=0) or 1
    loads = [load for _, load in measured]
    mean = sum(loads) / len(loads)
    notes = []
    if mean >= max(BUSY_CORES, BUSY_SHARE * cores):
        notes.append(f"the host was busy: other processes used {mean:.1f} of {cores:g} cores (mean over the runs, "
                     f"up to {max(r.metrics.get(M.OTHERS_CPU_MAX, 0.0) for r, _ in measured):.1f}) while this sweep "
                     "measured; the figures describe this shared moment, not the machine alone (more workers can win "
                     "here by taking CPU from the others). For the machine's own answer measure on a quiet host; "
                     "else read them as a shared-host answer")
    if max(loads) - min(loads) >= UNEVEN_SHARE * cores:
        notes.append(f"the runs met different loads (others {min(loads):.1f} to {max(loads):.1f} cores, column "
                     "others): a gap between runs measured under different loads may be the host's, not the "
                     "settings'")
    return notes


THROTTLED_S = 0.05  # a run the quota held back for less than this met its edge, not its limit


def quota_notes(results: Sequence[RunResult]) -> list[str]:
    """One line when the sweep ran inside a CPU quota below the machine's CPUs (a container's ``--cpus=1``): its
    figures are that quota's, and the runs it held back (throttled) say how hard it bound."""
    finished = [r for r in results if r.finished]
    quotas = {r.host.cpu_quota_cores for r in finished if r.host.cpu_quota_cores is not None
              and r.host.cpu_quota_cores < (r.host.cpu_count or float("inf"))}
    if not quotas:
        return []
    machine = max(r.host.cpu_count or 0 for r in finished)
    held = sorted((r.metrics[M.THROTTLED], r.workers) for r in finished if r.metrics.get(M.THROTTLED, 0.0) >= THROTTLED_S)
    quota = " to ".join(f"{q:g}" for q in sorted(quotas)[::max(len(quotas) - 1, 1)])
    return [f"the sweep ran inside a CPU quota of {quota} {cores_word(max(quotas))} on a machine of {machine} CPUs "
            "(a cgroup's cpu.max or cpu.cfs_quota_us, a container's --cpus): the figures, the ceiling and the pick are "
            "the quota's" + (f"; it held back {len(held)} of {len(finished)} runs, up to {held[-1][0]:.1f} s "
                             f"(num_workers={held[-1][1]}; metric cpu_throttled_s)" if held else "")
            + ". A training job with another quota, or none, needs its own sweep"]


PACE_MOVED = 0.15  # runs whose paces lie further apart than this (slowest over quickest, less 1): the pace moved


def pace_readings(run: RunResult) -> list[float]:
    """The fixed piece of work's CPU ms before the run's loader started and after its workers ended."""
    return [v for v in (run.metrics.get(M.PACE_BEFORE), run.metrics.get(M.PACE_AFTER)) if v]


def run_pace(run: RunResult) -> Optional[float]:
    """The run's pace: the quicker of its two readings, one on each side of its windows.  A reading is 7 parts'
    median, so a change that lasts moves it, and the host here has slowed the work x1.3 for a few seconds at a
    time: one slow reading may be an episode that ended before the windows began, two say the windows met it.
    So a run's pace is what its windows met at best: never more slowing than the readings show."""
    readings = pace_readings(run)
    return min(readings) if readings else None


def _paces(results: Sequence[RunResult]) -> list[float]:
    return [p for p in (run_pace(r) for r in results if r.finished) if p is not None]


def _moved(paces: list[float]) -> bool:
    return len(paces) >= 2 and max(paces) / min(paces) - 1 > PACE_MOVED


def moved_from(results: Sequence[RunResult]) -> Optional[float]:
    """Where the runs' paces moved, the quickest (the one the others are held against); else None."""
    paces = _paces(results)
    return min(paces) if _moved(paces) else None


def pace_cell(run: RunResult, quickest: Optional[float]) -> str:
    """The run's pace over the sweep's quickest: 1.00x ran at the sweep's best pace."""
    pace = run_pace(run)
    return f"{pace / quickest:.2f}x" if pace and quickest else "-"


def pace_notes(results: Sequence[RunResult]) -> list[str]:
    """One line when the host ran the same fixed work at different paces around the runs: sharing that its own
    counters (the others' CPU, steal, throttling) do not show."""
    finished = [r for r in results if r.finished]
    paces = _paces(finished)
    if not _moved(paces):
        return []
    others = [load for load in (others_of(r) for r in finished) if load is not None]
    steal = [r.metrics[M.STEAL] for r in finished if M.STEAL in r.metrics]
    seen = (f" while the others' CPU read {max(others):.2f} cores at most" if others else "") + \
        (f" and steal {max(steal):.2f}" if steal else "")
    return [f"the host's pace moved while this sweep measured: a fixed piece of CPU work took {min(paces):.2f} to "
            f"{max(paces):.2f} ms of its thread's CPU around the runs (x{max(paces) / min(paces):.2f}; a run's "
            f"pace is the quicker of its readings before and after it; column pace: each against the quickest)"
            f"{seen}: sharing that the host's own counters do not show (a neighbour below the VM, a hypervisor "
            "taking the CPU unreported, a moving clock). A run the host slowed reads slow for the host's sake, "
            "not its settings' (how much of its pipeline the slowing touched, the reading cannot say): the "
            "side-by-side race (bench.confirm_s) compares settings at one moment; or measure again at a steadier one"]
