"""A throwaway one-node SLURM cluster on this machine (Debian's `slurm-wlm` and `munge`), run as root.

Everything lives in one temporary folder: its own munge key and socket, a slurm.conf naming this
host as controller and only node, state and spool folders, logs.  Clients find it through
``SLURM_CONF``, which the yielded environment sets.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from benchmarks.common import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch")


def available() -> str:
    """Why this machine cannot run the cluster, or '' when it can."""
    missing = [d for d in DAEMONS if not shutil.which(d, path=os.environ.get("PATH", "") + ":/usr/sbin")]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)"
    return "" if os.geteuid() == 0 else "slurmd runs as root"


def _slurm_conf(folder: Path, host: str, munge_socket: Path) -> str:
    cpus = os.cpu_count() or 1
    import psutil

    memory_mb = int(psutil.virtual_memory().total / 2**20 * 0.9)
    return f"""\
ClusterName=loaderexp-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def one_node_cluster() -> Iterator[dict[str, str]]:
    """Yields the environment SLURM's commands (and so submitit) need to reach the cluster."""
    folder = Path(tempfile.mkdtemp(prefix="loaderexp-slurm-"))
    host = socket.gethostname()
    munge_socket = folder / "munge.socket"
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    conf = folder / "slurm.conf"
    conf.write_text(_slurm_conf(folder, host, munge_socket))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    sbin = lambda name: shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin")  # noqa: E731
    daemons: list[subprocess.Popen] = []
    try:
        subprocess.run([sbin("munged"), "--force", f"--socket={munge_socket}", f"--key-file={key}",
                        f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                        f"--seed-file={folder}/munged.seed"], check=True, capture_output=True, timeout=60)
        for daemon in ("slurmctld", "slurmd"):  # in the foreground (-D), so the test owns and stops them
            daemons.append(subprocess.Popen([sbin(daemon), "-D", "-f", str(conf)], env=env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while True:
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout.strip()
            if state in ("idle", "mix", "alloc"):
                break
            if time.monotonic() > deadline:
                logs = "\n".join((folder / f"{d}.log").read_text()[-2000:] for d in ("slurmctld", "slurmd")
                                 if (folder / f"{d}.log").exists())
                raise RuntimeError(f"the SLURM node did not come up (sinfo: {state!r})\n{logs}")
            time.sleep(0.5)
        yield {"SLURM_CONF": str(conf)}
    finally:
        for process in daemons:
            process.terminate()
        for process in daemons:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        pid_file = folder / "munged.pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().strip()), 15)
        shutil.rmtree(folder, ignore_errors=True)
