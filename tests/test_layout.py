"""The package layout follows the data flow, and its import rules hold (read from the source, not assumed).

config -> data -> measure -> execute -> result -> track / report, with runner.py and __main__.py on top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "loaderexp"
STAGES = ("config", "data", "measure", "execute", "track", "report", "search")

# What each stage may import from loaderexp (itself always); ``result`` is the plain value all share.
ALLOWED = {
    "config": {"result"},
    "data": {"config"},
    "measure": set(),
    "execute": {"config", "data", "measure", "result"},
    "report": {"result"},
    "track": {"result", "report", "search"},
    "search": {"config", "report", "result"},
    "result": set(),
}
FORBIDDEN_THIRD_PARTY = {"measure": ("hydra", "omegaconf", "mlflow"), "execute": ("mlflow",),
                         "report": ("hydra", "omegaconf"), "data": ("mlflow",)}
MAX_LINES = 400


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every module this file imports, at any depth of the file (lazy imports count too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return found


def stage_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "loaderexp"


GRAPH = {name: imports_of(path, set(modules())) for name, path in modules().items()}


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_is_a_package_that_says_what_it_owns_and_may_import(stage):
    init = PACKAGE / stage / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and "import" in doc and len(doc.split()) > 30, f"{init}: a paragraph on what it owns and imports"


def test_each_stage_imports_only_the_stages_before_it():
    wrong = []
    for module, imported in GRAPH.items():
        stage = stage_of(module)
        if stage not in ALLOWED:
            continue  # runner, __main__, the sync entry: they sit on top
        for target in imported:
            if target.startswith("loaderexp.") and stage_of(target) not in ALLOWED[stage] | {stage}:
                wrong.append(f"{module} imports {target}")
            for banned in FORBIDDEN_THIRD_PARTY.get(stage, ()):
                if target == banned or target.startswith(banned + "."):
                    wrong.append(f"{module} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def test_nothing_imports_the_runner_but_the_entry_point():
    importers = sorted(m for m, imported in GRAPH.items() if "loaderexp.runner" in imported)
    assert importers == ["loaderexp.__main__"]


def test_no_import_cycles():
    internal = {m: {t for t in imported if t in GRAPH and t != m} for m, imported in GRAPH.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in internal[module]:
            if state.get(target) == 1:
                cycles.append(" -> ".join(trail[trail.index(target):] + [target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(internal):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


def test_modules_stay_small():
    long = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {n: count for n, count in long.items() if count > MAX_LINES} == {}


def test_measuring_loads_neither_hydra_nor_mlflow():
    """Importing every measure module (and the job that drives it) pulls in no tracking or config system."""
    measure = [m for m in GRAPH if stage_of(m) == "measure"]
    code = (f"import sys\nfor m in {measure!r}: __import__(m)\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'hydra', 'omegaconf', 'mlflow'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
