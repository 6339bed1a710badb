"""Nobody in: locks that another local user cannot turn against you, credentials that never reach a file,
and the docs saying what in a config runs code.  Each test failed before its fix (issue 24)."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from loaderexp.execute.host_lock import exclusive_host
from loaderexp.result import RunFacts
from tests.conftest import REPO, TINY, run_cli

SECRET = "s3cr3t-t0ken-4242"


def test_a_planted_symlink_at_the_lock_path_never_empties_its_target(tmp_path, monkeypatch):
    victim = tmp_path / "work.txt"
    victim.write_text("a week of notes")
    lock = tmp_path / "host.lock"
    lock.symlink_to(victim)
    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(lock))
    with pytest.raises(Exception, match="symbolic link"):
        with exclusive_host("job 1", False, RunFacts()):
            pass
    assert victim.read_text() == "a week of notes"


def test_the_default_lock_lives_in_a_private_folder_of_the_user(tmp_path, monkeypatch):
    monkeypatch.delenv("LOADEREXP_HOST_LOCK", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with exclusive_host("job 1", False, RunFacts()):
        folder = tmp_path / "loaderexp"
        assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700
        assert (folder / "host.lock").stat().st_mode & 0o077 == 0


def test_a_lock_folder_someone_else_could_write_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("LOADEREXP_HOST_LOCK", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "loaderexp").mkdir(mode=0o777)
    os.chmod(tmp_path / "loaderexp", 0o777)
    with pytest.raises(Exception, match="not a private folder of yours"):
        with exclusive_host("job 1", False, RunFacts()):
            pass


def test_a_lock_file_loaderexp_did_not_create_is_never_written(tmp_path, monkeypatch):
    shared = tmp_path / "shared.lock"
    shared.write_text("the admin's lock, do not edit")
    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(shared))
    facts = RunFacts()
    with exclusive_host("job 1", False, facts):
        assert shared.read_text() == "the admin's lock, do not edit"
    assert shared.read_text() == "the admin's lock, do not edit" and facts.host_lock == "exclusive"


def test_a_lock_path_whose_folder_is_missing_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(tmp_path / "nowhere" / "host.lock"))
    with pytest.raises(Exception) as error:
        with exclusive_host("job 1", False, RunFacts()):
            pass
    assert not isinstance(error.value, FileNotFoundError)
    assert "does not exist" in str(error.value) and "\n" not in str(error.value)


def _hold_with_a_hostile_name(path: str, seconds: float, ready) -> None:
    import fcntl

    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, b"loaderexp host lock\n\x1b[2J\x1b]0;owned\x07evil job", 0)
    ready.set()
    time.sleep(seconds)


def test_a_busy_host_is_waited_for_a_bounded_time_and_the_holder_shown_without_escapes(tmp_path, monkeypatch,
                                                                                     caplog):
    path = tmp_path / "host.lock"
    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(path))
    with exclusive_host("job 0", False, RunFacts()):  # loaderexp creates it
        pass
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_with_a_hostile_name, args=(str(path), 30.0, ready))
    holder.start()
    try:
        assert ready.wait(30)
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="loaderexp"):
            with pytest.raises(Exception, match=r"host busy: .*bench.host_wait_s=1"):
                with exclusive_host("job 1", False, RunFacts(), wait_s=1.0):
                    pass
        assert time.monotonic() - started < 10
        shown = "\n".join(r.getMessage() for r in caplog.records)
        assert "evil job" in shown and "\x1b" not in shown and "\x07" not in shown
    finally:
        holder.kill()
        holder.join(10)


def test_the_data_roots_build_lock_never_follows_a_planted_symlink(tmp_path):
    from loaderexp.data.generated import build_once

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    root = tmp_path / "data"
    root.mkdir()
    (root / ".set.lock").symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        build_once(root / "set", {"kind": "x"}, lambda tmp: (tmp.mkdir(), {})[1])
    assert victim.read_text() == "precious"


def _no_secret_anywhere(proc, folder: Path) -> None:
    assert SECRET not in proc.stdout + proc.stderr
    leaked = [p for p in folder.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []


@pytest.mark.parametrize("multirun", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_token_in_the_query_string_is_refused_before_anything_is_written(tmp_path, data_root, multirun):
    uri = f"http://127.0.0.1:9/?token={SECRET}"
    mode = ["-m", f"hydra.sweep.dir={tmp_path / 'sweep'}"] if multirun else [f"hydra.run.dir={tmp_path / 'run'}"]
    proc = run_cli([*mode, *TINY, f"tracking.uri='{uri}'"], cwd=tmp_path)  # quoted, as a shell user writes it
    assert proc.returncode == 2
    assert "carries the query parameter token" in proc.stderr and "MLFLOW_TRACKING_TOKEN" in proc.stderr
    _no_secret_anywhere(proc, tmp_path)


@pytest.mark.slow
def test_a_database_password_gets_the_databases_advice(tmp_path, data_root):
    proc = run_cli([*TINY, f"tracking.uri=postgresql+psycopg2://mlflow:{SECRET}@db.example/mlflow",
                    f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "~/.pgpass" in proc.stderr and "PGPASSWORD" in proc.stderr
    assert "MLFLOW_TRACKING_PASSWORD" not in proc.stderr
    _no_secret_anywhere(proc, tmp_path)


def test_the_docs_say_what_in_a_config_runs_code():
    text = (REPO / "README.md").read_text() + (REPO / "docs" / "reliability.md").read_text()
    assert "is code" in text
    for knob in ("_target_", "python_path", "collate_fn", "worker_init_fn"):
        assert knob in text.split("is code")[0][-600:] + text.split("is code")[1][:600], knob


def test_a_link_planted_where_a_data_set_is_built_is_never_followed(tmp_path):
    """Round two, item 1: <data_root>/.imagefolder.building -> ~/victim received the JPEG tree."""
    from loaderexp.data.generated import build_once

    victim = tmp_path / "victim"
    victim.mkdir()
    root = tmp_path / "data"
    root.mkdir()
    (root / ".imagefolder.building").symlink_to(victim)

    def write(folder):
        folder.mkdir(parents=True, exist_ok=True)  # as the real writers do
        (folder / "a.jpg").write_bytes(b"jpeg")
        return {"files": 1}

    assert build_once(root / "imagefolder", {"kind": "test"}, write) == "built"
    assert list(victim.iterdir()) == []  # nothing written through the link
    assert (root / "imagefolder" / "a.jpg").read_bytes() == b"jpeg"
    assert (root / ".imagefolder.building").is_symlink()  # the planted link is left as it was
    assert [p.name for p in root.iterdir() if p.name.startswith(".imagefolder.building-")] == []  # no leftovers
