"""A measuring process and its DataLoader workers, as a tree: killed together, described when stalled."""

from __future__ import annotations

import psutil


def family(pid: int) -> list[psutil.Process]:
    """A process and every descendant (its DataLoader workers), the process first; [] once it is gone."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (its DataLoader workers), and reap them."""
    processes = family(pid)
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=10)


def process_states(pid: int) -> str:
    """What the measuring process and each of its workers is doing: state, kernel wait, CPU time."""
    processes = family(pid)
    if not processes:
        return "the measuring process is gone"
    described = []
    for process in processes:
        try:
            role = "measuring process" if process.pid == pid else "worker"
            times = process.cpu_times()
            text = f"{role} {process.pid} {process.status()}"
            try:
                with open(f"/proc/{process.pid}/wchan") as f:
                    wchan = f.read().strip()
                text += f" in {wchan}" if wchan and wchan != "0" else ""
            except OSError:
                pass
            described.append(f"{text}, {times.user + times.system:.1f} s CPU in all")
        except psutil.NoSuchProcess:
            continue
    return "; ".join(described)
