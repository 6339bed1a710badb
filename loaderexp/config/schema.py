"""Typed schema behind the YAML files in ``conf/``.

Each dataclass is registered in Hydra's ConfigStore as ``base_<group>``; every YAML file of a
group starts with ``defaults: [base_<group>]``, so a typo in a key or a wrong type fails when
the config is composed, before any data is touched.  Nodes that are built with
``hydra.utils.instantiate`` (dataset, sampler, transform) keep free-form arguments: their
arguments are checked against the target's signature in :mod:`loaderexp.config.validation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# Keys in dataset/sampler/transform nodes that describe the node instead of being arguments.
META_KEYS = ("name", "default_transform", "python_path")


class MpContext(str, Enum):
    fork = "fork"
    spawn = "spawn"
    forkserver = "forkserver"


class BackendKind(str, Enum):
    dataloader = "dataloader"  # torch.utils.data.DataLoader, worker processes
    nodes_thread = "nodes_thread"  # torchdata.nodes, a ParallelMapper on threads
    nodes_process = "nodes_process"  # torchdata.nodes, a ParallelMapper on processes
    spdl = "spdl"  # an SPDL pipeline (thread pool per stage)


class DeviceType(str, Enum):
    auto = "auto"  # cuda when available, else cpu
    cpu = "cpu"
    cuda = "cuda"


class Budget(str, Enum):
    batches = "batches"  # warm-up, then a fixed number of batches
    epochs = "epochs"  # whole epochs (epoch time is exact, sweeps are slower)
    seconds = "seconds"  # warm-up, then batches until the time is spent


class StepKind(str, Enum):
    none = "none"  # only load (and copy): the loader's own ceiling
    sleep = "sleep"  # a fixed compute time per batch
    matmul = "matmul"  # real work on the device: a chain of square matmuls
    model = "model"  # a torchvision model's training step: forward, backward, optimizer step
    custom = "custom"  # your own step: step._target_ names a factory(device, **kwargs) -> callable(batch)


class TrackingBackend(str, Enum):
    mlflow = "mlflow"
    none = "none"


@dataclass
class LoaderConfig:
    """Every torch.utils.data.DataLoader knob that changes loading speed.

    Each field is passed to DataLoader as the keyword of the same name (``data.build.build_loader``).
    """

    batch_size: Optional[int] = 128  # None: each dataset item is already a batch (DataLoader's batch_size=None)
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: Optional[int] = None  # batches in flight per worker; None = DataLoader's 2
    persistent_workers: bool = False
    drop_last: bool = False
    timeout: float = 0.0
    multiprocessing_context: Optional[MpContext] = None  # None = the platform default
    in_order: bool = True
    collate_fn: Optional[str] = None  # dotted path to a callable; None = default_collate
    worker_init_fn: Optional[str] = None  # dotted path to a callable(worker_id)


@dataclass
class DeviceConfig:
    type: DeviceType = DeviceType.auto
    non_blocking: bool = True  # async host-to-device copies (truly async only from pinned memory)
    prefetch: bool = False  # copy batch N+1 on a side stream while step N runs (a data prefetcher)


@dataclass
class BenchConfig:
    budget: Budget = Budget.batches
    warmup_batches: int = 5  # at least; raised to num_workers x prefetch_factor (the pipeline's depth)
    batches: int = 20  # measured batches per repeat (budget=batches), rounded up to whole rounds
    min_window_s: float = 0.5  # budget=batches: and at least this long (timer and scheduler jitter stay small)
    epochs: int = 1  # measured epochs per repeat (budget=epochs)
    seconds: float = 5.0  # measured seconds per repeat (budget=seconds), ended on a round boundary
    repeats: Optional[int] = None  # a fixed number of repeats; None = adaptive (min_repeats..max_repeats)
    min_repeats: int = 3
    max_repeats: int = 10
    precision: float = 0.05  # adaptive: stop once IQR/median across repeats is at most this
    noise_threshold: float = 0.10  # IQR/median above this flags the run as noisy
    seed: int = 0
    resource_interval_s: float = 0.5  # CPU/memory sampling period
    max_run_seconds: float = 900.0  # wall-clock limit of one measured repeat
    job_timeout_s: float = 3600.0  # a whole job, set-up included; past it the job's process is killed
    stall_s: float = 120.0  # no batch for this long (or 20x the longest gap seen) is a stall: killed
    isolate: bool = True  # measure in a killable child process (false: in this process, for debugging)
    stop_below: Optional[float] = None  # stop after the first window when it is below this rate (a search's pruning)
    shared_host_ok: bool = False  # let measurements share a host (else each job waits for the host to itself)


@dataclass
class StepConfig:
    kind: StepKind = StepKind.none
    ms: float = 0.0  # sleep: milliseconds per batch
    size: int = 1024  # matmul: side of the square matrices
    repeat: int = 1  # matmul: chained multiplies per batch
    model: str = "resnet18"  # model: a torchvision.models name, built without pretrained weights
    num_classes: int = 10  # model: its output classes
    lr: float = 0.01  # model: SGD learning rate (momentum 0.9)
    _target_: Optional[str] = None  # custom: dotted path to factory(device, **kwargs) -> callable(batch)
    kwargs: dict[str, Any] = field(default_factory=dict)  # custom: the factory's other arguments
    python_path: Optional[str] = None  # custom: a folder put on sys.path to import _target_ from


@dataclass
class BackendConfig:
    name: BackendKind = BackendKind.dataloader
    num_threads: Optional[int] = None  # spdl: the pipeline's thread pool (default: loader.num_workers)


@dataclass
class DistConfig:
    nproc_per_node: int = 1  # ranks loading at once, each with its own loader.num_workers (1: no extra process)
    start_method: MpContext = MpContext.spawn  # how the ranks start (torchrun: a fresh interpreter each)
    cpu_affinity: bool = False  # split the usable cores evenly between the ranks, as a launcher's binding would


@dataclass
class TrackingConfig:
    backend: TrackingBackend = TrackingBackend.mlflow
    uri: str = MISSING
    experiment: str = "loaderexp"


@dataclass
class Config:
    dataset: Any = MISSING
    sampler: Any = MISSING
    transform: Any = MISSING
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    device: DeviceConfig = field(default_factory=DeviceConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    step: StepConfig = field(default_factory=StepConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    data_root: str = MISSING  # where generated data sets are written once and reused
    resume: bool = False  # skip configurations this sweep folder already measured successfully


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    cs.store(group="loader", name="base_loader", node=LoaderConfig)
    cs.store(group="device", name="base_device", node=DeviceConfig)
    cs.store(group="bench", name="base_bench", node=BenchConfig)
    cs.store(group="step", name="base_step", node=StepConfig)
    cs.store(group="tracking", name="base_tracking", node=TrackingConfig)
    cs.store(group="dist", name="base_dist", node=DistConfig)
    cs.store(group="backend", name="base_backend", node=BackendConfig)
