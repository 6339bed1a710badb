"""Which configs a run was composed from, as git knows them: every config folder's commit, whether it had
uncommitted changes, and those changes (its config files only) as a diff, so a run made with an edited
``conf/`` does not claim a commit whose configs differ.

The folders are the ones Hydra composed from (``hydra.runtime.config_sources``: loaderexp's own
``conf/``, a user's ``--config-dir``, ``hydra.searchpath``), Hydra's and its plugins' own left out.
A folder outside git is recorded as such.  Credentials in the diff are redacted (:mod:`.redact`).
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from loaderexp.track.redact import redacted

DIFF_FILE = "config.diff"
OWN_PROVIDERS = ("main", "command-line", "hydra.searchpath in main", "hydra.searchpath in command-line")
CONFIG_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class ConfigSource:
    path: str
    provider: str  # main (loaderexp's conf/), command-line (--config-dir), hydra.searchpath ...
    commit: Optional[str]  # None: not in a git work tree
    dirty: bool = False
    changed: tuple[str, ...] = ()  # its config files with uncommitted changes (untracked ones included)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": list(self.changed)}


def _git(folder: str, *arguments: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", folder, *arguments], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def composed_from(sources: Iterable[Any]) -> list[tuple[str, str]]:
    """(path, provider) of the config folders a run composed from, from Hydra's ``runtime.config_sources``."""
    return [(str(s["path"]), str(s["provider"])) for s in sources
            if s["schema"] == "file" and s["provider"] in OWN_PROVIDERS and s["path"]]


def inspect_sources(folders: Sequence[tuple[str, str]]) -> list[ConfigSource]:
    found = []
    for path, provider in folders:
        commit = (_git(path, "rev-parse", "HEAD") or "").strip() or None
        if commit is None:
            found.append(ConfigSource(path, provider, None))
            continue
        status = _git(path, "status", "--porcelain", "--untracked-files=all", "--", ".") or ""
        changed = tuple(sorted(line[3:].strip() for line in status.splitlines()
                               if line[3:].strip().endswith(CONFIG_SUFFIXES)))
        found.append(ConfigSource(path, provider, commit, bool(changed), changed))
    return found


def config_diff(sources: Sequence[ConfigSource]) -> str:
    """The uncommitted changes of the dirty sources' config files (new files in full), credentials redacted."""
    parts = []
    for source in sources:
        if not source.dirty:
            continue
        parts.append(f"# {source.provider}: {source.path} at {source.commit} with uncommitted changes\n")
        parts.append(_git(source.path, "diff", "HEAD", "--no-color", "--", *_patterns()) or "")
        untracked = _git(source.path, "ls-files", "--others", "--exclude-standard", "--", *_patterns()) or ""
        for name in untracked.split():
            text = (Path(source.path) / name).read_text(errors="replace")
            parts.append(f"--- /dev/null\n+++ b/{name} (untracked)\n" + "".join(f"+{line}\n" for line in text.splitlines()))
    return "\n".join(redacted("".join(parts).splitlines())) + "\n" if parts else ""


def _patterns() -> list[str]:
    return [f"*{suffix}" for suffix in CONFIG_SUFFIXES]
