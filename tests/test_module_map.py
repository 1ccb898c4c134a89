"""docs/architecture.md's module map names every module of the package.

The map is prose a reader trusts; this ties it to the tree: a module added to
``trio_h2t`` (or a subpackage) without a row in the table fails here, as does a
sans-IO row that no longer matches the layering test's ``SANS_IO``.
"""

from __future__ import annotations

import re
from pathlib import Path

from test_import import SANS_IO

import trio_h2t

_PACKAGE = Path(trio_h2t.__file__).parent
_PAGE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _map_rows() -> dict[str, set[str]]:
    """The module map's rows: layer name -> the backquoted module names of its cells."""
    text = _PAGE.read_text(encoding="utf-8")
    section = text.split("## The module map", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "---"):
            continue
        rows[cells[0]] = set(re.findall(r"`([a-z_][a-z0-9_]*)`", cells[1]))
    return rows


def _package_modules() -> set[str]:
    """The package's own modules (``_x``, ``__init__``, ``__main__``) and subpackages."""
    names = {p.stem for p in _PACKAGE.glob("*.py")}
    names |= {p.parent.name for p in _PACKAGE.glob("*/__init__.py")}
    return names


def test_the_module_map_names_every_module() -> None:
    """Every module and subpackage of trio_h2t has a row in the map, and none is made up."""
    named = set().union(*_map_rows().values())
    modules = _package_modules()
    assert modules - named == set(), "add these to docs/architecture.md's module map"
    assert named - modules == set(), "the module map names modules that do not exist"


def test_the_module_maps_sans_io_row_is_the_layering_tests() -> None:
    """The map's sans-IO row is exactly tests/test_import.py's SANS_IO set (a
    subpackage's modules by the subpackage's name)."""
    assert _map_rows()["sans-IO"] == {module.split(".")[0] for module in SANS_IO}
