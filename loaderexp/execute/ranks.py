"""Several ranks per node: ``dist.nproc_per_node`` processes loading at once, as DDP runs them.

On a node with 8 GPUs every training process starts its own ``num_workers`` workers, and they all
share the cores, page cache, memory bandwidth and /dev/shm: one process alone answers the wrong
question.  Here the ranks are started by torch's elastic launcher (the code ``torchrun`` runs),
each builds its dataset and a DataLoader over ``DistributedSampler(rank, world)`` with its own
workers (and, with GPUs, ``cuda:<local_rank>``), lines up with the others on a gloo barrier, and
measures with the same loop as a single process.  A rank that has finished its windows keeps
loading, unmeasured, until every rank has finished (an asynchronous barrier), so every window is
measured with all ranks loading.  The ranks' figures come back through the launcher and are
combined into one run's: the aggregate rate, the slowest rank's, the spread between ranks, and
the resources of all ranks and their workers.

A rank that raises, is killed or hangs fails the whole measurement: the launcher stops the
others (their workers follow their parent), and the error names the rank and its cause.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Union

from loaderexp.config.schema import Config, TargetNode
from loaderexp.execute.job import BuiltDataset, OnBatch, configured_dataset, measure, measure_job, quiet_torch_warnings
from loaderexp.execute.profiling import profile_for
from loaderexp.harness.records import Measurement, NodeMeasurement

LINGER_REPORT_EVERY = 8  # batches between heartbeats while a rank waits for the others


def measure_on_node(spec: Config, on_batch: Optional[OnBatch] = None, built: Optional[BuiltDataset] = None,
                    forked_from: tuple[int, ...] = (), profile: bool = False,
                    on_profile: Optional[Callable[[bool], None]] = None) -> Union[Measurement, NodeMeasurement]:
    """A job's measurement: in this process, or ``dist.nproc_per_node`` ranks loading at once; with
    ``profile``, the stage costs first (:func:`~loaderexp.execute.profiling.profile_for`), between
    ``on_profile(True)`` and ``on_profile(False)``."""
    stage_profile = None
    if profile and spec.bench.profile_s > 0:
        built = configured_dataset(spec) if built is None else built
        if on_profile is not None:
            on_profile(True)
        with quiet_torch_warnings():
            stage_profile = profile_for(spec, built.dataset)
        if on_profile is not None:
            on_profile(False)
    if spec.dist.nproc_per_node > 1:
        measured = measure_ranks(spec, on_batch)  # each rank builds its own dataset, as under torchrun
    else:
        measured = measure_job(spec, on_batch, built, forked_from)
    measured.profile = stage_profile
    return measured


class RankFailed(RuntimeError):
    """A rank raised, was killed or exited; the message names it and its cause."""


def core_shares(cores: list[int], ranks: int) -> list[list[int]]:
    """The usable cores split evenly between the ranks (in order, as launchers bind them); with more
    ranks than cores, each rank gets one, shared round-robin."""
    if ranks > len(cores):
        return [[cores[r % len(cores)]] for r in range(ranks)]
    share = len(cores) // ranks
    return [cores[r * share:(r + 1) * share] for r in range(ranks)]


def rank_sampler(dataset: Any, sampler: TargetNode, world: int, rank: int, seed: int) -> Any:
    """What one rank of a data-parallel job loads: its 1/world share (random: reshuffled with the seed)."""
    from torch.utils.data import DistributedSampler

    return DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=sampler.shuffles, seed=seed,
                              drop_last=sampler.drops_last)


class RankOutcome(NamedTuple):
    """What a rank hands back through the launcher."""

    measurement: Measurement
    share: list[int]  # its epoch-0 indices: the launcher checks that the shares cover the data
    cores: Optional[list[int]]
    pid: int
    threads: int  # torch's intra-op threads in the rank's own process (its workers use one each)


RANK_THREADS = "1"  # torchrun's OMP_NUM_THREADS for each rank when the environment sets none


def ranks_environment() -> dict[str, str]:
    """What torchrun sets for its ranks that the elastic launcher's API does not: ``OMP_NUM_THREADS=1`` unless the
    environment sets it.  Without it each rank's own process (its loop without workers, ToTensor, Normalize) runs
    torch's thread pool of one thread per core: two ranks at num_workers=0 on 2 cores did 229 samples/s on the JPEG
    folder, 10.5 ms CPU a sample, where with it they did 1,132 at 1.75 ms."""
    return {} if "OMP_NUM_THREADS" in os.environ else {"OMP_NUM_THREADS": RANK_THREADS}


def _rank_threads() -> int:
    """Take OMP_NUM_THREADS in the rank (a forked rank's torch read its parent's when it was imported), and say what
    torch's pool then is."""
    import torch

    wanted = os.environ.get("OMP_NUM_THREADS", "")
    if wanted.isdigit() and int(wanted) > 0:
        torch.set_num_threads(int(wanted))
    return torch.get_num_threads()


def _rank_device(device_type: str, local_rank: int) -> str:
    import torch

    if device_type == "cpu" or (device_type == "auto" and not torch.cuda.is_available()):
        return "cpu"
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise RuntimeError(f"rank {local_rank} has no GPU of its own: {count} visible, dist.nproc_per_node is more")
    return f"cuda:{local_rank}"


def rank_main(spec: Config, progress: Any, cores: Optional[list[int]]) -> RankOutcome:
    """One rank: set up, line up with the others, measure, keep loading until all have measured."""
    import torch.distributed as dist

    rank, local_rank, world = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    if cores:
        os.sched_setaffinity(0, cores)  # its workers inherit it
    # torchrun's ranks are fresh interpreters whose workers start the platform's default way; a rank
    # started by multiprocessing would otherwise pass its own start method (spawn) on to its workers.
    multiprocessing.set_start_method(multiprocessing.get_all_start_methods()[0], force=True)
    threads = _rank_threads()
    # On an error the group is left open, not destroyed: closing it would fail the other ranks first
    # ("connection closed by peer") and could make them look like the cause; the launcher stops them.
    dist.init_process_group("gloo")
    device = _rank_device(spec.device.type.value, local_rank)
    built = configured_dataset(spec)
    sampler = rank_sampler(built.dataset, spec.sampler, world, rank, spec.bench.seed)
    share = list(sampler)
    count = [0]

    def heartbeat(done: int, total: Optional[int]) -> None:
        count[0] = done
        progress.put((rank, done, total))

    def linger(loader: Any) -> None:
        """Load on, unmeasured, until every rank has measured: no rank measures with fewer loading."""
        everyone = dist.barrier(async_op=True)
        while not everyone.is_completed():
            for seen, _ in enumerate(loader, 1):
                if seen % LINGER_REPORT_EVERY == 0:
                    count[0] += LINGER_REPORT_EVERY
                    progress.put((rank, count[0], None))
                    if everyone.is_completed():
                        break
        everyone.wait()

    dist.barrier()  # every rank built its dataset: start loading together
    with quiet_torch_warnings():
        measured = measure(spec, heartbeat, built, sampler=sampler, after_windows=linger, device=device)
    dist.destroy_process_group()
    return RankOutcome(measured, share, cores, os.getpid(), threads)


def measure_ranks(spec: Config, on_batch: Optional[OnBatch] = None) -> NodeMeasurement:
    """Start ``dist.nproc_per_node`` ranks with torch's elastic launcher and combine their figures."""
    import torch.multiprocessing as mp
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    ranks = spec.dist.nproc_per_node
    start_method = spec.dist.start_method.value
    # The launcher logs each failure at length; the run's error says it once, in a line.
    for name in ("torch.distributed.elastic", "torch.distributed.launcher", "torch.multiprocessing"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    cores = sorted(os.sched_getaffinity(0))
    shares = core_shares(cores, ranks) if spec.dist.cpu_affinity else [None] * ranks
    progress = mp.get_context(start_method).SimpleQueue()
    launch = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=ranks, run_id=f"loaderexp-{os.getpid()}",
                          rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", max_restarts=0, monitor_interval=0.1,
                          start_method=start_method)
    stop = threading.Event()
    forwarder = threading.Thread(target=_forward, args=(progress, ranks, on_batch, stop), daemon=True)
    forwarder.start()
    added = ranks_environment()  # spawned ranks inherit it; a forked one takes it in _rank_threads
    os.environ.update(added)
    try:
        # Each rank needs its own core share: the launcher passes the same arguments to all, so the
        # shares travel as one list and a rank picks its own by LOCAL_RANK.
        returned = elastic_launch(launch, _rank_entry)(spec, progress, shares)
    except ChildFailedError as error:
        raise RankFailed(_failure_text(error)) from None
    finally:
        for name in added:
            os.environ.pop(name, None)
        stop.set()
        forwarder.join(timeout=5)
    outcomes = [returned[r] for r in sorted(returned)]
    length = outcomes[0].measurement.facts.dataset_length
    problems, padding = _check_shares([o.share for o in outcomes], length)
    return NodeMeasurement(ranks=[o.measurement for o in outcomes], start_method=start_method,
                           cores=[o.cores for o in outcomes] if spec.dist.cpu_affinity else None,
                           share_problems=problems, padding=padding, threads=[o.threads for o in outcomes])


def _rank_entry(spec: Config, progress: Any, shares: list[Optional[list[int]]]) -> RankOutcome:
    from torch.distributed.elastic.multiprocessing.errors import record

    return record(rank_main)(spec, progress, shares[int(os.environ["LOCAL_RANK"])])


def _forward(progress: Any, ranks: int, on_batch: Optional[OnBatch], stop: threading.Event) -> None:
    """Heartbeats to the job's watcher: only when every rank has moved, so one hung rank is a stall."""
    counts = [0] * ranks
    total: Optional[int] = None
    reported = 0
    while not stop.is_set():
        if progress.empty():
            time.sleep(0.05)
            continue
        rank, done, rank_total = progress.get()
        counts[rank] = done
        total = rank_total if rank == 0 and rank_total is not None else total
        if on_batch is not None and min(counts) > reported:
            reported = min(counts)
            on_batch(reported, total)


# What a rank reports when another one died first: the consequence, not the cause.
CONSEQUENCES = ("Connection closed by peer", "remote worker crashing", "Connection reset by peer", "Broken pipe")


def _is_consequence(failure: Any) -> bool:
    text = str(failure.message)
    if any(words in text for words in CONSEQUENCES):
        return True
    recorded = isinstance(failure.message, dict)  # the rank's own exception, written before it was stopped
    return failure.exitcode == -signal.SIGTERM and not recorded


def _failure_text(error: Any) -> str:
    """The rank that failed first and why: its exception, or the signal or exit code that ended it.
    Timestamps are whole seconds, so a rank that only lost its peer (gloo's "connection closed",
    or the launcher's SIGTERM) never counts as the cause when another failed of its own."""
    rank, failure = min(error.failures.items(),
                        key=lambda item: (_is_consequence(item[1]), item[1].timestamp, item[0]))
    message = failure.message
    if isinstance(message, dict):  # the rank's exception, recorded by @record
        message = message.get("message", str(message))
    if failure.exitcode < 0:
        message = f"killed by signal {-failure.exitcode}" + (f" ({message})" if message else "")
    lines = [line for line in (message or f"exit code {failure.exitcode}").splitlines() if line.strip()]
    # A worker's error comes with its traceback: the first line and the exception itself lead.
    headline = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1].strip()}"
    return f"rank {rank} (pid {failure.pid}) failed: {headline}" + ("\n" + "\n".join(lines) if len(lines) > 1 else "")


def _check_shares(shares: list[list[int]], length: Optional[int]) -> tuple[list[str], int]:
    """Do the ranks' epoch-0 shares cover every sample, and only the padding twice?"""
    total = sum(len(s) for s in shares)
    if not length:
        return [], 0
    union = set().union(*map(set, shares))
    problems = []
    if len(union) != length or min(union, default=0) < 0 or max(union, default=0) >= length:
        problems.append(f"the ranks' shares cover {len(union)} distinct samples of {length}")
    padding = total - length
    if padding < 0 or padding >= len(shares):
        problems.append(f"the ranks' shares hold {total} indices for {length} samples and {len(shares)} ranks")
    return problems, max(padding, 0)
