"""A config file that is not YAML, said in one line (the file, the line, the parser's words) before Hydra
composes anything: Hydra's own report of it is a traceback of some ninety lines with the file at the bottom.

The folders are the ones a composition reads: loaderexp's conf/, ``--config-dir``/``-cd`` and the file
folders of ``hydra.searchpath=[...]`` given on the command line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

import yaml

from loaderexp.config.compose import config_dir


def folders_of(argv: Sequence[str]) -> list[Path]:
    found = [config_dir()]
    for i, arg in enumerate(argv):
        if arg in ("-cd", "--config-dir") and i + 1 < len(argv):
            found.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            found.append(Path(arg.split("=", 1)[1]))
        elif arg.startswith(("hydra.searchpath=", "+hydra.searchpath=")):
            for entry in re.split(r"[\[\],]", arg.split("=", 1)[1]):
                entry = entry.strip().strip("'\"")
                if entry and not entry.startswith("pkg://"):
                    found.append(Path(entry.removeprefix("file://")))
    return [folder for folder in found if folder.is_dir()]


def yaml_problems(folders: Iterable[Path]) -> list[str]:
    """One line per YAML file below ``folders`` that does not parse."""
    problems = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.yaml")):
            try:
                yaml.safe_load(path.read_text())
            except yaml.YAMLError as error:
                mark = getattr(error, "problem_mark", None)
                where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
                what = getattr(error, "problem", None) or str(error).splitlines()[0]
                problems.append(f"{where}: not YAML: {what}")
            except (OSError, UnicodeDecodeError) as error:
                problems.append(f"{path}: cannot be read: {error}")
    return problems
