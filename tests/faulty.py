"""Deliberately broken datasets for the fault-injection tests (importable by workers)."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import time

import torch
from torch.utils.data import get_worker_info

from loaderexp.data.synthetic import SyntheticImages

BROKEN_INDEX = 5


class _Broken(SyntheticImages):
    def __getitem__(self, index):
        if index == BROKEN_INDEX:
            self.fail()
        return super().__getitem__(index)

    def fail(self) -> None:
        raise NotImplementedError


class Raising(_Broken):
    def fail(self):
        raise ValueError(f"broken sample {BROKEN_INDEX} (worker {getattr(get_worker_info(), 'id', None)})")


class BusError(_Broken):
    """What a worker sees when /dev/shm is full: SIGBUS."""

    def fail(self):
        os.kill(os.getpid(), signal.SIGBUS)


class OomKilled(_Broken):
    """What the OOM killer does: SIGKILL."""

    def fail(self):
        os.kill(os.getpid(), signal.SIGKILL)


class Segfault(_Broken):
    def fail(self):
        ctypes.string_at(0)


class HangsInC(_Broken):
    """Blocks in C code (libc sleep): no Python-level timeout can interrupt it."""

    def fail(self):
        ctypes.CDLL(None).sleep(3600)


class TooManyFiles(_Broken):
    def fail(self):
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


class StallsAfter(SyntheticImages):
    """Delivers a few dozen samples per worker, then sleeps for good (a stall in Python, not C)."""

    def __getitem__(self, index):
        self.fetched = getattr(self, "fetched", 0) + 1
        if self.fetched > 80:
            time.sleep(10**6)
        return super().__getitem__(index)


def dict_collate(samples):
    """A collate function whose batch starts with a scalar field, as a user's may."""
    from torch.utils.data import default_collate

    images, labels = default_collate(samples)
    return {"epoch": torch.tensor(0), "images": images, "labels": labels}


def failing_worker_init(worker_id: int) -> None:
    raise RuntimeError(f"worker_init_fn ran in worker {worker_id}")


class Stateful(SyntheticImages):
    """Says, in ``log``, in which process it was built and how many items it had served when a
    process first read from it: a measuring process must find it as built, whatever a job before did."""

    def __init__(self, log: str, **kwargs):
        super().__init__(**kwargs)
        self.log, self.served, self.reader = log, 0, os.getpid()
        self._write(f"built {os.getpid()}")

    def __getitem__(self, index):
        if os.getpid() != self.reader:
            self.reader = os.getpid()
            self._write(f"read {os.getpid()} after {self.served}")
        self.served += 1
        return super().__getitem__(index)

    def _write(self, line: str) -> None:
        with open(self.log, "a") as f:
            f.write(line + "\n")


class _RankOne(SyntheticImages):
    """Fails in rank 1 of a multi-rank job only (its workers see the same RANK)."""

    def __getitem__(self, index):
        if os.environ.get("RANK") == "1":
            self.fail()
        return super().__getitem__(index)


class RankOneRaises(_RankOne):
    def fail(self):
        raise ValueError("rank 1 cannot read its samples")


class RankOneKilled(_RankOne):
    def fail(self):
        os.kill(os.getpid(), signal.SIGKILL)


class RankOneHangs(_RankOne):
    def fail(self):
        ctypes.CDLL(None).sleep(3600)


class SlowToBuild(SyntheticImages):
    """A dataset whose constructor takes ``build_s`` seconds (a big index read at start-up, say)."""

    def __init__(self, build_s: float = 3.0, **kwargs):
        time.sleep(build_s)
        super().__init__(**kwargs)


class Heavy(SyntheticImages):
    """Carries 48 MB besides its samples: what each spawned worker unpickles before its first batch."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ballast = bytes(48 * 2**20)


class SerialDriftingSleep(torch.utils.data.Dataset):
    """Samples served one at a time across every process (a lock on ``lock``), each a sleep that grows with
    the wall clock since ``start``: the true rate is the same at any worker count, and falls as time passes,
    so jobs measured one after another rank the drift, not the setting."""

    def __init__(self, lock: str, start: float, sleep_ms: float = 2.0, growth_per_s: float = 0.05,
                 num_samples: int = 100_000):
        self.lock, self.start, self.sleep_s, self.growth = lock, start, sleep_ms / 1000, growth_per_s
        self.num_samples = num_samples

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> torch.Tensor:
        import fcntl

        with open(self.lock, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            time.sleep(self.sleep_s * (1 + self.growth * max(time.time() - self.start, 0.0)))
        return torch.full((4,), float(index))


class DiskFiller(SyntheticImages):
    """Synthetic images whose constructor fills the filesystem at ``fill`` (a small tmpfs a test mounted): the
    disk is full from then on, while the job measures and after."""

    def __init__(self, fill: str, **kwargs):
        super().__init__(**kwargs)
        with open(os.path.join(fill, "filler"), "ab", buffering=0) as f:
            for size in (65536, 4096, 1):  # to the last byte: a log line must not fit either
                try:
                    while True:
                        f.write(b"\0" * size)
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
