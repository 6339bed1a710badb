"""Each run names the commit of every config folder it was composed from, says whether it was dirty, and keeps
the uncommitted changes of its config files (credentials redacted) as config.diff."""

from __future__ import annotations

import json
import subprocess

import pytest

from loaderexp.track.versions import config_diff, inspect_sources
from tests.conftest import REPO, TINY, run_cli


def git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.fixture
def user_conf(tmp_path):
    """A user's own config folder in a git repository of its own, one commit deep."""
    repo = tmp_path / "project"
    conf = repo / "conf"
    (conf / "loader").mkdir(parents=True)
    (conf / "loader" / "mine.yaml").write_text("defaults:\n  - base_loader\n\nbatch_size: 32\nnum_workers: 1\n")
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "configs")
    return conf


def test_a_clean_folder_is_its_commit_and_an_edited_one_is_dirty_with_its_diff(user_conf):
    [clean] = inspect_sources([(str(user_conf), "command-line")])
    assert clean.commit and not clean.dirty and config_diff([clean]) == ""
    (user_conf / "loader" / "mine.yaml").write_text("defaults:\n  - base_loader\n\nbatch_size: 64\nnum_workers: 1\n")
    (user_conf / "tracking.yaml").write_text("uri: postgresql://me:hunter2@db/mlflow\npassword: hunter2\n")
    [dirty] = inspect_sources([(str(user_conf), "command-line")])
    assert dirty.dirty and dirty.commit == clean.commit
    assert set(dirty.changed) == {"conf/loader/mine.yaml", "conf/tracking.yaml"}
    diff = config_diff([dirty])
    assert "-batch_size: 32" in diff and "+batch_size: 64" in diff and "tracking.yaml (untracked)" in diff
    assert "hunter2" not in diff and "password: <redacted>" in diff


SECRETS = {  # round two, item 2: each form that reached config.diff, and the secret in it
    "- password: listed-1\n": "listed-1",
    "creds: {user: bob, password: flowing-2}\n": "flowing-2",
    "cert_password: |\n  block-line-3a\n  block-line-3b\n": "block-line-3",
    '"api_token": quoted-4\n': "quoted-4",
    "my password: spaced-5\n": "spaced-5",
    "aws: AKIAIOSFODNN7EXAMPLE\n": "AKIAIOSFODNN7EXAMPLE",
    "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIbPxRfiCYEXAMPLEKEY\n": "wJalrXUtnFEMIbPxRfiCYEXAMPLEKEY",
    "nested:\n  deeper:\n    db_password: nested-8\n": "nested-8",
}


def test_every_form_of_a_credential_is_redacted_and_the_rest_kept(user_conf):
    text = "".join(SECRETS) + "batch_size: 96\nuser: bob\n"
    (user_conf / "loader" / "mine.yaml").write_text("defaults:\n  - base_loader\n\n" + text)
    (user_conf / "secrets.yaml").write_text(text)  # untracked: written in full
    [dirty] = inspect_sources([(str(user_conf), "command-line")])
    diff = config_diff([dirty])
    for secret in SECRETS.values():
        assert secret not in diff, secret
    assert diff.count("+batch_size: 96") == 2 and "user: bob" in diff and "+cert_password: |" in diff


def test_outside_git_a_folder_says_so(tmp_path):
    [source] = inspect_sources([(str(tmp_path), "command-line")])
    assert source.commit is None and not source.dirty


@pytest.mark.slow
def test_a_run_records_every_config_folder_it_composed_from(user_conf, data_root, tmp_path):
    (user_conf / "loader" / "mine.yaml").write_text("defaults:\n  - base_loader\n\nbatch_size: 16\nnum_workers: 0\n")
    out = tmp_path / "run"
    tiny = [o for o in TINY if not o.startswith("loader.")]  # the batch size is the user's loader file's
    done = run_cli(["--config-dir", str(user_conf), *tiny, "tracking=none", "loader=mine", f"hydra.run.dir={out}"],
                   cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["params"]["loader.batch_size"] == 16
    sources = {s["provider"]: s for s in result["info"]["config_sources"]}
    assert set(sources) == {"main", "command-line"}
    assert sources["command-line"]["path"] == str(user_conf) and sources["command-line"]["dirty"] is True
    assert result["info"]["config_dirty"] is True
    assert "+batch_size: 16" in (out / "config.diff").read_text()
