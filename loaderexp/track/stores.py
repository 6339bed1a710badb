"""The MLflow store a run logs to: checked before anything is measured, opened once per process.

A sqlite file is checked by creating (or opening) it and a file beside it: a folder that exists but
cannot be written (``sqlite:////proc/x.db``) would otherwise have MLflow retry for minutes while the
job measures unlogged.  A fresh sqlite file is created by MLflow's schema migrations, which two
processes running at once corrupt ("table params already exists", or half-applied migrations):
opening one takes a lock beside the file, so a second sweep waits for the first to finish them.
A server is asked for something real, with the credentials MLflow takes from the environment, and
never in the URI (:func:`refuse_credentials_in_uri`).
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse, urlsplit

from loaderexp.config.schema import TrackingConfig
from loaderexp.result import redact_uri, uri_secrets
from loaderexp.execute.interrupts import HeldCalls


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be reached or opened."""


def local_path(uri: str) -> Optional[Path]:
    """The file (sqlite) or folder (file:) a local store lives in; None for a server."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None
    if parsed.scheme in ("file", ""):
        return Path(parsed.path or uri)
    return None


@functools.lru_cache(maxsize=None)
def client(uri: str) -> HeldCalls:
    """The store's client, opened once per process; an interrupt never cuts one of its calls in half."""
    return HeldCalls(_opened(uri))


def _opened(uri: str):
    from mlflow.tracking import MlflowClient

    # A new store's schema migrations log a few INFO lines each sweep would print: not news.
    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)
    path = local_path(uri)
    if not uri.startswith("sqlite") or path is None:
        return MlflowClient(tracking_uri=uri)
    with open_lock(path.with_name(f".{path.name}.lock")) as _:
        _seed(path)
        opened = MlflowClient(tracking_uri=uri)
        opened.search_experiments(max_results=1)  # the store (and a fresh file's schema) is made here
    return opened


def _seed(path: Path) -> None:
    """A new sqlite store as a copy of an empty one this MLflow version already migrated (its ~40 schema
    migrations take 2-3 s, paid once per user instead of once per store).  The copy holds no experiment:
    MLflow adds its Default one, with this store's artifact root, when it opens it.  Best effort: where the
    copy cannot be made, MLflow migrates the new file itself."""
    try:
        if path.exists() and path.stat().st_size > 0:
            return
        template = _template()
        if template is None:
            return
        fd, staged = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out, open(template, "rb") as src:
                shutil.copyfileobj(src, out)
                os.fchmod(out.fileno(), _new_file_mode(path))  # as MLflow would have made it, not mkstemp's 0600
            os.replace(staged, path)
        except BaseException:
            os.unlink(staged)
            raise
    except (OSError, sqlite3.Error):
        return


def _new_file_mode(path: Path) -> int:
    if path.exists():
        return stat.S_IMODE(path.stat().st_mode)
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _template() -> Optional[Path]:
    """The migrated empty store of this MLflow version, in the user's private folder (made once, atomically)."""
    import mlflow

    from loaderexp.execute.host_lock import HostLockError, private_folder

    try:
        folder = Path(private_folder())
    except HostLockError:
        return None
    template = folder / f"mlflow-{mlflow.__version__}-empty.db"
    if template.is_file() and not template.is_symlink():
        return template
    fd, staged = tempfile.mkstemp(prefix=".mlflow-empty-", suffix=".db", dir=folder)
    os.close(fd)
    try:
        from mlflow.tracking import MlflowClient

        store = MlflowClient(tracking_uri=f"sqlite:///{staged}")
        store.search_experiments(max_results=1)  # the migrations run here
        with closing(sqlite3.connect(staged)) as db, db:
            db.execute("DELETE FROM experiments")  # the Default experiment, made with this folder's root
        os.replace(staged, template)
    finally:
        if os.path.exists(staged):
            os.unlink(staged)
    return template


class open_lock:
    """An exclusive flock on ``path`` (created empty if missing, never followed through a link)."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)

    def __enter__(self) -> "open_lock":
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)  # the lock goes with the descriptor


def check_reachable(uri: str) -> None:
    """Fail up front, with the URI in the message, when the store cannot be used."""
    parsed = urlparse(uri)
    shown = redact_uri(uri)
    if parsed.scheme in ("http", "https"):
        import urllib.request

        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=5) as response:
                response.read()
        except Exception as error:
            raise TrackingUnavailable(f"tracking.uri={shown}: MLflow server not reachable ({error})") from error
        _check_allowed(uri)
        return
    path = local_path(uri)
    if path is None:
        return  # a database server: MLflow's own error says what is wrong
    if parsed.scheme == "sqlite":
        if not path.parent.is_dir():
            raise TrackingUnavailable(f"tracking.uri={shown}: folder {path.parent} does not exist")
        problem = _unwritable(path, path.parent)
    else:  # a file store: MLflow makes its folder, so the nearest folder that exists must take files
        existing = next(folder for folder in (path, *path.parents) if folder.is_dir())
        problem = _unwritable(None, existing)
    if problem:
        raise TrackingUnavailable(f"tracking.uri={shown}: {problem}")


def _unwritable(database: Optional[Path], folder: Path) -> Optional[str]:
    """Why the store's file or folder cannot be written, or None (both are tried for real: a check of
    the permission bits is wrong for root and for filesystems such as /proc)."""
    try:
        if database is not None:
            with open(database, "ab"):  # created if missing (an empty file is an empty sqlite database)
                pass
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".loaderexp-check-"):  # sqlite's journal goes here
            pass
    except OSError as error:
        if database is not None and error.filename == str(database):
            return f"cannot create or write {database} ({error.strerror or error})"
        return f"cannot create files in {folder} ({error.strerror or error})"
    return None


def _check_allowed(uri: str) -> None:
    """A server with authentication (``mlflow server --app-name basic-auth``) answers /health to
    anybody: ask it for something real, with the credentials MLflow takes from the environment."""
    from mlflow.exceptions import MlflowException

    try:
        client(uri).search_experiments(max_results=1)
    except MlflowException as error:
        refused = next((code for code in ("401", "403") if f"error code {code}" in str(error)), None)
        if refused is None:
            raise TrackingUnavailable(f"tracking.uri={uri}: {str(error).splitlines()[0]}") from error
        sent = "MLFLOW_TRACKING_USERNAME" in os.environ or "MLFLOW_TRACKING_TOKEN" in os.environ
        raise TrackingUnavailable(
            f"tracking.uri={uri}: the server refused "
            + ("the credentials in MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"
               if sent else "a request without credentials: set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
            + f" (HTTP {refused})") from error


DATABASE_SCHEMES = ("postgresql", "mysql", "mssql", "oracle")


def refuse_credentials_in_uri(tracking: TrackingConfig) -> None:
    """A credential in tracking.uri (a password, a ``?token=``) would reach the files Hydra writes
    (multirun.yaml, .hydra/), the run's params and every log line that names the store: refuse it
    before any of them, saying where that credential goes instead."""
    uri = tracking.uri or ""
    secrets = uri_secrets(uri)
    if tracking.backend.value != "mlflow" or not secrets:
        return
    scheme = urlsplit(uri).scheme.split("+")[0]
    if scheme == "postgresql":
        advice = ("a ~/.pgpass file (host:port:database:user:password, mode 0600) or PGPASSWORD, which "
                  "SQLAlchemy's psycopg2 driver reads")
    elif scheme in DATABASE_SCHEMES:
        advice = f"the {scheme} driver's own password file or environment variable (e.g. MYSQL_PWD for mysql)"
    else:
        advice = ("MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN, which MLflow "
                  "reads")
    print(f"loaderexp: error: tracking.uri={redact_uri(uri)} carries {' and '.join(secrets)}: give it through "
          f"{advice}; loaderexp never records those", file=sys.stderr)
    raise SystemExit(2)
