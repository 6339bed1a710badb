"""A throwaway PostgreSQL cluster for a test (Debian's `postgresql` package; .ci/run installs it)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Optional

from benchmarks.common import free_port


def postgres_bin() -> Optional[Path]:
    """The folder of initdb and pg_ctl: on PATH, or where Debian puts them."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


@contextlib.contextmanager
def postgres_database(name: str = "mlflow") -> Iterator[str]:
    """A cluster on a free loopback port with one database; yields its SQLAlchemy URI (no password:
    trust authentication on loopback, for the test's lifetime only)."""
    bindir = postgres_bin()
    assert bindir is not None, "PostgreSQL is not installed (apt-get install postgresql)"
    folder = Path(tempfile.mkdtemp(prefix="loaderexp-pg-"))  # under /tmp: the postgres user can reach it
    as_root = os.geteuid() == 0  # PostgreSQL refuses to run as root: its own user runs it
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", free_port()

    def pg(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)

    pg(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust")
    pg(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "start",
       "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1")
    try:
        pg(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", name)
        # psycopg2: SQLAlchemy 2's plain postgresql:// wants psycopg 3.
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{name}"
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
