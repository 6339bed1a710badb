"""How many workers a run can use, checked once the dataset is built and before any worker starts.

Past the epoch's batches a worker never gets one (warned: the warm-up and the rounds are sized to the
epoch); far past them, or past what the memory holds, a count is refused with the reason instead of
starting hundreds of processes for minutes (``loader.num_workers=512`` on 2 cores took 74 s).
"""

from __future__ import annotations

from typing import Optional

from loaderexp.config import ConfigError
from loaderexp.config.schema import LoaderConfig

FAR_PAST_EPOCH = 2  # workers beyond this many times an epoch's batches are refused: most would never get one
# The least memory a DataLoader worker holds of its own once it has made its first batches: what its fork
# copies (page tables, the interpreter's touched pages), before anything of the dataset's.  Measured: 10.5-10.8 MB
# of USS per forked worker after 40 batches of a tensor dataset (torch 2.14, Python 3.11, x86-64).
WORKER_FLOOR_MB = 10.0


def idle_workers_warning(loader: LoaderConfig, batches_per_epoch: Optional[int]) -> list[str]:
    if not batches_per_epoch or loader.num_workers <= batches_per_epoch:
        return []
    return [f"loader.num_workers={loader.num_workers} for {batches_per_epoch} batches an epoch: at most "
            f"{batches_per_epoch} workers get a batch, the others only start and stop; the warm-up and the "
            "windows' rounds are sized to the epoch"]


def refused_worker_count(loader: LoaderConfig, batches_per_epoch: Optional[int], usable_mb: Optional[float],
                         ranks: int = 1) -> list[str]:
    """Why ``loader.num_workers`` cannot be measured here: far past the epoch's batches, or more worker
    processes than the usable memory holds at the least a worker takes."""
    workers, problems = loader.num_workers, []
    if batches_per_epoch and workers > FAR_PAST_EPOCH * batches_per_epoch:
        problems.append(f"loader.num_workers={workers}: an epoch has {batches_per_epoch} batches, so at most "
                        f"{batches_per_epoch} workers ever get one and the other {workers - batches_per_epoch} would "
                        f"only start and stop; use at most {batches_per_epoch} (or smaller batches)")
    least = workers * ranks * WORKER_FLOOR_MB
    if usable_mb and least > usable_mb:
        problems.append(f"loader.num_workers={workers}" + (f" x {ranks} ranks" if ranks > 1 else "") +
                        f": {workers * ranks} worker processes hold at least {least:,.0f} MB ({WORKER_FLOOR_MB:g} MB "
                        f"each before any data), more than the {usable_mb:,.0f} MB this job may use")
    return problems


def check_worker_count(loader: LoaderConfig, batches_per_epoch: Optional[int], usable_mb: Optional[float],
                       ranks: int = 1) -> None:
    problems = refused_worker_count(loader, batches_per_epoch, usable_mb, ranks)
    if problems:
        raise ConfigError(problems)
