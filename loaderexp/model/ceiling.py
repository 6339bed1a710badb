"""This machine's limits for one dataset and transform, from the measured stage costs, and the throughput
they predict against ``num_workers``.

Each limit is in samples/s (Plumber's resource accounting, for torch's DataLoader), an upper bound from the costs:
CPU (the usable cores over a sample's CPU: fetch, transform, a worker's collating and sending, the main process's
receiving), the main process (the batch over its time receiving and pinning a batch: no number of workers lifts
it), storage (the cold read rate over a sample's bytes, when the files cannot stay in the page cache), the device
copy (CUDA) and the training step.  The ceiling is the better of two ways to load, the lowest limit with workers or
one process without them, as a range: at least what this machine was seen to do for the pipeline (the profile's
loops, the sweep's runs), at most the binding limit with its uncertainty.  The predicted curve: without workers,
one process does everything in turn; with ``W`` workers, ``W`` samples per worker's time for one, up to the
limits, the CPU one taken at what the usable cores really did together (the profile's all-cores loop).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from loaderexp.harness.stages import StageProfile
from loaderexp.model.limits import CeilingRange, Limit, cores_word, over_bound


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
    step_cpu_s_per_batch: Optional[float] = None  # its CPU in the main process: taken from the cores that load
    pins: bool = False  # pin_memory with an accelerator: the pin thread's time per batch counts
    cpu_s_per_sample_seen: Optional[float] = None  # the least a sweep's run with workers used (its tree, seconds)
    cpu_seen_spread: float = 0.0  # how far repeats of one configuration read their CPU a sample apart (max/min - 1)
    restart_share: float = 0.0  # of an epoch, the most the runs' workers took to start again: CPU a stream does not pay
    all_cores_rate: Optional[float] = None  # what the cores did together in runs past them (None: the profile's loop)
    moment: float = 1.0  # the runs' rates over the profile's at every setting (its costs read in another moment)
    workers_moment: float = 1.0  # ... at every setting with workers (its one-worker loop read in another moment)


RESTART_SHARE = 0.05  # of an epoch: a start-up of the workers past it is said, and added to the predicted stream
# ... past this its CPU may put the runs' CPU a sample above a stream's (dataset=hf at 15%: 0.116 ms against 0.098).
# The bound stays on the runs' (on the profile's one-worker stream two JPEG sweeps' bounds read 17.5% apart, 5.1% on
# the runs'); a stream of the profile's past it says why
RESTART_CPU_SHARE = 0.10
MIN_UNCERTAINTY = 0.05  # a limit from costs measured in short loops is known to about this much at best
LIGHTER_UNCERTAINTY = 0.45  # a lighter pipeline's loops vs bare loops: mostly within 15%, at worst +42.5% (1 worker)


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
        # a rank's own process runs torch on one thread (torchrun's OMP_NUM_THREADS=1), the loop above on the job's
        self.rank_wall_s = max((profile.single_wall_one_thread_s or profile.single_wall_s) - removed_wall, 1e-12)
        self.receive_s = profile.main_cpu_s_per_batch or 0.0
        self.step_cpu_s = (machine.step_cpu_s_per_batch or 0.0) / max(machine.batch_size, 1)  # a sample's share
        seen = machine.cpu_s_per_sample_seen
        self.seen_cpu_s = max(seen - removed_cpu, 1e-12) if seen else None
        self.lighter = profile.without(next(iter(left_out))) if len(left_out) == 1 else None
        if self.lighter is not None:  # the pipeline without the stage was measured: its own loops, not a subtraction
            whole = profile.worker_cpu_s + self.receive_s / max(machine.batch_size, 1)
            self.worker_cpu_s, self.worker_wall_s = self.lighter.worker_cpu_s, self.lighter.worker_wall_s
            self.single_wall_s, self.receive_s = self.lighter.single_wall_s, self.lighter.main_cpu_s_per_batch
            self.rank_wall_s = self.single_wall_s
            # the runs' CPU by the loops' measured ratio: without RandomResizedCrop the JPEG folder's images stay
            # large and the pipeline ran x0.88, where the crop's cost taken off the runs' put the CPU limit at +27%
            if seen:
                self.seen_cpu_s = (seen - self.step_cpu_s) * (self.cpu_with_workers() - self.step_cpu_s) / whole \
                    + self.step_cpu_s
        self.efficiency = self._efficiency()
        self.cores = machine.cores * self.efficiency  # what the usable cores really do together: for predictions

    def _efficiency(self) -> float:
        """What one worker per core really did against what the costs predict for it (at most 1): a shared host,
        hyperthreads, the main process waiting for a core; the lighter pipeline's own when it was measured without
        a stage.  Refitted on runs (``Machine.all_cores_rate``), it is what puts the curve's CPU bound at their rate."""
        p, batch = self.profile, max(self.profile.batch_size, 1)
        if self.left_out and self.lighter is None:  # modelled without the stage: the whole pipeline's factor kept
            return CeilingModel(p, self.machine).efficiency
        if self.lighter is None and self.machine.all_cores_rate:  # may pass 1: the costs were read in a slower moment
            return self.machine.all_cores_rate * self.cpu_with_workers() / self.machine.cores
        seen = self.lighter.all_cores_rate if self.lighter is not None else p.all_cores_rate
        if not seen or p.cores < 2:
            return 1.0
        predicted = min(p.cores / self.worker_wall_s, p.cores / (self.worker_cpu_s + self.receive_s / batch),
                        batch / self.receive_s if self.receive_s else float("inf"))
        return min(seen / predicted, 1.0)

    def without(self, *stages: str) -> "CeilingModel":
        return CeilingModel(self.profile, self.machine, self.left_out | frozenset(stages))

    def with_machine(self, **changes) -> "CeilingModel":
        return CeilingModel(self.profile, dataclasses.replace(self.machine, **changes), self.left_out)

    def limits(self) -> list[Limit]:
        m, batch = self.machine, max(self.machine.batch_size, 1)
        cpu_per_sample = self.cpu_per_sample()
        costliest = self.costliest_stage()
        basis = f"the main process's share {1000 * self.receive_s / batch:.3f}" + (
            f", the step's {1000 * self.step_cpu_s:.3f} on these cores" if self.step_cpu_s else "")
        if self._cpu_from_runs():
            cpu_per_sample = self.seen_cpu_s
            basis = ("the least a run of this sweep used with workers, its whole process tree"
                     + (", less the stages left out" if self.left_out else "") + (
                         f"; repeats of one configuration read it up to {100 * m.cpu_seen_spread:.0f}% apart"
                         if m.cpu_seen_spread > MIN_UNCERTAINTY else ""))
        found = [Limit("CPU", m.cores / cpu_per_sample,
                       f"{m.cores:g} usable {cores_word(m.cores)} / {1000 * cpu_per_sample:.3f} ms CPU per sample ({basis})",
                       "more cores, or less CPU per sample" + (f": the costliest stage is {costliest}" if costliest
                                                               else ""))]
        main_s = self.receive_s + ((self.profile.pin_s_per_batch or 0.0) if m.pins else 0.0)
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

    def cpu_with_workers(self) -> float:
        """A sample's CPU with workers: in a worker, the main process's receiving, and a step's CPU where it has one
        (a step on the CPU, torch's threads on every core, takes the cores the workers load on)."""
        return self.worker_cpu_s + self.receive_s / max(self.machine.batch_size, 1) + self.step_cpu_s

    def cpu_per_sample(self) -> float:
        """The least CPU a sample costs here: with workers, or in a rank's own process (ranks > 1)."""
        with_workers = self.cpu_with_workers()
        return min(with_workers, self.single_cpu_s + self.step_cpu_s) if self.machine.ranks > 1 else with_workers

    def _cpu_from_runs(self) -> bool:
        """The CPU limit rests on the least CPU a sample cost in the sweep's runs with workers (none beats the cores
        over its own cost) when below the one-worker loop's, and where the runs load as that loop does also above it:
        read over seconds, where its second put two identical JPEG sweeps' bounds 9.6% apart.  A what-if: the lower."""
        if self.seen_cpu_s is None:
            return False
        m = self.machine
        loads_as_the_loop = not self.left_out and m.ranks == 1 and not (m.step_s_per_batch or m.copy_gb_per_s)
        return loads_as_the_loop or self.seen_cpu_s < self.cpu_per_sample()

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
        total = sum(s.cpu_s for s in stages) + self.step_cpu_s
        if not stages or total <= 0:
            return ""
        top = max(stages, key=lambda s: s.cpu_s)
        if self.step_cpu_s > top.cpu_s:  # a step on the CPU: the training's own work, not loading's
            return f"the training step ({100 * self.step_cpu_s / total:.0f}% of a sample's CPU here, on the CPU)"
        return f"{top.name} ({100 * top.cpu_s / total:.0f}% of a sample's CPU)"

    def one_process(self) -> Limit:
        """Loading without workers: one process fetches, transforms, collates (and copies and steps) in turn."""
        rate, ranks = self.predict(0), self.machine.ranks
        how = (f"without workers one process did {rate:,.0f} samples/s in the profile's DataLoader(num_workers=0) "
               f"loop ({1000 * self.single_wall_s:.4f} ms a sample)") if ranks == 1 else (
            f"without workers each of {ranks} ranks loads in its own process, on one thread as the profile's "
            f"DataLoader(num_workers=0) loop did ({1000 * self.rank_wall_s:.4f} ms a sample), the cores shared")
        return Limit("one process", rate, how,
                     "nothing: workers would cost more in passing batches between processes than they save here "
                     "(a heavier transform, or larger samples, would change that)")

    def ceiling(self) -> Limit:
        """The binding limit: the lowest that applies with workers, or one process when that is faster."""
        measured = [limit for limit in self.limits() if limit.rate and limit.applies]
        workers = min(measured, key=lambda limit: limit.rate)
        alone = self.one_process()
        if alone.rate <= workers.rate:
            return workers
        return dataclasses.replace(alone, lift=self._past_one_process(measured, alone.rate))

    def _past_one_process(self, measured: list[Limit], alone: float) -> str:
        """What lifts loading past one process: workers, once every limit that holds them rises above it.  Inside a
        1-core CPU quota the CIFAR-10 pipeline's workers cost 0.108 ms CPU a sample against 0.080 without them, so
        one process binds there; at about 1.3 cores they pass it (the host's 2 cores picked 2 workers).  Where the
        main process (or another limit cores do not move) holds the workers below one process, more cores cannot."""
        fixed = [limit for limit in measured if limit.name != "CPU" and limit.rate < alone]
        if fixed:
            holds = min(fixed, key=lambda limit: limit.rate)
            return (f"workers, once {holds.lift} ({holds.name} holds them at {holds.rate:,.0f} samples/s; "
                    "passing batches between processes costs more than it saves until then)")
        with_workers = self.machine.cores / next(limit.rate for limit in measured if limit.name == "CPU")
        # one process's own rate, or a whole core's where a quota held it to part of one
        single = max(alone, 1.0 / self.single_cpu_s)
        return (f"more cores: workers pay {1000 * with_workers:.4f} ms CPU a sample against "
                f"{1000 * self.single_cpu_s:.4f} ms in one process (passing batches between processes), so they "
                f"pass it from about {with_workers * single:.1f} usable cores")

    def uncertainty(self) -> float:
        """How far the binding limit may be off, at least the least (:data:`LIGHTER_UNCERTAINTY` without a stage):
        where runs' CPU per sample pins the CPU limit, how far repeats of one configuration read it apart; else twice
        how far the one-worker loop's halves (or without workers, that loop's halves) were apart."""
        binding = self.ceiling().name
        least = LIGHTER_UNCERTAINTY if self.lighter is not None else MIN_UNCERTAINTY
        if binding == "one process":
            spread = self.profile.single_spread
        elif binding == "CPU" and (self._cpu_from_runs() or (self.seen_cpu_s is not None and not self.left_out)):
            return max(least, self.machine.cpu_seen_spread)
        else:
            spread = self.lighter.spread if self.lighter is not None else self.profile.worker_cpu_spread
        return max(least, 2 * (spread or 0.0))

    def ceiling_range(self, seen: Optional[dict[str, float]] = None) -> CeilingRange:
        """At most the binding limit with its uncertainty, at least the best rate seen (``seen``: the sweep's runs,
        name -> samples/s; the profile's loops too where the run has no step or copy, else they meet loading's)."""
        limit, u = self.ceiling(), self.uncertainty()
        loops = {"the profile's loop without workers": 1.0 / self.single_wall_s}
        all_cores = f"the profile's loop with {self.profile.cores:g} workers"
        rates = self.lighter.all_cores_rate if self.lighter is not None else self.profile.all_cores_rate
        if rates and (self.lighter is not None or not self.left_out):
            loops[all_cores] = rates
        m, stream = self.machine, False
        high = limit.rate * (1 + u)
        # The all-cores loop lasts tenths of a second: past a bound within its thirds' spread is its noise
        surely = {**loops, all_cores: min(self.profile.all_cores_rates)} if all_cores in loops and \
            self.lighter is None and self.profile.all_cores_rates else loops
        if not m.step_s_per_batch and not m.copy_gb_per_s:  # the run loads as the profile's loops do
            where, best = max({**surely, **(seen or {})}.items(), key=lambda item: item[1])
            stream = m.restart_share >= RESTART_CPU_SHARE and where in surely and self._cpu_from_runs()
            failure = over_bound(where, best, limit, high, restarts=m.restart_share if stream else 0.0)
        else:  # the run steps or copies, the loops do not: they are held against what loading alone allows
            # the runs' CPU a sample holds their step's and copy's: not loading's
            loading = self.with_machine(step_s_per_batch=None, step_cpu_s_per_batch=None, copy_gb_per_s=None,
                                        cpu_s_per_sample_seen=None)
            where, best = max(surely.items(), key=lambda item: item[1])
            failure = over_bound(*max(surely.items(), key=lambda item: item[1]), (binding := loading.ceiling()),
                                 binding.rate * (1 + loading.uncertainty()))
            if seen:
                where, best = max(seen.items(), key=lambda item: item[1])
                failure = over_bound(where, best, limit, high) or failure
            else:  # nothing with the step was seen: at most the bound
                best = min(best, high)
        return CeilingRange(low=best, high=max(high, best), limit=limit, seen=where, uncertainty=u, failure=failure,
                            stream_past=bool(failure) and stream)

    def _serial_s_per_batch(self, workers: int) -> float:
        """What the main process does per batch, one thing after another."""
        m = self.machine
        copy = self.profile.sample_bytes * m.batch_size / (m.copy_gb_per_s * 1e9) if m.copy_gb_per_s else 0.0
        pin = (self.profile.pin_s_per_batch or 0.0) if m.pins else 0.0
        receive = self.receive_s if workers > 0 else 0.0
        return receive + pin + copy + (m.step_s_per_batch or 0.0)

    def _bounds_with_workers(self) -> list[float]:
        """The limits with workers, the CPU one at what the cores really did together (for predictions)."""
        found = [limit.rate for limit in self.limits() if limit.rate and limit.applies and limit.name != "CPU"]
        return [*found, self.cores / self.cpu_with_workers()]

    def predict(self, workers: int) -> float:
        """Samples/s with ``workers`` workers per rank (all ranks together)."""
        m, batch = self.machine, max(self.machine.batch_size, 1)
        serial = self._serial_s_per_batch(workers)
        if workers <= 0:  # one process does everything in turn: no batch passes between processes
            per_rank = 1.0 / ((self.rank_wall_s if m.ranks > 1 else self.single_wall_s) + serial / batch)
            storage = [limit.rate for limit in self.limits() if limit.name == "storage" and limit.rate and limit.applies]
            return m.moment * min([m.ranks * per_rank, self.cores / (self.single_cpu_s + self.step_cpu_s), *storage])
        bounds = [m.ranks * workers / self.worker_wall_s, *self._bounds_with_workers(),
                  m.ranks * batch / serial if serial > 0 else float("inf")]
        return m.moment * m.workers_moment * min(bounds)

    def knee(self, values: list[int], tolerance: float) -> int:
        """The fewest workers among ``values`` predicted within ``tolerance`` of the best of them."""
        best = max(self.predict(v) for v in values)
        return min(v for v in values if self.predict(v) >= (1 - tolerance) * best)
