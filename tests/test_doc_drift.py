"""Each kind of docs-against-code check fails on a planted drift (issue 28).

One case per kind: the check is run on a copy of its input with one drift planted
(a new public async function, a docstring that lies, a sample that prints something
else, a new shell block, a name missing from the reference, a new call site against
an "only" claim, an import that forgets its extra, the tutorial's loop unguarded),
and must fail, naming what drifted. Run one with
``python -m pytest tests/test_doc_drift.py -k KIND``.
"""

from __future__ import annotations

import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import test_checkpoints
import test_design_claims
import test_doc_extras
import test_doc_samples
import test_doc_shell
import test_docs_site
import trio
import trio.testing


def plant_public_async_function(tmp_path: Path) -> None:
    """A new public async function with no probe is named by the enumeration."""
    module = types.ModuleType("planted_api")

    async def fetch_everything() -> None:
        """Checkpoint: always."""

    module.fetch_everything = fetch_everything  # type: ignore[attr-defined]
    module.__all__ = ["fetch_everything"]  # type: ignore[attr-defined]
    sys.modules["planted_api"] = module
    try:
        found = test_checkpoints.public_async_api(["planted_api"])
    finally:
        del sys.modules["planted_api"]
    assert test_checkpoints.unprobed(found) == ["planted_api.fetch_everything"]


def plant_docstring_that_lies(tmp_path: Path) -> None:
    """A docstring claiming ``always`` over code that never checkpoints fails its
    probe, and a docstring whose claim changes no longer matches its probe's."""

    async def quick() -> None:
        """Checkpoint: always."""

    assert test_checkpoints.claim_of(quick) == "always"

    async def probe() -> None:
        with trio.testing.assert_checkpoints():
            await quick()

    with pytest.raises(AssertionError, match="did not yield"):
        trio.run(probe)

    async def changed() -> None:
        """Checkpoint: entering (it may wait)."""

    registered, _ = test_checkpoints.PROBES["trio_h2t.ClientConnection.aclose"]
    assert test_checkpoints.claim_of(changed) != registered


def plant_sample_output(tmp_path: Path) -> None:
    """A sample that prints other than its comment promises fails."""
    code = 'print("hello")  # prints: goodbye\n'
    promised = test_doc_samples.promises(code, "")
    assert promised == ["goodbye"]
    with pytest.raises(AssertionError, match="did not print"):
        test_doc_samples.run_sample("planted.md:1", code, promised)
    after = "\nIt prints `hi`.\n"
    with pytest.raises(AssertionError, match="did not print"):
        test_doc_samples.run_sample("planted.md:2", 'print("ho")\n', ["hi"])
    assert test_doc_samples.promises('print("ho")\n', after) == ["hi"]


def plant_shell_block(tmp_path: Path) -> None:
    """A new shell block on a page has no run, and is named."""
    (tmp_path / "docs").mkdir()
    readme = (test_doc_shell.ROOT / "README.md").read_text(encoding="utf-8")
    (tmp_path / "README.md").write_text(readme + "\n```sh\nmake everything\n```\n")
    blocks = test_doc_shell.shell_blocks(tmp_path)
    missing = sorted(set(blocks) - set(test_doc_shell.RUNS))
    assert missing == ["README.md: make everything"]


def plant_reference_gap(tmp_path: Path) -> None:
    """A public name with no entry on its API page is named."""
    (tmp_path / "api.html").write_text('<p id="trio_h2t.open_connection">x</p>')
    names = {"trio_h2t.open_connection": "api.html", "trio_h2t.open_server": "api.html"}
    assert test_docs_site.missing_from_reference(tmp_path, names) == ["trio_h2t.open_server"]


def plant_only_claim_breach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call to ``discard_batch`` outside loopy fails the "only loopy" test."""
    package = tmp_path / "trio_h2t"
    shutil.copytree(test_design_claims.PACKAGE, package, ignore=shutil.ignore_patterns("*.pyc"))
    (package / "_planted.py").write_text("def steal(buf):\n    buf.discard_batch()\n")
    monkeypatch.setattr(test_design_claims, "PACKAGE", package)
    with pytest.raises(AssertionError, match=r"_planted\.py"):
        test_design_claims.test_only_loopy_consumes_the_control_buffer()


def plant_extra_forgotten(tmp_path: Path) -> None:
    """A module that imports Hypothesis without the extra's message fails the check."""
    (tmp_path / "planted_kit.py").write_text("import hypothesis\n")
    message = test_doc_extras.import_without("planted_kit", "hypothesis", path=tmp_path)
    assert message.startswith("ModuleNotFoundError")
    assert not test_doc_extras.names_the_extra(message, "testing")


def plant_tutorial_loop(tmp_path: Path) -> None:
    """The tutorial with its run-as-a-program loop unguarded (as it was) is not a pytest
    file: the loop runs at import and the last test then sees two cancellations."""
    program = test_doc_extras.tutorial_program()
    assert 'if __name__ == "__main__":' in program
    planted = program.replace('if __name__ == "__main__":', "if True:")
    result = test_doc_extras.run_as_pytest_file(planted, tmp_path)
    assert result.returncode != 0, result.stdout


DRIFTS: dict[str, Callable[..., None]] = {
    "checkpoint-enumeration": plant_public_async_function,
    "checkpoint-claim": plant_docstring_that_lies,
    "sample-output": plant_sample_output,
    "shell-block": plant_shell_block,
    "api-reference": plant_reference_gap,
    "only-claim": plant_only_claim_breach,
    "missing-extra": plant_extra_forgotten,
    "tutorial-as-pytest": plant_tutorial_loop,
}


@pytest.mark.parametrize("kind", sorted(DRIFTS))
def test_a_planted_drift_fails_its_check(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check of ``kind`` catches a drift planted in a copy of its input."""
    plant = DRIFTS[kind]
    if "monkeypatch" in plant.__code__.co_varnames[: plant.__code__.co_argcount]:
        plant(tmp_path, monkeypatch)
    else:
        plant(tmp_path)
