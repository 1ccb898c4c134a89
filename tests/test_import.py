"""Importing trio_h2t has no process-wide side effects."""

from __future__ import annotations

import subprocess
import sys


def test_import_leaves_hpack_logger_level_unchanged() -> None:
    """A fresh interpreter's hpack loggers keep their level across ``import trio_h2t``."""
    code = (
        "import logging\n"
        "before = [logging.getLogger(n).level for n in ('hpack', 'hpack.hpack')]\n"
        "import trio_h2t, trio_h2t._connection\n"
        "after = [logging.getLogger(n).level for n in ('hpack', 'hpack.hpack')]\n"
        "assert before == after == [logging.NOTSET, logging.NOTSET], (before, after)\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "ok"
