"""The typed schema of a run: what the YAML files in ``conf/`` compose into, and what every later stage reads.

Each dataclass here is the single statement of its settings' defaults.  Hydra composes the YAML
files against them (:mod:`.store` registers them as ``base_<group>``), so a typo in a key or a wrong
type fails at compose time; :func:`loaderexp.config.to_spec` turns the composed config into these
frozen dataclasses, and that is what ``execute/`` and ``harness/`` receive.  The nodes built with
``hydra.utils.instantiate`` (dataset, sampler, transform) keep free-form arguments, checked against
their target's signature (:mod:`.targets`), and arrive as :class:`TargetNode`.

No Hydra import here: a rank or a DataLoader worker unpickles these classes without it.  The measuring side
does load Hydra's library once, on purpose: the dataset holder builds the configured objects with
``hydra.utils.instantiate`` (:mod:`loaderexp.data.build`, the only place outside config/ and track/ that
imports Hydra); the measured loop (harness/), execute/ and loading/ import neither Hydra nor OmegaConf
(tests/test_layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from loaderexp.harness.records import Budget  # the measured loop's own modes, offered as bench.budget


def bounded(default: Any, *, ge: Optional[float] = None, gt: Optional[float] = None, rule: str = "",
            nonempty: bool = False) -> Any:
    """A setting with the values it may take, declared beside its default: validation checks the range
    (and that a float is a finite number) and says ``rule`` (else ``>= ge`` / ``> gt``) when it fails."""
    return field(default=default, metadata={"ge": ge, "gt": gt, "rule": rule, "nonempty": nonempty})

MISSING = "???"  # OmegaConf's marker for a value the YAML must give
# Keys in dataset/sampler/transform nodes that describe the node instead of being arguments.
META_KEYS = ("name", "default_transform", "python_path", "files", "yields_batches")


class MpContext(str, Enum):
    fork = "fork"
    spawn = "spawn"
    forkserver = "forkserver"


class DeviceType(str, Enum):
    auto = "auto"  # cuda when available, else cpu
    cpu = "cpu"
    cuda = "cuda"


class CacheMode(str, Enum):
    warm = "warm"  # the dataset's files as the page cache holds them (after the first epoch, usually)
    cold = "cold"  # evicted first: the first epoch timed whole, from storage
    both = "both"  # a cold epoch, then the warm windows


class StepKind(str, Enum):
    none = "none"  # only load (and copy): the loader's own ceiling
    sleep = "sleep"  # a fixed compute time per batch
    matmul = "matmul"  # real work on the device: a chain of square matmuls
    model = "model"  # a torchvision model's training step: forward, backward, optimizer step
    custom = "custom"  # your own step: step._target_ names a factory(device, **kwargs) -> callable(batch)


class TrackingBackend(str, Enum):
    mlflow = "mlflow"
    none = "none"


@dataclass(frozen=True)
class LoaderConfig:
    """Every torch.utils.data.DataLoader knob that changes loading speed.

    Each field is passed to DataLoader as the keyword of the same name (``loading/dataloader.py``).
    """

    # None: each dataset item is already a batch (DataLoader's batch_size=None)
    batch_size: Optional[int] = bounded(128, ge=1, rule="null (the dataset's items are batches) or an integer >= 1")
    # 0 loads in the main process; each worker costs a process's memory and a core
    num_workers: int = bounded(0, ge=0, rule=">= 0 (0 loads in the main process)")
    pin_memory: bool = False  # batches in page-locked memory: faster host-to-device copies that can be async
    # batches in flight per worker; None = DataLoader's 2
    prefetch_factor: Optional[int] = bounded(None, ge=1, rule="null or an integer >= 1")
    persistent_workers: bool = False  # keep workers between epochs: no start-up cost per epoch
    drop_last: bool = False  # leave out the last batch when it is short
    # seconds to wait for a worker's batch (0 = forever)
    timeout: float = bounded(0.0, ge=0, rule=">= 0 seconds (0 waits forever)")
    multiprocessing_context: Optional[MpContext] = None  # None = the platform default
    in_order: bool = True  # false lets a fast worker's batch overtake a slow one's
    collate_fn: Optional[str] = None  # dotted path to a callable; None = default_collate
    worker_init_fn: Optional[str] = None  # dotted path to a callable(worker_id)


@dataclass(frozen=True)
class DeviceConfig:
    type: DeviceType = DeviceType.auto  # where batches are copied: auto (cuda when available), cpu, cuda
    non_blocking: bool = True  # async host-to-device copies (truly async only from pinned memory)
    prefetch: bool = False  # copy batch N+1 on a side stream while step N runs (a data prefetcher)


@dataclass(frozen=True)
class BenchConfig:
    budget: Budget = Budget.batches  # a repeat is: batches (a window), epochs (whole epochs) or seconds
    warmup_batches: int = bounded(5, ge=0)  # at least; raised to num_workers x prefetch_factor (the pipeline's depth)
    batches: int = bounded(20, ge=1)  # measured batches per repeat (budget=batches), rounded up to whole rounds
    # budget=batches: and at least this long (timer and scheduler jitter stay small)
    min_window_s: float = bounded(0.5, ge=0)
    epochs: int = bounded(1, ge=1)  # measured epochs per repeat (budget=epochs)
    seconds: float = bounded(5.0, gt=0)  # measured seconds per repeat (budget=seconds), ended on a round boundary
    # a fixed number of repeats; None = adaptive (min_repeats..max_repeats)
    repeats: Optional[int] = bounded(None, ge=1, rule="null (adaptive) or >= 1")
    min_repeats: int = bounded(3, ge=1)  # adaptive: at least this many windows
    max_repeats: int = bounded(10, ge=1)  # adaptive: at most this many windows
    # adaptive, a job of a sweep that races its pick (confirm_s > 0): at most this many windows (null: max_repeats)
    raced_max_repeats: Optional[int] = bounded(3, ge=1, rule="null (max_repeats) or >= 1")
    precision: float = bounded(0.05, gt=0)  # adaptive: stop once IQR/median across repeats is at most this
    noise_threshold: float = bounded(0.10, ge=0)  # IQR/median above this flags the run as noisy
    # seeds the sampler's order, the data and the transforms (and the datasets that take it)
    seed: int = bounded(0, ge=0)
    resource_interval_s: float = bounded(0.5, gt=0)  # CPU/memory sampling period
    max_run_seconds: float = bounded(900.0, gt=0)  # wall-clock limit of one measured repeat
    job_timeout_s: float = bounded(3600.0, gt=0)  # a whole job, set-up included; past it the job's process is killed
    stall_s: float = bounded(120.0, gt=0)  # no batch for this long (or 20x the longest gap seen) is a stall: killed
    isolate: bool = True  # measure in a killable child process (false: in this process, for debugging)
    # stop after the first window when it is below this rate (a search's pruning)
    stop_below: Optional[float] = bounded(None, ge=0, rule="null or a rate >= 0")
    shared_host_ok: bool = False  # let measurements share a host (else each job waits for the host to itself)
    # at most this long waiting for another measurement on this host: then FAILED, host busy
    cache: CacheMode = CacheMode.warm  # file-backed datasets: measure with the page cache warm, cold, or both
    # read on, unmeasured, to the epoch's end for an epoch's memory when that takes at most this long (else projected)
    memory_epoch_s: float = bounded(30.0, ge=0)
    host_wait_s: float = bounded(3600.0, ge=0)
    # the profiling pass (stage costs, the model): about this long, 2x with a measured what-if; once per data+batch size
    profile_s: float = bounded(2.0, ge=0)
    predict: bool = False  # a num_workers grid: measure the predicted knee, its neighbours and 1 worker, predict the rest
    # at a sweep's end, the pick races its rivals side by side about this long (less once decided, 3x if not; 0: off)
    confirm_s: float = bounded(15.0, ge=0)


@dataclass(frozen=True)
class StepConfig:
    """What is done with each batch.  ``_target_`` names the step's factory: loaderexp's own steps
    (conf/step/*.yaml) or yours; it is called with the device, the knobs below that its signature
    names, and ``kwargs``, and returns a callable(batch), or nothing to only load."""

    kind: StepKind = StepKind.none  # none, sleep, matmul, model or custom: the preset's name
    ms: float = bounded(0.0, ge=0)  # sleep: milliseconds per batch
    size: int = bounded(1024, ge=1)  # matmul: side of the square matrices
    repeat: int = bounded(1, ge=1)  # matmul: chained multiplies per batch
    model: str = "resnet18"  # model: a torchvision.models name, built without pretrained weights
    num_classes: int = bounded(10, ge=1)  # model: its output classes
    lr: float = bounded(0.01, gt=0)  # model: SGD learning rate (momentum 0.9)
    _target_: Optional[str] = None  # dotted path to factory(device, **knobs) -> callable(batch); None: no step
    kwargs: dict[str, Any] = field(default_factory=dict)  # the factory's other arguments
    python_path: Optional[str] = None  # a folder put on sys.path to import _target_ from


@dataclass(frozen=True)
class BackendConfig:
    """The loading stack; a stack with options of its own extends this class (``BACKEND_OPTIONS``)."""

    name: str = "dataloader"  # the loading stack: a module of loaderexp/loading/ and a file in conf/backend/


@dataclass(frozen=True)
class SpdlBackendConfig(BackendConfig):
    # the pipeline's thread pool (default: loader.num_workers)
    num_threads: Optional[int] = bounded(None, ge=1, rule="null or an integer >= 1")


@dataclass(frozen=True)
class DistConfig:
    # ranks loading at once, each with its own loader.num_workers (1: no extra process)
    nproc_per_node: int = bounded(1, ge=1, rule=">= 1 (1: one process, as without dist)")
    start_method: MpContext = MpContext.spawn  # how the ranks start (torchrun: a fresh interpreter each)
    cpu_affinity: bool = False  # split the usable cores evenly between the ranks, as a launcher's binding would


@dataclass(frozen=True)
class TrackingConfig:
    backend: TrackingBackend = TrackingBackend.mlflow  # mlflow, or none: result.json only
    uri: str = MISSING  # the MLflow store: sqlite:///<file> (the preset: ./mlflow.db), or http(s):// a server
    experiment: str = bounded("loaderexp", nonempty=True)  # the MLflow experiment (named sweeps set their own)


@dataclass(frozen=True)
class TargetNode:
    """A node built with ``hydra.utils.instantiate`` (dataset, sampler, transform), as composed:
    its ``_target_``, its arguments, and the keys that describe it (:data:`META_KEYS`)."""

    node: dict[str, Any]

    @property
    def name(self) -> Optional[str]:
        return self.node.get("name")

    @property
    def target(self) -> Optional[str]:
        return self.node.get("_target_")

    @property
    def partial(self) -> bool:
        return bool(self.node.get("_partial_"))

    @property
    def arguments(self) -> dict[str, Any]:
        """The node without its descriptive keys: what ``instantiate`` passes to the target."""
        return {k: v for k, v in self.node.items() if k not in META_KEYS}

    @property
    def keyword_arguments(self) -> dict[str, Any]:
        """The target's own arguments (no ``_target_``, ``_partial_``)."""
        return {k: v for k, v in self.arguments.items() if not k.startswith("_")}

    @property
    def python_path(self) -> list[str]:
        folders = self.node.get("python_path") or []
        return [folders] if isinstance(folders, str) else list(folders)

    @property
    def default_transform(self) -> str:
        return self.node.get("default_transform", "none")

    @property
    def yields_batches(self) -> bool:
        """A dataset whose items are whole batches (``yields_batches: true``): DataLoader's batching must be off."""
        return bool(self.node.get("yields_batches", False))

    def get(self, key: str, default: Any = None) -> Any:
        """One of the target's arguments, or ``default``."""
        return self.node.get(key, default)

    @property
    def shuffles(self) -> bool:
        """A sampler's order is a fresh permutation each epoch: its ``shuffle`` argument, else the random sampler."""
        return bool(self.node.get("shuffle", self.name == "random"))

    @property
    def drops_last(self) -> bool:
        """A sampler leaves out the last incomplete share (its ``drop_last`` argument)."""
        return bool(self.node.get("drop_last", False))


@dataclass(frozen=True)
class Config:
    dataset: Any = MISSING  # a TargetNode once composed
    sampler: Any = MISSING  # a TargetNode
    transform: Any = MISSING  # a TargetNode (``auto`` resolved to the dataset's default)
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    device: DeviceConfig = field(default_factory=DeviceConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    step: StepConfig = field(default_factory=StepConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    data_root: str = MISSING  # where generated data sets are written once and reused
    resume: bool = False  # skip configurations this sweep folder already measured successfully


# The stacks with options of their own: conf/backend/<name>.yaml composes onto base_backend_<name>.
BACKEND_OPTIONS: dict[str, type] = {"spdl": SpdlBackendConfig}


def backend_schema(name: Optional[str]) -> type:
    """The schema a backend's settings compose against: its own options', else the shared one."""
    return BACKEND_OPTIONS.get(name or "", BackendConfig)


# The groups backed by a dataclass (the others are TargetNodes).
GROUPS = {"loader": LoaderConfig, "device": DeviceConfig, "bench": BenchConfig, "step": StepConfig,
          "dist": DistConfig, "backend": BackendConfig, "tracking": TrackingConfig}
