"""Checks of what a config names by dotted path: each ``_target_`` imports and takes its arguments.

They import what they check (torch, torchvision, the user's module), so the runner leaves them to
the measuring process, where those are loaded anyway.  Nothing is built or called.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from loaderexp.config.schema import Config, StepConfig, TargetNode

CALLABLE_KNOBS = ("collate_fn", "worker_init_fn")


def imported(key: str, path: str, problems: list[str], hint: str = "") -> Any:
    """What a dotted path names, or None with the problem (the key, the path, why) recorded."""
    try:
        from hydra.utils import get_method

        return get_method(path)
    except Exception as error:  # ImportError, AttributeError, ValueError from Hydra
        problems.append(f"{key}={path}: cannot be imported ({_why(error)}){hint}")
        return None


def _why(error: Exception) -> str:
    """Hydra's reason on one line: its first line ends at a colon ("Error loading 'mypackage.data.MyDataset':")
    and the cause and its question follow on the next two."""
    cause = error.__cause__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    why = f"{type(cause).__name__}: {cause}" if cause is not None else lines[0] if lines else type(error).__name__
    asked = next((line for line in lines[1:] if line.startswith("Are you sure")), "")
    return why + (f"; {asked[0].lower()}{asked[1:]}" if asked else "")


def target_problems(spec: Config) -> list[str]:
    problems: list[str] = []
    for key in CALLABLE_KNOBS:
        path = getattr(spec.loader, key)
        if path is not None:
            imported(f"loader.{key}", path, problems, "; give a dotted path to a function, e.g. mypackage.data.collate")
    for group in ("dataset", "sampler", "transform"):
        _check_target(group, getattr(spec, group), problems)
    _check_step_target(spec.step, problems)
    return problems


def _check_step_target(step: StepConfig, problems: list[str]) -> None:
    if step._target_ is None:
        if step.kind.value != "none":
            problems.append(f"step._target_ is missing: step={step.kind.value} names your step's factory, "
                            "e.g. custom_step.make_step (examples/custom_step.py)")
        return
    factory = imported("step._target_", step._target_, problems,
                       "; give a dotted path to a factory(device, **step.kwargs) -> callable(batch)")
    check = getattr(factory, "config_problems", None)  # a step that knows which of its knobs are valid
    if check is not None:
        problems += check(**step_knobs(factory, step))


def step_knobs(factory: Callable, step: StepConfig) -> dict[str, Any]:
    """What a step's factory is called with besides the device: the step's own knobs its signature
    names (``size`` for matmul, ``model`` for a model), then ``step.kwargs``."""
    try:
        names = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        names = {}
    own = {"ms", "size", "repeat", "model", "num_classes", "lr"}
    return {**{name: getattr(step, name) for name in names if name in own}, **step.kwargs}


def _check_target(group: str, node: TargetNode, problems: list[str]) -> None:
    """The ``_target_`` must import and accept the node's arguments (bound, not called)."""
    if node.target is None:
        if group == "dataset":
            problems.append("dataset._target_ is missing: a dataset node names its class or factory")
        return
    factory = imported(f"{group}._target_", node.target, problems)
    if factory is None:
        return
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # builtins without a signature: nothing to check
    kwargs = node.keyword_arguments
    params = signature.parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            valid = ", ".join(name for name in params if name not in ("self", "transform", "data_source")) or "none"
            problems.append(f"{group}: {node.target} takes no argument {', '.join(unknown)}; valid: {valid} (leave "
                            f"one out with {' '.join(f'~{group}.{name}' for name in unknown)})")
            return
    placeholders = [object()] if node.partial else []  # a sampler gets its dataset later
    try:
        signature.bind_partial(*placeholders, **kwargs)
    except TypeError as error:
        problems.append(f"{group}: {node.target}: {error}")
