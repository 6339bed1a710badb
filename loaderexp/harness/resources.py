"""CPU and memory of the whole process tree (main process and its loader workers), sampled.

The tree's memory is counted as a training script's would be (:mod:`.footprint`), each reading
kept with how many samples the loader had delivered (what an epoch's memory is made from,
:mod:`.memory`); USS is the pages only the tree's processes hold.  /dev/shm is where workers hand
batches to the parent.

Reading a process's memory map is not free (~3 ms for a process with torch loaded, ~15 ms with
its CUDA libraries mapped), and while the kernel walks the map it holds the process's mmap lock,
which the loop's own allocations need: so memory is read at most 0.2% of the time, and when the
loop asks between windows; CPU every interval.

CPU is the tree's CPU seconds per interval, from each process's own times: a worker born since
the last sample counts all it used since birth (psutil's ``cpu_percent`` reads 0 on its first call,
which under-reports short repeats that start new workers).  With a GPU, its utilisation and
memory are sampled too, through NVML (``pip install nvidia-ml-py``, torch's own readers).
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from typing import Callable, Optional

import psutil

from loaderexp.harness.footprint import MB, footprint
from loaderexp.harness.host_load import CpuAccount, HostLoad
from loaderexp.harness.records import MemorySample, ResourceStats

SHM = "/dev/shm"
MEMORY_DUTY_CYCLE = 0.002  # at most this share of the time spent reading memory maps


def shm_used_bytes() -> int | None:
    if not os.path.isdir(SHM):
        return None
    usage = shutil.disk_usage(SHM)
    return usage.used


def shm_free_bytes() -> int | None:
    if not os.path.isdir(SHM):
        return None
    return shutil.disk_usage(SHM).free


def descendants(pid: int) -> list[int]:
    """Child pids, recursively, from /proc/<pid>/task/*/children (a few reads, not a scan of
    every process on the machine as psutil's children() does, holding the GIL meanwhile)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        children = []
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)] if psutil.pid_exists(pid) else []
    except (ProcessLookupError, PermissionError, OSError):
        return []
    for child in children:
        found += [child, *descendants(child)]
    return found


class ResourceMonitor:
    """Samples the tree every ``interval_s`` on a daemon thread between ``start`` and ``stop``."""

    def __init__(self, interval_s: float = 0.25, pid: int | None = None, gpu_index: int | None = None,
                 forked_from: tuple[int, ...] = (), samples_read: Optional[Callable[[], int]] = None,
                 harness_bytes: Optional[Callable[[], int]] = None, load_root: Optional[int] = None):
        self.interval_s = interval_s
        self.root = psutil.Process(pid or os.getpid())
        # The processes the root was forked from after importing torch or building the dataset
        # (loaderexp's fork server, the dataset holder).  A training script is one process that
        # imported and built everything itself: the tree's memory gets their share of the pages they
        # still share with it (their PSS less their USS), but not their private pages, which are the
        # originals of what the tree has since copied (a script holds those once, not twice).
        self._forked_from = [psutil.Process(pid) for pid in forked_from]
        self._samples_read = samples_read or (lambda: 0)
        # What loaderexp itself holds in the root (its delivery logs): not the training script's memory.
        self._harness_bytes = harness_bytes or (lambda: 0)
        self._trace: list[MemorySample] = []
        self._known: dict[int, psutil.Process] = {}
        self._account = CpuAccount()
        # What the rest of the host uses meanwhile; a rank counts its launcher's whole tree (all the ranks) as ours.
        self._load_root = psutil.Process(load_root) if load_root else None
        self._load = HostLoad(self._load_root or self.root)
        self._last_sample = 0.0
        self._gpu = gpu_index
        self._gpu_util: list[float] = []
        self._gpu_memory = 0
        self._gpu_note = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the sampling thread and sample_now() share the tree's state
        self._thread: threading.Thread | None = None
        self._cpu: list[float] = []
        self._cpu_marks: list[tuple[int, float]] = []  # (samples delivered, the tree's CPU so far) at each reading
        self._edges: list[tuple[int, float, bool]] = []  # (samples, CPU, opening) where the windows opened, closed
        self._cpu_total = 0.0
        self._unreported = 0.0  # the tree's CPU read at window edges since the last regular reading
        self._edge_since_reading = False  # the windows opened or closed since the last regular reading
        self._pss = self._uss = 0.0
        self._processes = 0
        self._shm_base = shm_used_bytes()
        self._shm_peak = 0
        self._next_memory = 0.0

    def __enter__(self) -> "ResourceMonitor":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._sample(first=True)
        self._thread = threading.Thread(target=self._loop, name="loaderexp-resources", daemon=True)
        self._thread.start()

    def stop(self) -> ResourceStats:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._sample()
        return self.stats()

    def stats(self) -> ResourceStats:
        cpu = self._cpu or [0.0]
        return ResourceStats(
            samples=len(self._cpu),
            cpu_percent_mean=round(sum(cpu) / len(cpu), 1),
            cpu_percent_peak=round(max(cpu), 1),
            pss_peak_mb=round(self._pss / 2**20, 1),
            uss_peak_mb=round(self._uss / 2**20, 1),
            processes_peak=self._processes,
            shm_peak_mb=None if self._shm_base is None else round(self._shm_peak / 2**20, 1),
            memory=list(self._trace),
            gpu_util_percent_mean=round(sum(self._gpu_util) / len(self._gpu_util), 1) if self._gpu_util else None,
            gpu_memory_used_peak_mb=round(self._gpu_memory / 2**20, 1) if self._gpu_util else None,
            gpu_note=self._gpu_note,
            host_load=self._load.record(),
            cpu_s_per_sample=self._cpu_per_sample(),
        )

    def _cpu_per_sample(self) -> Optional[float]:
        """The tree's CPU per sample delivered in the measured windows (:meth:`window_edge` marks them): all
        their CPU over all their samples, so the cost the window rates are held against.  Without marks (a loop
        without the memory probe; whole epochs' streams, which end at the epoch, not at a close), the median over
        the readings' intervals while it delivered steadily: after the first that saw a batch (the workers' start
        and imports are before it) and before the last (their exit).  A 0.5 s interval holds whole batches, a few
        (a JPEG batch is 40 ms of it): its ratio is off by a batch either way, and the windows' one ratio is not."""
        spans = [(open_, close) for open_, close in zip(self._edges, self._edges[1:]) if open_[2] and not close[2]]
        samples = sum(close[0] - open_[0] for open_, close in spans)
        if samples > 0:
            return sum(close[1] - open_[1] for open_, close in spans) / samples
        marks = self._cpu_marks
        delivering = [i for i, (samples, _) in enumerate(marks) if samples > 0]
        if len(delivering) >= 4:
            steady = marks[delivering[0]:-1]
            costs = [(cpu_b - cpu_a) / (b - a) for (a, cpu_a), (b, cpu_b) in zip(steady, steady[1:]) if b > a]
            if len(costs) >= 2:
                return statistics.median(costs)
        if not marks or marks[-1][0] <= marks[0][0]:
            return None
        return (marks[-1][1] - marks[0][1]) / (marks[-1][0] - marks[0][0])

    def window_edge(self, opening: bool) -> None:
        """A CPU reading where the measured windows open or close (the loop's memory probe calls it, outside
        them): the run's CPU per sample is the windows' own (an opening without its close, as whole epochs'
        streams end at the epoch, spans nothing).  Only the tree's CPU is read; it is handed to the next
        regular reading, whose interval stays whole (a reading a few ms long would make its CPU and the others'
        load a rate of clock ticks: CI read 0.4 cores of "others" from them)."""
        with self._lock:
            used = self._account.used(self._tree())
            self._unreported += used
            self._cpu_total += used
            self._edges.append((self._samples_read(), self._cpu_total, opening))
            self._edge_since_reading = True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                self._sample()

    def _tree(self) -> list[psutil.Process]:
        try:
            current = [self.root, *(psutil.Process(pid) for pid in descendants(self.root.pid))]
        except psutil.NoSuchProcess:
            return []
        # cpu_percent() measures since the previous call on the same object: keep them.
        tree = [self._known.setdefault(p.pid, p) for p in current]
        alive = {p.pid for p in tree}
        self._known = {pid: p for pid, p in self._known.items() if pid in alive}
        return tree

    def _sample(self, first: bool = False) -> None:
        now = time.time()
        tree = self._tree()
        fresh = self._account.used(tree, first)
        used, self._unreported = fresh + self._unreported, 0.0  # the interval's, window edges' readings included
        windows_open = bool(self._edges) and self._edges[-1][2]
        self._load.sample(*self._load_share(used, tree), first, windows_open or self._edge_since_reading)
        self._edge_since_reading = False
        if not first and now > self._last_sample:
            self._cpu.append(100.0 * used / (now - self._last_sample))
        self._cpu_total += 0.0 if first else fresh
        self._cpu_marks.append((self._samples_read(), self._cpu_total))
        self._last_sample = now
        if self._gpu is not None:
            self._sample_gpu()
        clock = time.perf_counter()
        if first or clock >= self._next_memory or self._stop.is_set():
            self._sample_memory(tree)
            cost = time.perf_counter() - clock
            self._next_memory = clock + max(self.interval_s, cost / MEMORY_DUTY_CYCLE)
        self._processes = max(self._processes, len(tree))

    def _load_share(self, used: float, tree: list[psutil.Process]) -> tuple[float, list[psutil.Process]]:
        """(CPU already counted, processes still to count) of loaderexp's own: the tree's CPU is counted once;
        a rank counts its launcher's whole tree (all the ranks) instead."""
        if self._load_root is None:
            return used, []
        try:
            return 0.0, [self._load_root, *(psutil.Process(pid) for pid in descendants(self._load_root.pid))]
        except psutil.NoSuchProcess:
            return used, []

    def _sample_gpu(self) -> None:
        import torch

        try:
            self._gpu_util.append(float(torch.cuda.utilization(self._gpu)))
            self._gpu_memory = max(self._gpu_memory, torch.cuda.device_memory_used(self._gpu))
        except Exception as error:  # no NVML bindings, or a driver without the query: say so once
            self._gpu_note = f"GPU utilisation not measured ({str(error).splitlines()[0]}); pip install nvidia-ml-py"
            self._gpu = None

    @property
    def trace(self) -> list[MemorySample]:
        return self._trace

    @property
    def cpu_s(self) -> float:
        """CPU seconds the watched tree used between the first reading and the last."""
        return self._cpu_total

    def samples_read(self) -> int:
        """Samples the loader has delivered so far."""
        return self._samples_read()

    def sample_now(self) -> None:
        """A memory reading now (the loop asks between windows, where it costs nothing measured)."""
        with self._lock:
            self._sample_memory(self._tree())

    def _sample_memory(self, tree: list[psutil.Process]) -> None:
        samples = self._samples_read()
        if not tree:
            return
        held = footprint(tree[0], tree[1:], self._forked_from)
        total = max(held.total - self._harness_bytes(), 0)
        self._trace.append(MemorySample(samples=samples, time=time.monotonic(), total_mb=round(total / MB, 2),
                                        workers_mb={pid: round(b / MB, 2) for pid, b in held.workers.items()}))
        self._pss = max(self._pss, total)
        self._uss = max(self._uss, held.uss)
        shm = shm_used_bytes()
        if shm is not None and self._shm_base is not None:
            self._shm_peak = max(self._shm_peak, shm - self._shm_base)
