"""Fixtures for the proxy tests: three interop backends behind nginx or haproxy.

The proxy configs are the ones docs/grpc.md ("Behind a proxy") shows: ``config``
reads the page's nginx or haproxy block (marked by a comment), and ``fill`` fills in
its ``@...@`` placeholders, so the page cannot drift from what is tested. Every process (the three
``python -m trio_h2t.interop.server --call_log`` backends and the proxy) runs on
127.0.0.1, writes only into the test's temporary folder, and is stopped at teardown
(SIGTERM, then SIGKILL after 10 s). A missing proxy binary *fails* the test, naming
the Debian package (``bash scripts/run-tests`` installs it): a skip would hide that
the proxy was never tried.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _helpers_common import free_port
from interop.conftest import PROC_TIMEOUT, _read_first_line, die_with_parent, stop

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "grpc.md"
#: Both proxies live in /usr/sbin, which is not on every user's PATH.
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
#: How many backend processes stand behind each proxy.
BACKENDS = 3


def config(kind: str) -> str:
    """The fenced block of docs/grpc.md's "Behind a proxy" section that follows the
    comment ``<!-- tests/proxies/conftest.py reads the next block: KIND -->``."""
    text = DOC.read_text(encoding="utf-8")
    marker = re.escape(f"<!-- tests/proxies/conftest.py reads the next block: {kind} -->")
    found = re.findall(rf"^{marker}\n```\w*\n(.*?)^```", text, re.S | re.M)
    assert len(found) == 1, f"docs/grpc.md has {len(found)} {kind} config blocks, expected 1"
    return str(found[0])


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``@NAME@`` replaced by ``values[NAME]`` (all must be known)."""
    out = re.sub(r"@([A-Z0-9_]+)@", lambda m: values[m.group(1)], template)
    assert "@" not in out, out
    return out


def binary(name: str) -> str:
    """The path of proxy ``name``; fails the test (never skips) if it is missing."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))
    if found is None:
        pytest.fail(
            f"{name} is not installed: install {name} (apt-get install {name}); "
            "`bash scripts/run-tests` does, when run as root",
            pytrace=False,
        )
    return found


@dataclass(frozen=True)
class Backend:
    """One interop server process and the file it logs its calls to."""

    port: int
    proc: subprocess.Popen[bytes]
    calls: Path


@dataclass(frozen=True)
class Proxy:
    """A running proxy in front of ``backends``, on 127.0.0.1:``port``."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    backends: tuple[Backend, ...]

    def calls(self) -> list[int]:
        """How many RPCs each backend has started so far (its call log's lines)."""
        return [len(b.calls.read_text().splitlines()) for b in self.backends]

    def methods(self) -> Counter[str]:
        """Every backend's calls, by ``:path``, added up."""
        out: Counter[str] = Counter()
        for b in self.backends:
            out.update(line.removeprefix("call ") for line in b.calls.read_text().splitlines())
        return out


def _start_backend(folder: Path, n: int) -> Backend:
    calls = folder / f"backend{n}.calls"
    calls.touch()
    with (folder / f"backend{n}.stderr").open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "trio_h2t.interop.server", "--port", "0"),
                *("--host", "127.0.0.1", "--call_log", str(calls)),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            preexec_fn=die_with_parent,
        )
    line = _read_first_line(proc, PROC_TIMEOUT)
    prefix = b"listening on port "
    if not line.startswith(prefix):
        stop(proc)
        pytest.fail(f"backend {n} did not start: {line!r}")
    return Backend(int(line[len(prefix) :]), proc, calls)


def _wait_accepting(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + PROC_TIMEOUT
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the proxy exited with {proc.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"the proxy did not accept connections:\n{log.read_text()}")
            time.sleep(0.05)


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def _proxy(kind: str, folder: Path, edits: dict[str, str] | None = None) -> Iterator[Proxy]:
    """The proxy with docs/grpc.md's config (each ``edits`` key replaced by its value)
    in front of three backends; teardown stops all and checks their logs."""
    exe = binary(kind)
    backends: list[Backend] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for n in range(1, BACKENDS + 1):
            backends.append(_start_backend(folder, n))
            procs.append(backends[-1].proc)
        port = free_port()
        values = {"DIR": str(folder), "PORT": str(port)}
        values.update({f"BACKEND_{n}": str(b.port) for n, b in enumerate(backends, 1)})
        cfg = folder / f"{kind}.conf"
        text = fill(config(kind), values)
        for old, new in (edits or {}).items():
            assert old in text, old
            text = text.replace(old, new)
        cfg.write_text(text)
        if kind == "nginx":
            args = [exe, "-p", f"{folder}/", "-e", str(folder / "error.log"), "-c", str(cfg)]
        else:
            args = [exe, "-db", "-f", str(cfg)]
        log = folder / f"{kind}.output"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        procs.insert(0, proc)  # stopped first: no call reaches a stopped backend
        _wait_accepting(proc, port, log)
        yield Proxy(port, proc, log, tuple(backends))
    finally:
        _stop_all(procs)
    _check_quiet(folder, allowed=() if edits is None else ("timed out",))


#: Log levels that mean the proxy met something wrong (nginx's error log levels
#: from [warn] up; haproxy's alerts and warnings on its output).
_TROUBLE = re.compile(r"\[(warn|error|crit|alert|emerg)\]|\[(ALERT|WARNING)\]")


def _check_quiet(folder: Path, *, allowed: tuple[str, ...] = ()) -> None:
    """After the stop: the proxy logged no warning or error, and each backend's
    stderr is empty (a handler exception would show there)."""
    for name in ("error.log", "nginx.output", "haproxy.output"):
        path = folder / name
        if path.exists():
            lines = path.read_text().splitlines()
            bad = [
                line
                for line in lines
                if _TROUBLE.search(line) and not any(a in line for a in allowed)
            ]
            assert bad == [], f"{name}:\n" + "\n".join(bad)
    for n in range(1, BACKENDS + 1):
        text = (folder / f"backend{n}.stderr").read_text()
        assert text == "", f"backend {n} logged:\n{text}"


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """nginx with docs/grpc.md's config, in front of three interop backends."""
    yield from _proxy("nginx", tmp_path_factory.mktemp("nginx"))


@pytest.fixture(scope="module")
def haproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """haproxy with docs/grpc.md's config, in front of three interop backends."""
    yield from _proxy("haproxy", tmp_path_factory.mktemp("haproxy"))


@pytest.fixture(scope="module")
def nginx_1s_read_timeout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """nginx as docs/grpc.md shows it, but with ``grpc_read_timeout 1s``."""
    edits = {"grpc_read_timeout 60s;": "grpc_read_timeout 1s;"}
    yield from _proxy("nginx", tmp_path_factory.mktemp("nginx-1s"), edits)


@pytest.fixture(scope="module")
def haproxy_1s_server_timeout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """haproxy as docs/grpc.md shows it, but with ``timeout server 1s``."""
    edits = {"timeout server 60s": "timeout server 1s"}
    yield from _proxy("haproxy", tmp_path_factory.mktemp("haproxy-1s"), edits)
