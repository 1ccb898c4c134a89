"""Every fenced Python sample in README.md and docs/ runs, as a whole program."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _samples() -> list[tuple[str, str]]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found


SAMPLES = _samples()


def test_samples_are_found() -> None:
    """The collector finds the README's samples (so an empty list is not a silent pass)."""
    assert any(name.startswith("README.md") for name, _ in SAMPLES)


@pytest.mark.parametrize(("name", "code"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_sample_runs(name: str, code: str) -> None:
    """The sample runs to completion in a fresh interpreter, within 60 seconds."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
