"""Cross-field checks on a composed config, before any dataset is built or worker started.

Types, unknown keys and enum values are caught by the schema at compose time; what needs two
fields at once, or the target of an ``_target_`` node, is checked here.  Every problem is
gathered into one :class:`ConfigError` (one line per problem, each naming the key, the value and
what is allowed).  Settings that are legal but pointless on this machine run, with warnings
that the result records.
"""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any, Mapping, Optional

from loaderexp.config.schema import META_KEYS
from loaderexp.result import param_text


class ConfigError(ValueError):
    """One or more invalid settings; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def validate(cfg: Mapping[str, Any], cuda_available: bool, cpus: int, targets: bool = True,
             gpus: Optional[int] = None) -> list[str]:
    """Raise ConfigError listing every invalid setting; return the warnings for a legal config.

    ``targets=False`` leaves out what needs imports (the ``_target_`` nodes, ``collate_fn``,
    ``worker_init_fn``): the runner leaves those to the measuring process, where torch and
    torchvision are loaded already, and :func:`check_targets` does them first thing there.
    """
    problems: list[str] = []
    warnings: list[str] = []
    _check_loader(cfg["loader"], problems, warnings, cpus, cfg["dist"]["nproc_per_node"])
    _check_dist(cfg, problems)
    _check_backend(cfg, problems)
    _check_bench(cfg["bench"], problems)
    _check_step(cfg["step"], problems)
    _check_device(cfg, cuda_available, problems, warnings)
    _check_rank_gpus(cfg, cuda_available, gpus, problems)
    if targets:
        problems += _target_problems(cfg)
    if problems:
        raise ConfigError(problems)
    return warnings


def check_targets(cfg: Mapping[str, Any]) -> None:
    """Raise ConfigError when a ``_target_`` or a callable knob does not import or take its arguments."""
    problems = _target_problems(cfg)
    if problems:
        raise ConfigError(problems)


def _target_problems(cfg: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    for key in CALLABLE_KNOBS:
        if cfg["loader"][key] is not None:
            _imported(f"loader.{key}", cfg["loader"][key], problems,
                      "; give a dotted path to a function, e.g. mypackage.data.collate")
    for group in ("dataset", "sampler", "transform"):
        _check_target(group, cfg[group], problems)
    _check_step_target(cfg["step"], problems)
    return problems


def _check_step_target(step: Mapping[str, Any], problems: list[str]) -> None:
    if step["kind"] == "model":
        import torchvision

        names = sorted(torchvision.models.list_models(module=torchvision.models))
        if step["model"] not in names:
            problems.append(f"step.model={step['model']}: not a torchvision classification model; valid: "
                            f"{', '.join(names)}")
    elif step["kind"] == "custom":
        if not step.get("_target_"):
            problems.append("step._target_ is missing: step=custom names your step's factory, "
                            "e.g. custom_step.make_step (examples/custom_step.py)")
        else:
            _imported("step._target_", step["_target_"], problems,
                      "; give a dotted path to a factory(device, **step.kwargs) -> callable(batch)")


# Knobs that mean nothing without workers, and the value DataLoader needs there instead.
NEEDS_WORKERS = {"prefetch_factor": None, "persistent_workers": False, "timeout": 0.0, "multiprocessing_context": None}
CALLABLE_KNOBS = ("collate_fn", "worker_init_fn")


def without_inapplicable(loader: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The loader node as DataLoader can take it, and what was left out.

    With ``num_workers=0`` DataLoader refuses ``prefetch_factor``, ``persistent_workers``,
    ``timeout`` and ``multiprocessing_context`` (they configure workers): a sweep over
    ``num_workers=range(0,8)`` with ``prefetch_factor=4`` still measures its baseline, without them.
    """
    effective = dict(loader)
    dropped = []
    if loader["num_workers"] == 0:
        for key, unset in NEEDS_WORKERS.items():
            if loader[key] != unset:
                dropped.append(f"loader.{key}={_show(loader[key])}")
                effective[key] = unset
    return effective, dropped


# Samplers a rank's DistributedSampler stands in for: it shuffles (random) or keeps the order (sequential).
DIST_SAMPLERS = ("random", "sequential", "distributed")


def _check_dist(cfg: Mapping[str, Any], problems: list[str]) -> None:
    ranks = cfg["dist"]["nproc_per_node"]
    if ranks < 1:
        problems.append(f"dist.nproc_per_node={ranks}: must be >= 1 (1: one process, as without dist)")
    elif ranks > 1 and cfg["sampler"].get("name") not in DIST_SAMPLERS:
        problems.append(f"sampler={cfg['sampler'].get('name')} with dist.nproc_per_node={ranks}: each rank loads "
                        f"through DistributedSampler; valid samplers: {', '.join(DIST_SAMPLERS)}")


# The loader knobs each backend has besides the common ones; a knob set away from its default
# under a backend without it is an error, never silently ignored.
BACKEND_COMMON = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "in_order", "drop_last", "collate_fn")
BACKEND_EXTRA = {"nodes_process": ("multiprocessing_context",)}
LOADER_DEFAULTS = {"persistent_workers": False, "timeout": 0.0, "multiprocessing_context": None,
                   "worker_init_fn": None}


def _check_backend(cfg: Mapping[str, Any], problems: list[str]) -> None:
    backend, loader = cfg["backend"], cfg["loader"]
    name = backend["name"]
    if backend.get("num_threads") is not None and name != "spdl":
        problems.append(f"backend.num_threads={backend['num_threads']}: only backend=spdl has it (its thread pool)")
    if name == "dataloader":
        return
    package = "spdl" if name == "spdl" else "torchdata"
    if importlib.util.find_spec(package) is None:
        problems.append(f"backend={name} needs {package}, which is not installed: pip install -e \".[backends]\"")
    has = BACKEND_COMMON + BACKEND_EXTRA.get(name, ())
    for knob, unset in LOADER_DEFAULTS.items():
        if knob not in has and loader[knob] != unset:
            problems.append(f"loader.{knob}={_show(loader[knob])}: backend={name} has no such knob; with it set: "
                            f"{', '.join(has)}")
    if loader["num_workers"] < 1:
        problems.append(f"loader.num_workers={loader['num_workers']}: backend={name} loads on a pool of num_workers "
                        "threads or processes; valid: >= 1")
    if loader["batch_size"] is None:
        problems.append(f"loader.batch_size=null: backend={name} maps whole batches of indices; give a batch_size")
    if cfg["dist"]["nproc_per_node"] > 1:
        problems.append(f"dist.nproc_per_node={cfg['dist']['nproc_per_node']}: ranks run backend=dataloader only")


def _check_loader(loader: Mapping[str, Any], problems: list[str], warnings: list[str], cpus: int,
                  ranks: int = 1) -> None:
    workers = loader["num_workers"]
    if loader["batch_size"] is None:
        if loader["drop_last"]:
            problems.append("loader.drop_last=true: needs a loader.batch_size (null turns batching off: each "
                            "item of the dataset is already a batch, and there is no short last batch to drop)")
    elif loader["batch_size"] < 1:
        problems.append(f"loader.batch_size={loader['batch_size']}: must be null (the dataset's items are batches) "
                        "or an integer >= 1")
    if workers < 0:
        problems.append(f"loader.num_workers={workers}: must be >= 0 (0 loads in the main process)")
    _, dropped = without_inapplicable(loader)
    if dropped:
        warnings.append(f"{', '.join(dropped)} not applied: with num_workers=0 there are no workers to configure "
                        "(DataLoader refuses them), so this run loads without")
    if loader["prefetch_factor"] is not None and loader["prefetch_factor"] < 1:
        problems.append(f"loader.prefetch_factor={loader['prefetch_factor']}: must be null or an integer >= 1")
    if loader["timeout"] < 0:
        problems.append(f"loader.timeout={_show(loader['timeout'])}: must be >= 0 seconds (0 waits forever)")
    if ranks > 1 and ranks * workers > cpus:
        warnings.append(f"dist.nproc_per_node={ranks} x loader.num_workers={workers} = {ranks * workers} workers "
                        f"exceed the {cpus} CPUs this process may use: the ranks' workers compete for cores")
    elif workers > cpus:
        warnings.append(
            f"loader.num_workers={workers} exceeds the {cpus} CPUs this process may use: workers compete for cores"
        )
    if not loader["in_order"] and workers == 0:
        warnings.append("loader.in_order=false has no effect with num_workers=0")


def _imported(key: str, path: str, problems: list[str], hint: str = "") -> Any:
    """What a dotted path names, or None with the problem (the key, the path, why) recorded."""
    try:
        from hydra.utils import get_method

        return get_method(path)
    except Exception as error:  # ImportError, AttributeError, ValueError from Hydra
        problems.append(f"{key}={path}: cannot be imported ({str(error).splitlines()[0]}){hint}")
        return None


def _check_bench(bench: Mapping[str, Any], problems: list[str]) -> None:
    for key in ("batches", "epochs", "min_repeats", "max_repeats"):
        if bench[key] < 1:
            problems.append(f"bench.{key}={bench[key]}: must be >= 1")
    if bench["repeats"] is not None and bench["repeats"] < 1:
        problems.append(f"bench.repeats={bench['repeats']}: must be null (adaptive) or >= 1")
    if bench["max_repeats"] < bench["min_repeats"]:
        problems.append(f"bench.max_repeats={bench['max_repeats']}: must be >= bench.min_repeats={bench['min_repeats']}")
    if bench["min_window_s"] < 0:
        problems.append(f"bench.min_window_s={_show(bench['min_window_s'])}: must be >= 0")
    if bench["warmup_batches"] < 0:
        problems.append(f"bench.warmup_batches={bench['warmup_batches']}: must be >= 0")
    for key in ("seconds", "max_run_seconds", "job_timeout_s", "stall_s", "resource_interval_s", "precision"):
        if bench[key] <= 0:
            problems.append(f"bench.{key}={_show(bench[key])}: must be > 0")


def _check_step(step: Mapping[str, Any], problems: list[str]) -> None:
    if step["ms"] < 0:
        problems.append(f"step.ms={step['ms']}: must be >= 0")
    if step["size"] < 1 or step["repeat"] < 1:
        problems.append(f"step.size={step['size']}, step.repeat={step['repeat']}: both must be >= 1")


def _check_rank_gpus(cfg: Mapping[str, Any], cuda_available: bool, gpus: Optional[int], problems: list[str]) -> None:
    ranks, device = cfg["dist"]["nproc_per_node"], cfg["device"]["type"]
    if ranks > 1 and cuda_available and device != "cpu" and gpus is not None and ranks > gpus:
        problems.append(f"dist.nproc_per_node={ranks} with device.type={device}: each rank uses its own GPU and this "
                        f"host has {gpus}; valid here: 1..{gpus}, or device.type=cpu")


def _check_device(cfg: Mapping[str, Any], cuda_available: bool, problems: list[str], warnings: list[str]) -> None:
    device = cfg["device"]["type"]
    if device == "cuda" and not cuda_available:
        problems.append("device.type=cuda: CUDA is not available on this machine; valid here: auto, cpu")
    if cfg["loader"]["pin_memory"]:
        if not cuda_available:
            warnings.append(
                "loader.pin_memory=true with no accelerator: the DataLoader skips pinning, "
                "batches stay pageable and nothing is copied to a device"
            )
        elif device == "cpu":
            warnings.append(
                "loader.pin_memory=true with device.type=cpu: pinning costs time but no batch is copied to the GPU"
            )


def _check_target(group: str, node: Mapping[str, Any], problems: list[str]) -> None:
    """The ``_target_`` must import and accept the node's arguments (bound, not called)."""
    target = node.get("_target_")
    if target is None:
        if group == "dataset":
            problems.append("dataset._target_ is missing: a dataset node names its class or factory")
        return
    factory = _imported(f"{group}._target_", target, problems)
    if factory is None:
        return
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # builtins without a signature: nothing to check
    kwargs = {k: v for k, v in node.items() if k not in META_KEYS and not k.startswith("_")}
    params = signature.parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            valid = ", ".join(name for name in params if name not in ("self", "transform", "data_source"))
            problems.append(f"{group}: {target} takes no argument {', '.join(unknown)}; valid: {valid}")
            return
    placeholders = [object()] if node.get("_partial_") else []  # a sampler gets its dataset later
    try:
        signature.bind_partial(*placeholders, **kwargs)
    except TypeError as error:
        problems.append(f"{group}: {target}: {error}")


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"  # 5, not 5.0: as the user wrote it
    return param_text(value)
