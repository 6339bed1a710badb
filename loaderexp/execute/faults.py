"""What went wrong in a run, in words a user can act on: known failures, their causes and remedies."""

from __future__ import annotations

import re
import signal
from typing import Optional

REMEDIES: list[tuple[re.Pattern, str, str]] = [
    (re.compile(r"Bus error|SIGBUS", re.I), "shared memory exhausted",
     "workers hand batches to the main process through /dev/shm and it ran out: enlarge it (docker run "
     "--shm-size=8g, or mount -o remount,size=8G /dev/shm), or call "
     "torch.multiprocessing.set_sharing_strategy('file_system'); fewer workers, a smaller prefetch_factor or "
     "batch_size also help"),
    (re.compile(r"signal: Killed|SIGKILL", re.I), "killed (out of memory?)",
     "the kernel's OOM killer ends the largest process when memory runs out: use fewer workers or a smaller "
     "batch_size or prefetch_factor (the report's PSS column shows what each configuration holds)"),
    (re.compile(r"Segmentation fault|SIGSEGV", re.I), "segmentation fault",
     "native code crashed (a decoder, a C extension, or a library that is not safe after fork): try "
     "loader.multiprocessing_context=spawn, or num_workers=0 to get a Python traceback"),
    (re.compile(r"Too many open files|EMFILE|Errno 24", re.I), "too many open files",
     "each worker batch holds file descriptors: raise the limit (ulimit -n 65536) or call "
     "torch.multiprocessing.set_sharing_strategy('file_system')"),
    (re.compile(r"timed out|wall-clock limit|max_run_seconds|stalled", re.I), "hang",
     "a worker or the dataset stopped delivering: look for a deadlock or a blocking call in __getitem__ (the "
     "processes' states above say where each waited); loader.timeout makes the DataLoader raise instead of "
     "waiting, bench.stall_s and bench.job_timeout_s bound how long loaderexp waits"),
    (re.compile(r"default_collate: batch must contain .*PIL", re.I), "PIL images reach the collate function",
     "the dataset returns PIL images and no transform turns them into tensors: set transform=to_tensor (or "
     "transform=auto for the dataset's usual one), or give loader.collate_fn a function that batches them"),
    (re.compile(r"exited unexpectedly", re.I), "worker died",
     "a loader worker ended without an error of its own: look above for a signal, or rerun with num_workers=0"),
]


def explain(text: str) -> Optional[tuple[str, str]]:
    """``(cause, remedy)`` for a known failure, else None."""
    for pattern, cause, remedy in REMEDIES:
        if pattern.search(text):
            return cause, remedy
    return None


def interrupted_by(interrupt: KeyboardInterrupt) -> str:
    """Ctrl-C, or the signal the entry point turned into KeyboardInterrupt ("signal 1": SIGHUP)."""
    words = str(interrupt).split()
    if len(words) == 2 and words[0] == "signal" and words[1].isdigit():
        try:
            return signal.Signals(int(words[1])).name
        except ValueError:
            return str(interrupt)
    return "Ctrl-C"
