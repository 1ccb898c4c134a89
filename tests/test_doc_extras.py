"""What the docs say about installing holds (issue 28).

- A missing extra fails at import with a message naming the extra to install: each
  module is imported in a fresh interpreter whose ``sys.meta_path`` hides the
  package the extra brings (Hypothesis, protobuf).
- docs/tutorial-testing.md's program, saved as a pytest file, is three passing tests
  under pytest-trio (``trio_mode = true``, as the page says).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Run as ``python -c BLOCKER hidden module``: imports ``module`` with every module
#: under the top-level names ``hidden`` (comma-separated) unfindable; prints the
#: error's type and message.
BLOCKER = """
import importlib, importlib.abc, sys
hidden = set(sys.argv[1].split(","))
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
try:
    importlib.import_module(sys.argv[2])
except ImportError as exc:
    print(type(exc).__name__, exc)
else:
    print("imported")
"""

#: ``(module, the package hidden, the extra the message must name)``.
EXTRAS = [
    ("trio_h2t.testing", "hypothesis", "testing"),
    ("trio_h2t.grpc.health", "google", "grpc"),
    ("trio_h2t.grpc.reflection", "google", "grpc"),
    ("trio_h2t.interop.server", "google", "interop"),
    ("trio_h2t.interop.client", "google", "interop"),
]


def import_without(module: str, hidden: str, *, path: Path | None = None) -> str:
    """What importing ``module`` prints with ``hidden`` missing (fresh interpreter;
    ``path`` first on ``sys.path`` if given)."""
    search = str(ROOT) if path is None else f"{path}{os.pathsep}{ROOT}"
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER, hidden, module],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": search},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def names_the_extra(message: str, extra: str) -> bool:
    """Whether ``message`` is an ImportError that says how to install ``extra``."""
    return message.startswith("ModuleNotFoundError") and f"trio_h2t[{extra}]" in message


@pytest.mark.parametrize(("module", "hidden", "extra"), EXTRAS)
def test_a_missing_extra_names_the_extra(module: str, hidden: str, extra: str) -> None:
    """Importing ``module`` without the package of its extra raises ModuleNotFoundError
    saying ``pip install 'trio_h2t[extra]'``."""
    message = import_without(module, hidden)
    assert names_the_extra(message, extra), message


def test_the_core_needs_no_extra() -> None:
    """trio_h2t and trio_h2t.grpc import without Hypothesis and without protobuf."""
    for module in ("trio_h2t", "trio_h2t.grpc"):
        assert import_without(module, "hypothesis,google") == "imported"


def tutorial_program(page: Path = ROOT / "docs" / "tutorial-testing.md") -> str:
    """The testing tutorial's program (its one Python sample)."""
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)
    assert len(blocks) == 1, len(blocks)
    return str(blocks[0])


def run_as_pytest_file(program: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """Save ``program`` as ``folder/test_tutorial.py`` and run pytest on it (trio_mode)."""
    (folder / "test_tutorial.py").write_text(program, encoding="utf-8")
    (folder / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_tutorial.py"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_testing_tutorial_is_a_pytest_file(tmp_path: Path) -> None:
    """docs/tutorial-testing.md saved as test_tutorial.py: pytest runs its three tests,
    and they pass."""
    result = run_as_pytest_file(tutorial_program(), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^3 passed", result.stdout, re.M), result.stdout
