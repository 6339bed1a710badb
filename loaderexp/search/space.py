"""The search space, in the override syntax Hydra's sweepers use, read into typed dimensions.

    loader.num_workers=int(0,32)          integers 0..32, both ends included (ordered: a model can use it)
    loader.num_workers=range(0,12)        integers 0..11 (range's end is excluded, as in Python)
    loader.num_workers=int(interval(0,32))  the same as int(0,32)
    loader.batch_size=choice(64,128,256)  one of these (also: 64,128,256)
    loader.pin_memory=true,false
    dataset=cifar10                       a fixed override, the same in every trial

Hydra's own parser reads ``int(0,32)`` as the two values 0 and 32 cast to int; a search means the
range, so that form is read here first.  No Optuna import: the sweep callback counts and names a
search's trials from this module alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

from loaderexp.config import composed_spec
from loaderexp.config.validation import NEEDS_WORKERS
from loaderexp.result import NUM_WORKERS, param_text

INT_RANGE = re.compile(r"^(?P<key>[^=]+)=int\(\s*(?P<low>-?\d+)\s*,\s*(?P<high>-?\d+)\s*\)$")


class SpaceError(ValueError):
    """A search space that cannot be searched; the message names the key and what is wrong."""


@dataclass(frozen=True)
class IntDimension:
    low: int
    high: int  # included
    step: int = 1

    @property
    def values(self) -> list[int]:
        return list(range(self.low, self.high + 1, self.step))


@dataclass(frozen=True)
class FloatDimension:
    low: float
    high: float
    log: bool = False


@dataclass(frozen=True)
class ChoiceDimension:
    choices: tuple[Any, ...]

    @property
    def values(self) -> list[Any]:
        return list(self.choices)


Dimension = Union[IntDimension, FloatDimension, ChoiceDimension]


@dataclass
class Space:
    dimensions: dict[str, Dimension]  # searched: key -> its values
    fixed: list[str]  # overrides every trial carries

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.dimensions)

    def overrides(self, values: dict[str, Any]) -> list[str]:
        """One trial's overrides: the fixed ones, then ``key=value`` as Hydra's grammar writes it."""
        return self.fixed + [f"{key}={param_text(value)}" for key, value in values.items()]

    def size(self) -> Optional[int]:
        """Points in the space, when it is discrete."""
        total = 1
        for dimension in self.dimensions.values():
            if isinstance(dimension, FloatDimension):
                return None
            total *= len(dimension.values)
        return total


def parse_space(arguments: Sequence[str]) -> Space:
    """Dimensions and fixed overrides from ``hydra.sweeper.params`` and the command line."""
    dimensions: dict[str, Dimension] = {}
    fixed: list[str] = []
    for argument in arguments:
        key, dimension = _dimension(argument)
        if dimension is None:
            fixed.append(argument)
        else:
            dimensions[key] = dimension
    return Space(dimensions, fixed)


def _dimension(argument: str) -> tuple[str, Optional[Dimension]]:
    matched = INT_RANGE.match(argument.strip())
    if matched:
        key, low, high = matched.group("key", "low", "high")
        return key, _int_dimension(key, int(low), int(high))
    override = OverridesParser.create().parse_overrides([argument])[0]
    key = override.get_key_element()
    if not override.is_sweep_override():
        return key, None
    value = override.value()
    if isinstance(value, RangeSweep):
        if value.shuffle or any(isinstance(v, float) for v in (value.start, value.stop, value.step)):
            return key, ChoiceDimension(tuple(override.sweep_string_iterator()))
        written = f"range({value.start},{value.stop})"
        return key, _int_dimension(key, int(value.start), int(value.stop) - 1, int(value.step or 1), written)
    if isinstance(value, IntervalSweep):
        if isinstance(value.start, int) and isinstance(value.end, int):
            return key, _int_dimension(key, value.start, value.end)
        if value.start >= value.end:
            raise SpaceError(f"{key}={override.get_value_element_as_str()}: an empty interval")
        return key, FloatDimension(float(value.start), float(value.end), log="log" in value.tags)
    if isinstance(value, ChoiceSweep):
        choices = tuple(dict.fromkeys(_plain(v) for v in value.list))
        if not choices:
            raise SpaceError(f"{key}: an empty choice")
        return key, ChoiceDimension(choices)
    raise SpaceError(f"{argument}: not a search dimension; use int(a,b), range(a,b), choice(...) or a comma list")


def _int_dimension(key: str, low: int, high: int, step: int = 1, written: str = "") -> IntDimension:
    if high < low:
        raise SpaceError(f"{key}={written or f'int({low},{high})'}: an empty range (its end is before its start)")
    return IntDimension(low, high, step)


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def check_keys(space: Space, config: Any) -> None:
    """Every searched key must be a setting of the composed config (``config``: a DictConfig)."""
    from omegaconf import OmegaConf

    for key in space.dimensions:
        if key.startswith(("+", "~")) or OmegaConf.select(config, key, default=_MISSING) is not _MISSING:
            continue
        group = key.rsplit(".", 1)[0] if "." in key else ""
        node = OmegaConf.select(config, group) if group else config
        valid = ", ".join(f"{group}.{k}" if group else str(k) for k in node) if hasattr(node, "keys") else ""
        raise SpaceError(f"{key}: no such setting" + (f"; valid keys: {valid}" if valid else ""))


_MISSING = object()
WORKERS = NUM_WORKERS
WORKER_ONLY = tuple(f"loader.{knob}" for knob in NEEDS_WORKERS)


def checked_space(arguments: Sequence[str], config: Any) -> Space:
    """The space, refused with one line when it cannot be searched: nothing in it, a key that is not
    a setting, an empty range, or a workers-only knob where num_workers can only be 0."""

    space = parse_space(arguments)
    check_keys(space, config)
    if not space.dimensions:
        raise SpaceError("nothing to search: give a dimension, e.g. 'loader.num_workers=int(0,16)'")
    workers = space.dimensions.get(WORKERS)
    fixed_zero = workers is None and composed_spec(config).loader.num_workers == 0 and \
        not any(f.startswith(f"{WORKERS}=") and not f.endswith("=0") for f in space.fixed)
    only_zero = fixed_zero or any(f == f"{WORKERS}=0" for f in space.fixed) or \
        (isinstance(workers, (IntDimension, ChoiceDimension)) and set(workers.values) == {0})
    for key in WORKER_ONLY:
        if key in space.dimensions and only_zero:
            raise SpaceError(f"{key} is searched but {WORKERS} can only be 0: without workers it does nothing "
                             f"(DataLoader refuses it); search {WORKERS} too, e.g. 'int(1,16)'")
    return space
