"""The docs say what the code does: the settings reference is the schema's, every default they quote is the
schema's, and the README stays a front page.

    python tests/test_docs.py --write      # regenerate the reference in docs/configs.md from the schema
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from enum import Enum
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "loaderexp" / "config" / "schema.py"
CONFIGS_PAGE = REPO / "docs" / "configs.md"
BEGIN, END = "<!-- reference: generated from the schema by tests/test_docs.py", "<!-- end reference -->"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def field_comments() -> dict[tuple[str, str], str]:
    """(class, field) -> the comment on the field's line in schema.py: what the setting does."""
    lines = SCHEMA.read_text().splitlines()
    comments = {}
    for node in ast.parse(SCHEMA.read_text()).body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    line, above = lines[item.lineno - 1], lines[item.lineno - 2].strip()
                    comment = line.split("  # ", 1)[1] if "  # " in line else above[2:] if above.startswith("# ") else ""
                    comments[(node.name, item.target.id)] = comment.strip()
    return comments


def shown(value: object) -> str:
    from loaderexp.result import param_text

    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, dict):
        return "{}"
    return param_text(value)


def reference() -> str:
    """The settings of every schema-backed group, their defaults and what they do, as a Markdown table."""
    from loaderexp.config.schema import BACKEND_OPTIONS, GROUPS, MISSING, BackendConfig

    comments = field_comments()
    rows = ["| setting | default | valid | what it does |", "|---|---|---|---|"]
    shared = {f.name for f in dataclasses.fields(BackendConfig)}
    stacks = [("backend", schema, f"backend={name}: ") for name, schema in BACKEND_OPTIONS.items()]
    for group, schema, only in [*((g, s, "") for g, s in GROUPS.items()), *stacks]:
        for f in dataclasses.fields(schema):
            if only and f.name in shared:
                continue  # a stack's own options only; the shared ones are above
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            text = "(set by the preset)" if default == MISSING else f"`{shown(default)}`"
            rows.append(f"| `{group}.{f.name}` | {text} | {valid(f)} | "
                        f"{only}{comments.get((schema.__name__, f.name), '')} |")
    return "\n".join(rows)


def valid(f: dataclasses.Field) -> str:
    """The values a setting may take, as validation words them."""
    meta = f.metadata
    if meta.get("rule"):
        return meta["rule"]
    if meta.get("ge") is not None:
        return f">= {meta['ge']:g}"
    if meta.get("gt") is not None:
        return f"> {meta['gt']:g}"
    if meta.get("nonempty"):
        return "not empty"
    if isinstance(f.type, str) and ("Enum" in f.type or f.type[:1].isupper() and f.type not in ("Optional[str]",)):
        from loaderexp.config import schema

        kind = getattr(schema, f.type.replace("Optional[", "").rstrip("]"), None)
        if isinstance(kind, type) and issubclass(kind, Enum):
            return ", ".join(member.value for member in kind)
    return ""


def page_reference(text: str) -> str:
    start = text.index(BEGIN)
    body_start = text.index("\n", start) + 1
    return text[body_start:text.index(END)].strip()


def write_reference() -> None:
    text = CONFIGS_PAGE.read_text()
    start = text.index("\n", text.index(BEGIN)) + 1
    CONFIGS_PAGE.write_text(text[:start] + reference() + "\n" + text[text.index(END):])


def test_the_settings_reference_is_the_schemas():
    assert page_reference(CONFIGS_PAGE.read_text()) == reference(), "run: python tests/test_docs.py --write"


def schema_defaults() -> dict[str, str]:
    from loaderexp.config.schema import GROUPS

    found = {}
    for group, schema in GROUPS.items():
        for f in dataclasses.fields(schema):
            if f.default is not dataclasses.MISSING:
                found[f"{group}.{f.name}"] = shown(f.default)
    return found


# "`bench.batches` (default 20)", "`bench.batches` (20)", "`bench.stall_s`, 120": a default quoted in prose.
QUOTED = re.compile(r"`(?P<key>[a-z_]+\.[a-z_]+)`\s*(?:\((?:default )?|, )(?P<value>-?[\d.]+|true|false|null)\b")


def test_every_default_the_docs_quote_is_the_schemas():
    defaults = schema_defaults()
    wrong = []
    for page in PAGES:
        for match in QUOTED.finditer(page.read_text()):
            key, value = match["key"], match["value"]
            if key not in defaults:
                continue
            if _number(value) != _number(defaults[key]):
                wrong.append(f"{page.name}: `{key}` quoted as {value}, the schema says {defaults[key]}")
    assert wrong == []


def _number(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        return text


def test_the_readme_is_a_front_page():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 160
    first, second = re.findall(r"```bash\n(.*?)\n```", readme, re.S)[:2]
    assert first.startswith("python3 -m venv .venv") and "./multirun.sh" in first
    assert second == 'python3 -m venv .venv && .venv/bin/pip install -e ".[dev]" && .venv/bin/python -m pytest -n 2'
    assert second in (REPO / ".ci" / "run").read_text()  # CI runs the README's test command


def test_every_page_is_in_the_site():
    nav = (REPO / "mkdocs.yml").read_text()
    assert [p.name for p in sorted((REPO / "docs").glob("*.md")) if p.name not in nav] == []


if __name__ == "__main__":
    if "--write" in sys.argv:
        sys.path.insert(0, str(REPO))
        write_reference()
        print(f"wrote the reference into {CONFIGS_PAGE}")
