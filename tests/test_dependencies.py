"""Every package trio_h2t imports is declared in pyproject.toml, and the installed
version (the one the suite tests) is inside the declared bounds.

The core may import only the base ``dependencies``; ``trio_h2t.grpc`` also its
``grpc`` extra, ``trio_h2t.interop`` its ``interop`` extra and ``trio_h2t.testing``
its ``testing`` extra. hpack and hyperframe are h2's own dependencies, but the core
imports them itself (``_h2/hpack.py``, ``_h2fixes.py``), so they are declared, with the
bounds the suite runs.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trio_h2t"
#: Import name -> distribution name, where they differ.
DISTRIBUTION = {"google": "protobuf"}
#: Subpackage -> the extra whose requirements it may import besides the base ones.
EXTRA = {"grpc": "grpc", "interop": "interop", "testing": "testing"}


def _requirements() -> tuple[list[Requirement], dict[str, list[Requirement]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = [Requirement(r) for r in project["dependencies"]]
    extras = {
        name: [Requirement(r) for r in reqs]
        for name, reqs in project["optional-dependencies"].items()
    }
    return base, extras


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of the non-stdlib, non-trio_h2t packages ``path`` imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "trio_h2t":
                found.add(top)
    return found


def _imports_by_area() -> dict[str, set[str]]:
    areas: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        area = parts[0] if len(parts) > 1 else "core"
        areas.setdefault(area, set()).update(third_party_imports(path))
    return areas


def test_every_imported_package_is_declared_for_its_area() -> None:
    """An import the area's declared requirements do not name fails, naming both."""
    base, extras = _requirements()
    missing = []
    for area, imports in _imports_by_area().items():
        allowed = {r.name.lower() for r in base}
        if area in EXTRA:
            allowed |= {r.name.lower() for r in extras[EXTRA[area]]}
        for name in sorted(imports):
            dist = DISTRIBUTION.get(name, name).lower()
            if dist not in allowed:
                missing.append(f"trio_h2t/{area if area != 'core' else ''} imports {dist}")
    assert not missing, missing


@pytest.mark.parametrize("dist", ["h2", "hpack", "hyperframe", "trio", "outcome"])
def test_installed_versions_are_inside_the_declared_bounds(dist: str) -> None:
    """The suite runs the version it installed: it must satisfy pyproject's bounds,
    which have both a floor and, for the packages whose internals we use, a ceiling."""
    base, extras = _requirements()
    declared = {r.name.lower(): r for r in base + extras["testing"]}
    requirement = declared[dist]
    version = metadata.version(dist)
    assert requirement.specifier.contains(version, prereleases=True), (dist, version)
    assert any(s.operator == ">=" for s in requirement.specifier), requirement
    if dist in ("h2", "hpack", "hyperframe"):
        assert any(s.operator == "<" for s in requirement.specifier), requirement


def test_an_undeclared_import_is_caught(tmp_path: Path) -> None:
    """A planted ``import idna`` is seen by the scan (idna is declared nowhere)."""
    planted = tmp_path / "_planted.py"
    planted.write_text("import idna\nfrom trio_h2t import H2Stream\nimport json\n")
    assert third_party_imports(planted) == {"idna"}
