"""Where a sweep's job writes: its job number, or, resuming, the folder of its own configuration.

Hydra numbers a sweep's jobs in the order of the grid, and a job's folder is its number.  A resumed
sweep whose grid changed (``bench.seed=1,2``, then ``bench.seed=0,1,2 resume=true``) numbers them
anew, and job 0 would write into the folder that holds seed 1's measurement.  So each job folder
carries a marker with the job's overrides (Hydra's ``override_dirname``, ``resume`` left out), and a
resumed job goes to the folder that holds its overrides, or to a new one after the last: no folder
ever holds two configurations, and what was measured stays where it was.  Folders from before the
markers are recognised by their ``.hydra/overrides.yaml``.
"""

from __future__ import annotations

import os
from pathlib import Path

from loaderexp.result import write_whole

MARKER = ".loaderexp-job"  # a job folder's overrides, as Hydra's override_dirname writes them
IGNORED_OVERRIDES = ("resume",)  # conf/hydra/default.yaml leaves them out of override_dirname as well


class FolderUnwritable(SystemExit):
    """A job's folder cannot be made (a full disk, a read-only filesystem): no job after it could be recorded
    either, so the sweep ends here.  A SystemExit, as Hydra and OmegaConf turn any Exception raised in a
    resolver into a traceback; the entry point ends the sweep (``loaderexp.__main__``)."""


def job_folder(sweep_dir: str, num: int, overrides: str, resume: bool) -> str:
    """The subfolder of ``sweep_dir`` job ``num`` writes into (Hydra's ``hydra.sweep.subdir``)."""
    try:
        return _job_folder(Path(sweep_dir), num, overrides, resume)
    except OSError as error:
        where = error.filename or sweep_dir
        raise FolderUnwritable(f"job {int(num) + 1}'s folder cannot be written ({where}: {error.strerror or error})")


def _job_folder(root: Path, num: int, overrides: str, resume: bool) -> str:
    if not resume:
        _mark(root / str(num), overrides)
        return str(num)
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if _overrides_of(folder) == overrides:
            _mark(folder, overrides)
            return folder.name
    return _new_folder(root, overrides)


def _overrides_of(folder: Path) -> str | None:
    marker = folder / MARKER
    if marker.is_file():
        return marker.read_text()
    recorded = folder / ".hydra" / "overrides.yaml"
    if not recorded.is_file():
        return None
    from omegaconf import OmegaConf

    lines = [str(line) for line in OmegaConf.load(recorded)
             if str(line).split("=", 1)[0].lstrip("+~") not in IGNORED_OVERRIDES]
    return ",".join(sorted(lines))


def _new_folder(root: Path, overrides: str) -> str:
    """The first number after the sweep's folders, taken atomically (jobs of a launcher may start at once)."""
    root.mkdir(parents=True, exist_ok=True)
    number = 1 + max((int(p.name) for p in root.iterdir() if p.name.isdigit()), default=-1)
    while True:
        try:
            os.mkdir(root / str(number))
        except FileExistsError:
            number += 1
            continue
        _mark(root / str(number), overrides)
        return str(number)


def _mark(folder: Path, overrides: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_whole(folder / MARKER, overrides)
