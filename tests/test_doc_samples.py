"""Every fenced Python sample in README.md and docs/ runs, as a whole program, and
prints what its page says it prints.

A promise of output is one of (the convention; :func:`promises` reads them):

- a ``# prints: TEXT`` comment in the sample, at the end of a line or on its own;
- the sentence right after the sample, when it begins "It prints": each of its
  backticked spans (``It prints `a`, then `b`.``);
- a fenced ``text`` block right after the sample whose first line is
  ``# output``: its remaining lines.

Each promised text must be a whole line of the sample's output, in the order given.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```python\n(.*?)^```\n?", re.S | re.M)
_COMMENT = re.compile(r"#\s*prints:\s*(.+?)\s*$", re.M)
_SENTENCE = re.compile(r"\A\s*It prints (.*?)(?:\.\s|\.$|\n\n)", re.S)
_OUTPUT_BLOCK = re.compile(r"\A\s*```text\n# output\n(.*?)^```", re.S | re.M)


def promises(code: str, after: str) -> list[str]:
    """The output lines a sample promises: ``code`` is the sample, ``after`` the page
    text that follows its fence."""
    found = [m.group(1) for m in _COMMENT.finditer(code)]
    sentence = _SENTENCE.match(after)
    if sentence:
        found += re.findall(r"`([^`]+)`", sentence.group(1))
    block = _OUTPUT_BLOCK.match(after)
    if block:
        found += [line for line in block.group(1).splitlines() if line.strip()]
    return found


def unkept(promised: list[str], stdout: str) -> list[str]:
    """The promised lines not found in ``stdout`` in order (empty: all kept)."""
    lines = [line.rstrip() for line in stdout.splitlines()]
    missing: list[str] = []
    at = 0
    for text in promised:
        try:
            at = lines.index(text, at) + 1
        except ValueError:
            missing.append(text)
    return missing


def samples(pages: list[Path] | None = None) -> list[tuple[str, str, list[str]]]:
    """``(page:line, code, promised output)`` for every Python sample."""
    found = []
    if pages is None:
        pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            name = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}:{line}"
            found.append((name, match.group(1), promises(match.group(1), text[match.end() :])))
    return found


SAMPLES = samples()


def run_sample(name: str, code: str, promised: list[str]) -> None:
    """Run ``code`` in a fresh interpreter (60 s at most); it must exit 0 and print
    each promised line."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    missing = unkept(promised, result.stdout)
    assert not missing, f"{name} did not print {missing}; it printed:\n{result.stdout}"


def test_samples_are_found() -> None:
    """The collector finds the README's samples (so an empty list is not a silent pass)."""
    assert any(name.startswith("README.md") for name, _, _ in SAMPLES)


def test_promises_are_found() -> None:
    """The collector finds the pages' promises of output (docs/grpc.md's "It prints")."""
    assert any(promised for _, _, promised in SAMPLES)


def test_promise_conventions_are_read() -> None:
    """Each of the three ways of promising output is read, in order."""
    code = 'print("a")  # prints: a\n# prints: b\n'
    after = "\nIt prints `c`, then `d`. More.\n"
    assert promises(code, after) == ["a", "b", "c", "d"]
    assert promises("", "\n```text\n# output\ne\nf\n```\n") == ["e", "f"]
    assert unkept(["a", "c"], "a\nb\nc\n") == []
    assert unkept(["c", "a"], "a\nb\nc\n") == ["a"]  # out of order


@pytest.mark.parametrize(("name", "code", "promised"), SAMPLES, ids=[n for n, _, _ in SAMPLES])
def test_sample_runs(name: str, code: str, promised: list[str]) -> None:
    """The sample runs to completion in a fresh interpreter, within 60 seconds, and
    prints what its page promises."""
    run_sample(name, code, promised)
