"""Whether the host was shared while the sweep measured: the other processes' CPU beside the figures.

Under contention more workers can genuinely win (they take a larger share of the CPU from the other
processes): that is a true figure of the shared moment, not of the machine the user will train on,
so the report says which one the user is looking at, and when runs met very different loads."""

from __future__ import annotations

from typing import Optional, Sequence

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
