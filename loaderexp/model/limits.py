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

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def bound(self) -> float:
        """The model's bound: the binding limit with its uncertainty (``high`` unless something beat it)."""
        return self.limit.rate * (1 + self.uncertainty)

    def text(self) -> str:
        if self.failed:
            return f"at least {self.low:,.0f} samples/s (seen: {self.seen}; above the model's bound, which is off)"
        if self.high <= self.low * 1.005:
            return f"{self.low:,.0f} samples/s ({self.seen})"
        return (f"{self.low:,.0f} to {self.high:,.0f} samples/s (at least what {self.seen} did; at most the "
                f"{self.limit.name} limit, +-{100 * self.uncertainty:.0f}%)")


def over_bound(where: str, rate: float, limit: Limit, high: float) -> Optional[str]:
    """Why ``rate`` (what ``where`` did) means the model is off, or None when it is within the bound."""
    if rate <= high:
        return None
    return (f"{where} did {rate:,.0f} samples/s, above the model's bound {high:,.0f} ({limit.name}: {limit.how}, "
            f"+-{100 * (high / limit.rate - 1):.0f}%): the costs the bound rests on were read at a slower moment "
            "of the host than this, or undercount what the loop really does; the ceiling is taken as at least "
            "the measured rate")
