"""The loading stacks there are (a module of this package each, declaring ``STACK``, and a file in
conf/backend/), and what a spec's backend and loader settings must satisfy for the stack it names:
checked with the rest of the spec (:func:`checked`), before any job starts."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import Any, Optional

from loaderexp.config import config_dir, validate
from loaderexp.config.schema import Config, LoaderConfig, backend_schema
from loaderexp.config.validation import DEFAULT_LOADER, show


def checked(spec: Config, cuda_available: bool, cpus: float, targets: bool = True,
            gpus: Optional[int] = None) -> list[str]:
    """:func:`loaderexp.config.validate` with the loading stack's checks: one ConfigError lists every
    problem; the warnings of a legal spec are returned."""
    return validate(spec, cuda_available, cpus, targets=targets, gpus=gpus, more=backend_problems(spec))


def stack_names() -> list[str]:
    """The loading stacks there are: one file each in conf/backend/."""
    return sorted(path.stem for path in (config_dir() / "backend").glob("*.yaml"))


def loading_stack(name: str) -> Any:
    """The class a loading stack's module declares (``STACK``), or None when there is no such stack.
    Its module imports nothing heavy: the knobs it declares are read here, before any job."""
    module_name = f"{__package__}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            return None
        raise
    return getattr(module, "STACK", None)


def backend_problems(spec: Config) -> list[str]:
    """What the spec's backend settings ask of its loading stack that the stack does not have."""
    problems: list[str] = []
    backend, loader = spec.backend, spec.loader
    stack = loading_stack(backend.name)
    if stack is None:
        problems.append(f"backend.name={backend.name}: no such loading stack; valid: {', '.join(stack_names())}")
        return problems
    name = backend.name
    if not isinstance(backend, backend_schema(name)):  # backend.name=spdl alone: without its options' schema
        problems.append(f"backend.name={name}: choose the stack as backend={name}, which brings its options")
    if stack.requires and importlib.util.find_spec(stack.requires) is None:
        problems.append(f"backend={name} needs {stack.requires}, which is not installed: "
                        f"pip install -e \".[{stack.extra}]\"")
    for knob in (f.name for f in dataclasses.fields(LoaderConfig)):
        value = getattr(loader, knob)
        if knob not in stack.knobs and value != getattr(DEFAULT_LOADER, knob):
            problems.append(f"loader.{knob}={show(value)}: backend={name} has no such knob; with it set: "
                            f"{', '.join(stack.knobs)}")
    if stack.pool and loader.num_workers < 1:
        problems.append(f"loader.num_workers={loader.num_workers}: backend={name} loads on a pool of num_workers "
                        "threads or processes; valid: >= 1")
    if stack.whole_batches and loader.batch_size is None:
        problems.append(f"loader.batch_size=null: backend={name} maps whole batches of indices; give a batch_size")
    if not stack.ranks and spec.dist.nproc_per_node > 1:
        problems.append(f"dist.nproc_per_node={spec.dist.nproc_per_node}: ranks run backend=dataloader only")
    return problems
