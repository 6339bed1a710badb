"""This machine's limits for one dataset and transform, from the measured stage costs, and the throughput
they predict against ``num_workers``.

Each limit is in samples/s (Plumber's resource accounting, for torch's DataLoader):

- CPU: the usable cores over a sample's CPU: its fetch and transform, a worker's own cost per batch
  (collating into shared memory, sending) and the main process's cost to receive it;
- main process: the batch over what the main process spends per batch receiving it (and pinning it): the
  limit no number of workers lifts;
- storage: the files' cold read rate over the bytes a sample reads (only when the files cannot stay in
  the page cache);
- device copy: the measured host-to-device rate over a sample's bytes (with CUDA);
- step: the batch over the training step's time.

The ceiling is the lowest.  The predicted curve: without workers, one process does everything in turn;
with ``W`` workers, ``W`` samples per worker's time for one, up to the lowest of the limits (the main
process receives, copies and steps one batch after another: those add up).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from loaderexp.harness.stages import StageProfile


@dataclass(frozen=True)
class Machine:
    """What the model takes besides the stage costs: this host, and the run's own figures."""

    cores: float
    batch_size: int
    ranks: int = 1  # training processes on the node, each with its own main process and workers
    storage_mb_per_s: Optional[float] = None  # the files read cold (bench.cache=cold|both)
    read_bytes_per_sample: Optional[float] = None  # what a sample reads from its files
    files_stay_warm: Optional[bool] = None  # the files fit in the page cache: later epochs do not read storage
    copy_gb_per_s: Optional[float] = None  # host-to-device, measured with CUDA
    step_s_per_batch: Optional[float] = None  # the training step, measured
    pins: bool = False  # pin_memory with an accelerator: the pin thread's time per batch counts


@dataclass(frozen=True)
class Limit:
    name: str  # "CPU", "main process", "storage", "device copy", "step"
    rate: Optional[float]  # samples/s; None: not measured here
    how: str  # how it is made, with its numbers
    lift: str  # what would lift it
    applies: bool = True  # storage while the files stay in the page cache does not


class CeilingModel:
    """The limits and the predicted throughput, optionally with stages left out (a what-if)."""

    def __init__(self, profile: StageProfile, machine: Machine, left_out: frozenset = frozenset()):
        self.profile, self.machine, self.left_out = profile, machine, left_out
        removed_cpu = profile.sample_cost("cpu_s") - profile.sample_cost("cpu_s", left_out)
        removed_wall = profile.sample_cost("wall_s") - profile.sample_cost("wall_s", left_out)
        self.worker_cpu_s = max(profile.worker_cpu_s - removed_cpu, 1e-12)
        self.worker_wall_s = max(profile.worker_wall_s - removed_wall, 1e-12)
        self.single_wall_s = max(profile.single_wall_s - removed_wall, 1e-12)
        self.single_cpu_s = max(profile.single_cpu_s - removed_cpu, 1e-12)
        self.receive_s = profile.main_cpu_s_per_batch or 0.0
        self.efficiency = self._efficiency()
        self.cores = machine.cores * self.efficiency

    def _efficiency(self) -> float:
        """What one worker per core really did against what the costs predict for it (at most 1): a shared
        host, hyperthreads, the main process waiting for a core to hand out work."""
        p = self.profile
        if not p.all_cores_rate or p.cores < 2:
            return 1.0
        batch = max(p.batch_size, 1)
        predicted = min(p.cores / p.worker_wall_s, p.cores / (p.worker_cpu_s + self.receive_s / batch),
                        batch / self.receive_s if self.receive_s else float("inf"))
        return min(p.all_cores_rate / predicted, 1.0)

    def without(self, *stages: str) -> "CeilingModel":
        return CeilingModel(self.profile, self.machine, self.left_out | frozenset(stages))

    def with_machine(self, **changes) -> "CeilingModel":
        return CeilingModel(self.profile, dataclasses.replace(self.machine, **changes), self.left_out)

    # -- the limits ---------------------------------------------------------------------------------

    def limits(self) -> list[Limit]:
        m, batch = self.machine, max(self.machine.batch_size, 1)
        cpu_per_sample = self.cpu_per_sample()
        costliest = self.costliest_stage()
        measured = (f" x {self.efficiency:.2f}, what {self.profile.cores:g} workers did together against their costs"
                    if self.efficiency < 1 else "")
        found = [Limit("CPU", self.cores / cpu_per_sample,
                       f"{m.cores:g} usable cores / {1000 * cpu_per_sample:.3f} ms CPU per sample (the main process's "
                       f"share {1000 * self.receive_s / batch:.3f}){measured}",
                       "more cores, or less CPU per sample" + (f": the costliest stage is {costliest}" if costliest
                                                               else ""))]
        main_s = self.receive_s + (self._pin_s() if m.pins else 0.0)
        found.append(Limit("main process", m.ranks * batch / main_s if main_s > 0 else None,
                           f"batch {batch} / {1000 * main_s:.3f} ms the main process spends receiving each batch"
                           + (f", x {m.ranks} ranks" if m.ranks > 1 else ""),
                           "larger batches (it pays per batch), fewer tensors per sample, or threads instead of "
                           "processes (backend=nodes_thread)"))
        found.append(self._storage())
        found.append(self._copy())
        found.append(Limit("step", m.ranks * batch / m.step_s_per_batch if m.step_s_per_batch else None,
                           f"batch {batch} / {1000 * (m.step_s_per_batch or 0):.2f} ms per step" if m.step_s_per_batch
                           else "no training step in the loop", "a faster step: loading faster cannot train faster"))
        return found

    def cpu_per_sample(self) -> float:
        """The least CPU a sample can cost on this node: in a worker (and the main process's receiving), or,
        with several ranks, in a rank's own process without workers."""
        with_workers = self.worker_cpu_s + self.receive_s / max(self.machine.batch_size, 1)
        return min(with_workers, self.single_cpu_s) if self.machine.ranks > 1 else with_workers

    def _pin_s(self) -> float:
        return self.profile.pin_s_per_batch or 0.0

    def _storage(self) -> Limit:
        m = self.machine
        if not m.storage_mb_per_s or not m.read_bytes_per_sample:
            return Limit("storage", None, "not measured (bench.cache=cold|both measures the storage of a "
                         "file-backed dataset)", "")
        rate = m.storage_mb_per_s * 2**20 / m.read_bytes_per_sample
        warm = m.files_stay_warm is not False
        return Limit("storage", rate, f"{m.storage_mb_per_s:,.0f} MB/s cold / {m.read_bytes_per_sample / 1024:,.1f} KB "
                     "per sample" + (" (the files stay in the page cache: later epochs do not read it)" if warm else ""),
                     "faster storage, memory for the page cache to hold the files, or smaller files", applies=not warm)

    def _copy(self) -> Limit:
        m = self.machine
        if not m.copy_gb_per_s:
            return Limit("device copy", None, "not measured (no CUDA device)", "")
        rate = m.ranks * m.copy_gb_per_s * 1e9 / max(self.profile.sample_bytes, 1.0)
        return Limit("device copy", rate, f"{m.copy_gb_per_s:.2f} GB/s / {self.profile.sample_bytes / 1024:,.1f} KB "
                     "per sample", "pin_memory with non_blocking copies, or copy uint8 and convert on the device")

    def costliest_stage(self) -> str:
        stages = [s for s in self.profile.stages if s.name not in self.left_out]
        total = sum(s.cpu_s for s in stages)
        if not stages or total <= 0:
            return ""
        top = max(stages, key=lambda s: s.cpu_s)
        return f"{top.name} ({100 * top.cpu_s / total:.0f}% of a sample's CPU)"

    def ceiling(self) -> Limit:
        """The lowest limit measured here that applies."""
        measured = [limit for limit in self.limits() if limit.rate and limit.applies]
        return min(measured, key=lambda limit: limit.rate)

    # -- the curve ----------------------------------------------------------------------------------

    def _serial_s_per_batch(self, workers: int) -> float:
        """What the main process does per batch, one thing after another."""
        m = self.machine
        copy = self.profile.sample_bytes * m.batch_size / (m.copy_gb_per_s * 1e9) if m.copy_gb_per_s else 0.0
        pin = self._pin_s() if m.pins else 0.0
        receive = self.receive_s if workers > 0 else 0.0
        return receive + pin + copy + (m.step_s_per_batch or 0.0)

    def predict(self, workers: int) -> float:
        """Samples/s with ``workers`` workers per rank (all ranks together)."""
        m, batch = self.machine, max(self.machine.batch_size, 1)
        serial = self._serial_s_per_batch(workers)
        if workers <= 0:
            per_rank = 1.0 / (self.single_wall_s + serial / batch)  # one process does everything in turn
            return min(m.ranks * per_rank, self.cores / self.single_cpu_s, self.ceiling().rate)
        bounds = [m.ranks * workers / self.worker_wall_s, self.ceiling().rate]
        if serial > 0:
            bounds.append(m.ranks * batch / serial)
        return min(bounds)

    def knee(self, values: list[int], tolerance: float) -> int:
        """The fewest workers among ``values`` predicted within ``tolerance`` of the best of them."""
        best = max(self.predict(v) for v in values)
        return min(v for v in values if self.predict(v) >= (1 - tolerance) * best)
