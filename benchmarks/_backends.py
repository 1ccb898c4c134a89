"""Backend processes a benchmark script starts from its own roles, and their environment.

A script such as ``grpc_balancing.py`` or ``grpc_go.py`` runs itself again as a
server (its ``backend`` / ``serve`` role): :func:`child_env` is the environment
such a child runs with (this tree first on ``PYTHONPATH``, so it imports the same
``trio_h2t`` as its parent). A backend that prints ``PORT N`` once it listens and
serves until its stdin ends is started with :func:`start_backends` (or one with
:func:`start_port_printer`) and stopped with :func:`stop_backends`.

No state: the caller owns the processes it is given back.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

#: The tree holding ``trio_h2t/`` and ``benchmarks/``.
ROOT = Path(__file__).resolve().parent.parent
#: A started backend: its process and the port it printed.
Backend = tuple["subprocess.Popen[str]", int]
#: How long a stopped backend may take to exit after its stdin ends, in seconds.
STOP_TIMEOUT = 10.0


def child_env() -> dict[str, str]:
    """This process's environment with this tree first on ``PYTHONPATH``, the
    parent's own entries after it (an unset or empty one adds none: an empty entry
    would put the child's working directory on its path)."""
    inherited = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), inherited])))


def start_port_printer(
    argv: Sequence[str],
    *,
    stderr: IO[Any] | int | None = None,
    preexec_fn: Callable[[], object] | None = None,
) -> Backend:
    """Start ``argv`` (with :func:`child_env`) and read its first line, ``PORT N``.

    Its stdin and stdout are pipes (closing stdin stops it: :func:`stop_backends`).
    Raises ``RuntimeError``, the process killed, if the first line is anything else.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=child_env(),
        preexec_fn=preexec_fn,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line[:1] != ["PORT"]:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"a backend did not start: it printed {line!r}, not PORT N")
    return proc, int(line[1])


def start_backends(
    argv: Sequence[str],
    n: int,
    *,
    stderr: IO[Any] | int | None = None,
    preexec_fn: Callable[[], object] | None = None,
) -> list[Backend]:
    """``n`` processes of ``argv`` (:func:`start_port_printer`), one after the other.

    If one does not start, those already started are stopped before the error propagates.
    """
    started: list[Backend] = []
    try:
        for _ in range(n):
            started.append(start_port_printer(argv, stderr=stderr, preexec_fn=preexec_fn))
    except BaseException:
        stop_backends(started)
        raise
    return started


def stop_backends(backends: Sequence[Backend]) -> None:
    """End every backend's stdin at once, then wait for each (a kill after
    ``STOP_TIMEOUT``); their pipes are closed."""
    for proc, _ in backends:
        if proc.stdin is not None:
            proc.stdin.close()
    for proc, _ in backends:
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
