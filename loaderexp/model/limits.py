"""What the ceiling model answers with: a limit of the machine (samples/s, how it is made, what would lift it) and
the ceiling as a range, at least what was seen and at most the binding limit with its uncertainty."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


def cores_word(cores: float) -> str:
    return "core" if cores == 1 else "cores"


@dataclass(frozen=True)
class Limit:
    name: str  # "CPU", "main process", "storage", "device copy", "step"
    rate: Optional[float]  # samples/s; None: not measured here
    how: str  # how it is made, with its numbers
    lift: str  # what would lift it
    applies: bool = True  # storage while the files stay in the page cache does not


@dataclass(frozen=True)
class CeilingRange:
    """What this machine can do for the pipeline: at least ``low`` (seen), at most ``high`` (the costs' bound)."""

    low: float
    high: float
    limit: Limit  # what binds, with its evidence (``how``)
    seen: str  # what the low end is: the run or loop that reached it
    uncertainty: float  # the high end's relative uncertainty (included in ``high``)
    failure: Optional[str] = None  # what beat the model's bound, and which (the model is off; ``high`` is then that)
    stream_past: bool = False  # ... a stream of the profile's, past a bound on runs that restart their workers

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def bound(self) -> float:
        """The model's bound: the binding limit with its uncertainty (``high`` unless something beat it)."""
        return self.limit.rate * (1 + self.uncertainty)

    def text(self) -> str:
        if self.failed:
            past = "above the runs' bound, which holds their workers' restarts" if self.stream_past else \
                "above the model's bound, which is off"
            return f"at least {self.low:,.0f} samples/s (seen: {self.seen}; {past})"
        if self.high <= self.low * 1.005:
            return f"{self.low:,.0f} samples/s ({self.seen})"
        return (f"{self.low:,.0f} to {self.high:,.0f} samples/s (at least what {self.seen} did; at most the "
                f"{self.limit.name} limit, +-{100 * self.uncertainty:.0f}%)")


def over_bound(where: str, rate: float, limit: Limit, high: float, restarts: float = 0.0) -> Optional[str]:
    """Why ``rate`` (what ``where`` did) means the model is off, or None when it is within the bound; ``restarts``:
    the share of an epoch the runs' workers took to start again, where ``where`` is a stream that does not."""
    if rate <= high:
        return None
    if restarts:
        return (f"{where} did {rate:,.0f} samples/s, above the bound {high:,.0f} ({limit.name}: {limit.how}, "
                f"+-{100 * (high / limit.rate - 1):.0f}%): a stream, where the runs' CPU a sample holds their workers' "
                f"start each epoch ({100 * restarts:.0f}% of one): with loader.persistent_workers=true loading may "
                "pass it; the ceiling is taken as at least the stream's rate")
    return (f"{where} did {rate:,.0f} samples/s, above the model's bound {high:,.0f} ({limit.name}: {limit.how}, "
            f"+-{100 * (high / limit.rate - 1):.0f}%): the costs the bound rests on were read at a slower moment "
            "of the host than this, or undercount what the loop really does; the ceiling is taken as at least "
            "the measured rate")
