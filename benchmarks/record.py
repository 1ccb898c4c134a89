"""``--record``: a benchmark writes its own figures into the file the plots are drawn from.

The scripts whose figures the documentation plots (``peers/grpc_peers.py``, ``bulk.py``)
take ``--record [FILE]`` (:func:`add_record_option`; FILE defaults to
``benchmarks/results.json``). At the start of a run they call :func:`begin`, at the
end :func:`record` with their block's name and rows: the block in the results file
is replaced (or, with ``merge_on``, only its rows from the same source), and beside
the rows go what makes them reproducible and comparable:

- ``commit``: ``git rev-parse --short HEAD`` of this tree, ``-dirty`` appended when
  the work tree has changes (the figures are then not exactly that commit's);
- ``date``: UTC, ISO 8601, when the run started and ended;
- ``command``: the command line, as run from the repository's root;
- ``load``: the one-minute load average at the start and at the end (the machine is
  shared: a loaded run is marked as such by its own numbers, not by memory).

``benchmarks/plot_results.py`` then redraws ``docs/images/benchmarks/*.png`` from the
file; nothing is retyped by hand. The write is atomic (a temporary file renamed over
the old one), so an interrupted run leaves the previous figures whole.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results.json"


def add_record_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--record [FILE]`` (FILE: the results file, ``benchmarks/results.json``)."""
    parser.add_argument(
        "--record",
        nargs="?",
        const=str(RESULTS),
        default=None,
        metavar="FILE",
        help="write this run's figures, commit, date and command into FILE "
        f"(default {RESULTS.relative_to(ROOT)}), which benchmarks/plot_results.py draws",
    )


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def commit() -> str:
    """This tree's short commit, with ``-dirty`` if its work tree has changes
    (``unknown`` outside a git checkout)."""
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{head}-dirty" if _git("status", "--porcelain", "--untracked-files=no") else head


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _load() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover - no load average on this platform
        return math.nan


def command(argv: list[str] | None = None) -> str:
    """The command line that ran, with the script's path relative to the repository."""
    args = sys.argv if argv is None else argv
    script = Path(args[0]).resolve()
    try:
        shown = script.relative_to(ROOT).as_posix()
    except ValueError:
        shown = args[0]
    return shlex.join(["python", shown, *args[1:]])


def begin(argv: list[str] | None = None) -> dict[str, Any]:
    """What a run knows at its start: commit, start time, command, load. Pass the
    result to :func:`record`."""
    return {
        "commit": commit(),
        "date": {"start": _now()},
        "command": command(argv),
        "load": {"start": _load()},
    }


def _clean(value: Any) -> Any:
    """JSON without NaN (not JSON): a figure that could not be computed is null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def record(
    path: str | Path,
    block: str,
    rows: list[dict[str, Any]],
    started: dict[str, Any],
    *,
    merge_on: str | None = None,
    **fields: Any,
) -> Path:
    """Write ``rows`` as results block ``block`` of ``path``, with ``started``'s
    provenance (from :func:`begin`) completed now, and ``fields`` beside them.

    Without ``merge_on`` the block is replaced whole. With it (a row key, e.g.
    ``"tree"``), only the block's rows whose key has a value among the new rows' are
    replaced; the others stay, each source's provenance under ``runs[value]``.
    """
    path = Path(path)
    results: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    provenance = {
        **started,
        "date": {**started["date"], "end": _now()},
        "load": {**started["load"], "end": _load()},
    }
    rows = _clean(rows)
    if merge_on is None:
        new: dict[str, Any] = {**provenance, **_clean(fields), "rows": rows}
    else:
        old = results.get(block, {})
        keys = {r[merge_on] for r in rows}
        kept = [r for r in old.get("rows", []) if r.get(merge_on) not in keys]
        runs = dict(old.get("runs", {}))
        for key in keys:
            runs[key] = provenance
        new = {**old, **_clean(fields), "runs": runs, "rows": kept + rows}
    results[block] = new
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
