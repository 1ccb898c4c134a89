"""Every field a per-connection class sets in ``__init__`` names its owner.

The tag is a comment on the assignment's line or in the comment block right above it
(``# owner: reader``, ``# owner: loopy``, ``# owner: stream task``, ``#: ... Owner:
reader.``, ``# immutable after init``, ``# shared: <rule>``); a class whose docstring
says "Owner of every field: <task>" (or "of everything below") tags all of its fields
at once. Whether each tag is *true* is checked by reading every write of the field
(docs/architecture.md, "Who owns what"); this test keeps new fields from arriving
untagged.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import trio_h2t

PACKAGE = Path(trio_h2t.__file__).parent

#: The classes with mutable per-connection (or per-stream) state: (module, class).
CLASSES = [
    ("_connection.py", "ConnectionCore"),
    ("_lifecycle.py", "ConnectionLifecycle"),
    ("_streamtable.py", "StreamTable"),
    ("_controlbuf.py", "ControlBuffer"),
    ("_loopy.py", "Loopy"),
    ("_outstream.py", "OutStream"),
    ("_pings.py", "KeepaliveTimer"),
    ("_pings.py", "PingEnforcer"),
    ("_reader.py", "Reader"),
    ("_stream.py", "H2Stream"),
    ("_streamview.py", "H2StreamView"),
    ("_server.py", "_Admission"),
    ("_server.py", "ServerConnection"),
    ("_server.py", "H2Server"),
    ("_client.py", "_StreamOpener"),
    ("_client.py", "ClientConnection"),
]

TAG = re.compile(r"\bowner\b|\bimmutable\b|\bshared:", re.IGNORECASE)
BLANKET = re.compile(r"Owner of (every field|everything below):", re.IGNORECASE)


def _init_fields(path: Path, name: str) -> tuple[ast.ClassDef, list[tuple[str, int]]]:
    tree = ast.parse(path.read_text(), str(path))
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    fields: dict[str, int] = {}
    for node in ast.walk(init):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                fields.setdefault(target.attr, target.lineno)
    return cls, sorted(fields.items(), key=lambda kv: kv[1])


def _tag_comment(lines: list[str], lineno: int) -> str:
    """The comment on line ``lineno`` (1-based) plus the comment block right above it."""
    text = [lines[lineno - 1].partition("#")[2]]
    i = lineno - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        text.append(lines[i])
        i -= 1
    return " ".join(text)


@pytest.mark.parametrize(("module", "name"), CLASSES, ids=[c for _, c in CLASSES])
def test_every_init_field_has_an_owner_tag(module: str, name: str) -> None:
    """Each ``self.x = ...`` in ``__init__`` carries an owner tag (or its class a blanket one)."""
    path = PACKAGE / module
    cls, fields = _init_fields(path, name)
    assert fields, f"{name} sets no fields in __init__: drop it from CLASSES"
    if BLANKET.search(ast.get_docstring(cls) or ""):
        return
    lines = path.read_text().splitlines()
    missing = [
        f"{module}:{line} self.{field}"
        for field, line in fields
        if not TAG.search(_tag_comment(lines, line))
    ]
    assert missing == []


def test_the_checker_sees_a_missing_tag(tmp_path: Path) -> None:
    """The checker flags an untagged field and accepts a tagged one (it is not vacuous)."""
    source = (
        "class C:\n"
        "    def __init__(self):\n"
        "        self.a = 1  # owner: reader\n"
        "        # shared: the reader adds, loopy removes\n"
        "        self.b = set()\n"
        "        self.c = 0\n"
    )
    path = tmp_path / "m.py"
    path.write_text(source)
    _, fields = _init_fields(path, "C")
    lines = source.splitlines()
    untagged = [f for f, line in fields if not TAG.search(_tag_comment(lines, line))]
    assert untagged == ["c"]
