"""The documentation's links to the tests that check its claims lead somewhere.

A design page links an invariant, or an ending's frames, to the test that checks it
as ``[`test_name`](../tests/test_file.py)``: the link opens the file (Sphinx copies it
into the site), the text names the test. Each such link must name a test function
(or a Hypothesis state machine's test) that the file defines, so a renamed or
deleted test fails here instead of leaving the page pointing at nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Any Markdown link into tests/, whatever its text.
_ANY_TEST_LINK = re.compile(r"\[([^\]]*)\]\((\.\./tests/[^)]*)\)")
#: The form every such link must take: a test's name in backticks, then its file.
_NAMED = re.compile(r"`(test_\w+)`")


def _links() -> list[tuple[str, str, str]]:
    """``(page:line, link text, target)`` for every link from docs/ into tests/."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in _ANY_TEST_LINK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.name}:{line}", match.group(1), match.group(2)))
    return found


def _defined_tests(path: Path) -> set[str]:
    """Names of the test functions ``path`` defines, at module level or in a class."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            names.add(node.name)
    return names


LINKS = _links()


def test_the_design_pages_link_their_tests() -> None:
    """The pages that link claims to tests do (so an empty list is not a silent pass):
    every ending, every control-buffer invariant, the wake-up rules."""
    pages = {where.partition(":")[0] for where, _, _ in LINKS}
    assert {"endings.md", "controlbuf.md", "architecture.md", "wakeups.md"} <= pages
    assert sum(where.startswith("endings.md") for where, _, _ in LINKS) >= 30


@pytest.mark.parametrize(("where", "text", "target"), LINKS, ids=[w for w, _, _ in LINKS])
def test_each_link_names_a_test_its_file_defines(where: str, text: str, target: str) -> None:
    """The link's text is a test's name and its file defines that test."""
    named = _NAMED.fullmatch(text)
    assert named, f"{where}: link text {text!r} does not name a test (use [`test_x`](...))"
    path = (DOCS / target).resolve()
    assert path.is_relative_to(ROOT / "tests"), f"{where}: {target} is not under tests/"
    assert path.is_file(), f"{where}: no {target}"
    assert named.group(1) in _defined_tests(path), f"{where}: {target} has no {named.group(1)}"


def test_the_checker_catches_a_wrong_name(tmp_path: Path) -> None:
    """A link naming a test that its file lacks is reported (the check is not vacuous)."""
    test_file = tmp_path / "test_x.py"
    test_file.write_text("def test_there() -> None:\n    pass\n", encoding="utf-8")
    assert _defined_tests(test_file) == {"test_there"}
    assert "test_gone" not in _defined_tests(test_file)
    assert _NAMED.fullmatch("`test_there`")
    assert not _NAMED.fullmatch("the test")
