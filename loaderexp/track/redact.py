"""Credentials out of a config diff before it is written (config.diff, its MLflow artifact).

A diff's lines are YAML behind a ``+``/``-``/`` `` mark.  Redacted: the value of every key that looks like a
credential (``password``, ``api_token``, ``my secret``, quoted or not, in a list item, in a flow mapping
``{user: bob, password: ...}``, and the whole block of a block scalar ``cert_password: |``), shell-style
``export AWS_SECRET_ACCESS_KEY=...`` lines, a URI's password and credential query values, and tokens of a
known shape wherever they stand (AWS access key ids, GitHub and Slack tokens, private key blocks).
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from loaderexp.result import SECRET_QUERY, redact_uri

HIDDEN = "<redacted>"
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"]+")
SECRET_KEY = r"""["']?[\w .\-]*(?:""" + SECRET_QUERY.pattern + r""")[\w.\-]*["']?"""
# mark, indent, an optional list dash or `export`, the key and its separator; then the value
KEY_LINE = re.compile(r"^([+\- ]?)(\s*)((?:-\s+|export\s+)?" + SECRET_KEY + r"\s*[:=]\s*)(.*)$", re.IGNORECASE)
IN_FLOW = re.compile(r"([{,]\s*" + SECRET_KEY + r"\s*:\s*)([^,}]+)", re.IGNORECASE)
TOKENS = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}\b|\bxox[abpr]-[A-Za-z0-9-]{10,}\b")
PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
BLOCK = re.compile(r"^[|>][+\-0-9]*\s*(#.*)?$")  # a block scalar's indicator: the value is the lines below


def redacted(lines: Iterable[str]) -> Iterator[str]:
    """The diff's lines with every credential replaced by <redacted>."""
    block_indent = None  # inside a credential's block scalar: lines indented deeper than this are its value
    for line in lines:
        mark, body = (line[:1], line[1:]) if line[:1] in "+- " else ("", line)
        indent = len(body) - len(body.lstrip())
        if block_indent is not None and (not body.strip() or indent > block_indent):
            yield f"{mark}{' ' * indent}{HIDDEN}" if body.strip() else line
            continue
        block_indent = None
        line = URI.sub(lambda found: redact_uri(found.group(0)), line)
        line = TOKENS.sub(HIDDEN, line)
        if PRIVATE_KEY.search(line):
            line = PRIVATE_KEY.sub(HIDDEN, line)
            block_indent = indent
        keyed = KEY_LINE.match(line)
        if keyed and keyed.group(4).strip():
            value = keyed.group(4).strip()
            if BLOCK.match(value):
                block_indent = indent
            elif not value.startswith("{"):
                line = f"{keyed.group(1)}{keyed.group(2)}{keyed.group(3)}{HIDDEN}"
        line = IN_FLOW.sub(lambda found: f"{found.group(1)}{HIDDEN}", line)
        yield line
