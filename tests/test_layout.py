"""The package layout follows the data flow, and its rules hold (read from the source, not assumed).

config -> data -> loading / measure -> execute -> result -> track / report, with runner.py and
__main__.py on top; settings are read from the typed spec, never by string, outside config/; each
metric is named in one place; functions and modules stay small.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "loaderexp"
STAGES = ("config", "data", "loading", "harness", "execute", "track", "report", "search", "result", "model")

# What each stage may import from loaderexp (itself always); ``result`` is the plain value all share.
ALLOWED = {
    "config": {"result", "harness"},  # only harness's torch-free records (TORCH_FREE): bench.budget's modes
    "data": {"config"},
    "loading": {"config", "data", "harness"},
    "harness": set(),
    "execute": {"config", "data", "loading", "harness", "result", "model"},
    "report": {"result", "model"},
    "track": {"config", "execute", "result", "report", "search"},
    "search": {"config", "loading", "report", "result", "model"},  # loading: the stacks' checks, up front
    "result": {"harness", "model"},  # only harness's torch-free records (test_result_loads_no_torch)
    "model": {"harness"},  # only its torch-free records
}
FORBIDDEN_THIRD_PARTY = {"harness": ("hydra", "omegaconf", "mlflow"), "execute": ("hydra", "omegaconf", "mlflow"),
                         "report": ("hydra", "omegaconf"), "data": ("mlflow",), "loading": ("hydra", "omegaconf", "mlflow"),
                         "result": ("torch", "hydra", "omegaconf", "mlflow", "numpy"),
                         "model": ("torch", "hydra", "omegaconf", "mlflow", "numpy")}
MAX_LINES = 300
MAX_FUNCTION_LINES = 60
HOT_LOOP = "# the hot loop"  # on a longer function's def line: it is long so each batch touches only locals


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


# harness modules that import no torch: the stages before it (config, result, model) may read them.
TORCH_FREE = {"loaderexp.harness.records", "loaderexp.harness.stages", "loaderexp.harness.memory",
              "loaderexp.harness.batches", "loaderexp.harness.cgroup", "loaderexp.harness.host_load",
              "loaderexp.harness.budget"}
DYNAMIC = ("import_module", "__import__")  # importlib.import_module(name), __import__(name)


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1])


def dynamic_imports(tree: ast.AST, path: Path, known: set[str]) -> set[str]:
    """The modules an ``importlib.import_module(...)`` or ``__import__(...)`` can reach: a constant name, or
    every known module under the constant prefix of an f-string (module-level string constants and
    ``__package__`` resolved), so an import by a computed name is seen as an import of its whole package."""
    constants = {t.id: n.value.value for n in getattr(tree, "body", []) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)
                 and isinstance(n.value.value, str)}
    constants["__package__"] = _package_of(path)
    named = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)  # module_name = f"..."
             for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, (ast.Constant, ast.JoinedStr))}
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and
                getattr(node.func, "attr", getattr(node.func, "id", None)) in DYNAMIC):
            continue
        argument, prefix = node.args[0], ""
        if isinstance(argument, ast.Name) and argument.id in named:
            argument = named[argument.id]
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            found.add(argument.value)
            continue
        parts = argument.values if isinstance(argument, ast.JoinedStr) else [argument]
        for part in parts:
            if isinstance(part, ast.Constant):
                prefix += str(part.value)
            elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) \
                    and part.value.id in constants:
                prefix += constants[part.value.id]
            else:
                break
        found |= {m for m in known if m.startswith(prefix)} if prefix.startswith("loaderexp.") else {prefix or "?"}
    return found


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every module this file imports, at any depth of the file (lazy and dynamic imports count too)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    found |= dynamic_imports(tree, path, known)
    for node in ast.walk(tree):
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


def test_the_stages_before_harness_read_only_its_torch_free_records():
    wrong = sorted(f"{m} imports {t}" for m, imported in GRAPH.items() if stage_of(m) in ("config", "result", "model")
                   for t in imported if stage_of(t) == "harness" and t not in TORCH_FREE)
    assert wrong == []


def test_dynamic_imports_are_seen(tmp_path):
    """An import by a computed name counts as an import of every module it can reach."""
    known = set(GRAPH)
    source = tmp_path / "probe.py"
    source.write_text('import importlib\nPKG = "loaderexp.loading"\n'
                      'def f(name):\n    return importlib.import_module(f"{PKG}.{name}")\n'
                      'def g():\n    return __import__("loaderexp.report.table")\n')
    found = dynamic_imports(ast.parse(source.read_text()), PACKAGE / "config" / "probe.py", known)
    assert "loaderexp.loading.spdl" in found and "loaderexp.loading.dataloader" in found
    assert "loaderexp.report.table" in found and not any(m.startswith("loaderexp.harness") for m in found)
    assert "loaderexp.loading.spdl" in GRAPH["loaderexp.loading.registry"]  # the registry's own, seen


def test_nothing_imports_the_runner_but_the_entry_points():
    importers = sorted(m for m, imported in GRAPH.items() if "loaderexp.runner" in imported)
    assert importers == ["loaderexp.__main__", "loaderexp.api", "loaderexp.check"]


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


def test_functions_stay_small_unless_the_hot_loop_needs_it():
    long = []
    for name, path in modules().items():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES and HOT_LOOP not in lines[node.lineno - 1]:
                    long.append(f"{name}.{node.name}: {size} lines")
    assert long == []


FREE_NODES = ("dataset", "sampler", "transform")  # also DataLoader's and instantiate's argument names


def setting_names() -> set[str]:
    """Every setting's name as a string lookup would spell it: the groups and their dotted fields."""
    import dataclasses

    from loaderexp.config.schema import GROUPS, Config

    names = {f.name for f in dataclasses.fields(Config) if f.name not in FREE_NODES}
    for group, schema in GROUPS.items():
        names |= {f"{group}.{f.name}" for f in dataclasses.fields(schema)}
    return names | {f"{node}.{key}" for node in FREE_NODES for key in ("_target_", "name", "root", "python_path")}


def keys_used(tree: ast.AST) -> list[tuple[int, object]]:
    """Constants used as keys: ``x["k"]``, ``{"k": v}``, ``x.get("k")`` (also ``pop``, ``select``), ``"k" in x``,
    and the outer key of a nested lookup such as ``x["dataset"]["_target_"]``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant):
                found.append((node.lineno, node.slice.value))
            if isinstance(node.value, ast.Subscript) and isinstance(node.value.slice, ast.Constant):
                found.append((node.lineno, f"{node.value.slice.value}."))  # a group read by string
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, k.value) for k in node.keys if isinstance(k, ast.Constant)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("get", "pop", "select", "setdefault"):
            strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            found += [(node.lineno, strings[0])] if strings else []
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and \
                any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            found.append((node.lineno, node.left.value))
    return found


def string_lookups(path: Path, names: set[str]) -> list[str]:
    """A setting read by string: ``x["loader"]``, ``x.get("loader.num_workers")``, ``OmegaConf.select(x, "bench.seed")``."""
    groups = {f"{node}." for node in FREE_NODES} | {f"{name}." for name in names if "." not in name}
    return [f"{path.relative_to(PACKAGE.parent)}:{line}: {key!r}" for line, key in keys_used(ast.parse(path.read_text()))
            if isinstance(key, str) and (key in names or key in groups)]


def test_no_setting_is_looked_up_by_string_outside_config():
    """Later stages read the typed spec (``spec.loader.num_workers``); a result's params are read through the
    names result/__init__.py declares once."""
    names = setting_names()
    found = [hit for name, path in modules().items() if stage_of(name) not in ("config", "result")
             for hit in string_lookups(path, names)]
    assert found == []


def test_each_metric_is_named_in_one_place():
    from loaderexp.result.metrics import CATALOGUE

    spelled = [f"{name}:{line}: {key!r}" for name, path in modules().items() if name != "loaderexp.result.metrics"
               for line, key in keys_used(ast.parse(path.read_text())) if isinstance(key, str) and key in CATALOGUE]
    assert spelled == []


def test_the_param_names_results_are_read_by_are_settings():
    import loaderexp.result as result

    declared = {k: v for k, v in vars(result).items() if k.isupper() and isinstance(v, str)
                and k not in ("RESULT_FILE",)}  # a file name, not a param
    assert declared and set(declared.values()) <= setting_names() | {"data_root"}


def test_result_loads_no_torch():
    """The app unpickles measurements and names them without torch (it never imports it)."""
    code = ("import sys, loaderexp.result.figures, loaderexp.result.metrics, loaderexp.result.ceiling\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'torch', 'numpy', 'hydra', 'mlflow'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_checking_a_spec_against_every_loading_stack_loads_no_torch():
    """The app checks a job's spec (its stack's knobs) before the measuring process starts: importing torch
    there cost every job 4-5 s of a 9 s single run."""
    code = ("import sys\nfrom loaderexp.config import compose, to_spec\n"
            "from loaderexp.loading.registry import checked, loading_stack, stack_names\n"
            "for name in stack_names(): loading_stack(name)\n"
            "checked(to_spec(compose([])), False, 2.0, targets=False)\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_only_data_build_imports_hydra_below_config():
    """Hydra's instantiate builds the configured objects (data/build.py); no other stage after config imports
    Hydra or OmegaConf, except track/ (callbacks, the sweep) and search/ (a sweeper)."""
    found = sorted(m for m, imported in GRAPH.items() if stage_of(m) in STAGES and stage_of(m) not in ("config", "track", "search")
                   and any(t.split(".")[0] in ("hydra", "omegaconf") for t in imported))
    assert found == ["loaderexp.data.build"]


def test_measuring_loads_neither_hydra_nor_mlflow():
    """Importing every harness module (and the job that drives it) pulls in no tracking or config system."""
    harness = [m for m in GRAPH if stage_of(m) == "harness"]
    code = (f"import sys\nfor m in {harness!r}: __import__(m)\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'hydra', 'omegaconf', 'mlflow'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_benchmarks_use_only_loaderexps_public_names():
    """A benchmark is a user of loaderexp: it imports neither the tests nor a private name."""
    wrong = []
    for path in sorted((PACKAGE.parent / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "tests" or any(part.startswith("_") and part != "__future__"
                                                        for part in name.split(".")):
                    wrong.append(f"{path.name}:{node.lineno}: {name}")
    assert wrong == []
