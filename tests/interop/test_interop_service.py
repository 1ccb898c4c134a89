"""The standard interop cases (trio_h2t.interop) over 127.0.0.1, three ways.

(a) trio_h2t's client against grpcio's TestService (``grpcio_testservice.py
server``, grpcio's sync server in a subprocess); (b) grpcio's sync stubs
(``grpcio_testservice.py client``, a subprocess) against trio_h2t's server;
(c) ``python -m trio_h2t.interop.client --test_case all`` against ``python -m
trio_h2t.interop.server``, both subprocesses. Servers listen on port 0 (a free
port) and print it. grpcio's service stubs are generated at test time by
``scripts/gen_interop_protos.py --grpc-out``, which also checks that the shipped
``_pb2`` modules match their ``.proto`` files.

All 18 cases run all three ways. grpcio's TestService and grpcio's client see
each message's Compressed-Flag through grpc core's channel argument
``grpc.per_message_decompression`` = 0, which hands each message to the
application as it was on the wire (``grpcio_testservice.py`` explains how): the
server checks ``expect_compressed`` (CompressedRequest) on every request, the
client checks the flags of the ``server_compressed_*`` responses. One deviation,
on grpcio's client side: in ``client_compressed_streaming`` its uncompressed
second message is 45904 incompressible bytes, not zeros, since grpcio's client
cannot clear the flag of one message on a compressing call and grpc core sends a
message uncompressed when compressing would not shrink it.
"""

from __future__ import annotations

import ast
import functools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import trio_h2t
from trio_h2t import grpc
from trio_h2t.interop import client as interop_client, server as interop_server
from trio_h2t.interop.protos import messages_pb2 as M
from trio_h2t.interop.server import TestService

ROOT = Path(__file__).resolve().parents[2]
PEER = str(Path(__file__).with_name("grpcio_testservice.py"))
LIMIT = 120
ALL = list(interop_client.CASES)


SCRIPT = str(ROOT / "scripts" / "gen_interop_protos.py")


@pytest.fixture(scope="module")
def grpc_stubs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """grpcio's test_pb2_grpc, generated into a fresh directory."""
    out = tmp_path_factory.mktemp("grpc_stubs")
    subprocess.run(
        [sys.executable, SCRIPT, "--grpc-out", str(out)], check=True, timeout=60, cwd=ROOT
    )
    assert (out / "test_pb2_grpc.py").exists()
    return out


def test_shipped_pb2_modules_match_their_protos() -> None:
    """The generated modules describe exactly what the .proto files say (--check)."""
    result = subprocess.run(
        [sys.executable, SCRIPT, "--check"],
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        env=_env(),
        check=False,
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), str(ROOT)])
    return env


async def _read_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


@asynccontextmanager
async def _subprocess_server(argv: list[str], env: dict[str, str]) -> AsyncIterator[int]:
    """Run a server subprocess that prints its port as the last word of its first line."""
    async with trio.open_nursery() as nursery:
        run = functools.partial(
            trio.run_process,
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            check=False,
        )
        proc: trio.Process = await nursery.start(run)
        assert proc.stdout is not None
        line = await _read_line(proc.stdout)
        assert "port" in line, line
        try:
            yield int(line.split()[-1])
        finally:
            assert proc.stdin is not None
            await proc.stdin.aclose()
            proc.terminate()


def test_interop_imports_only_public_names() -> None:
    """trio_h2t.interop imports trio_h2t and trio_h2t.grpc's public names, and its protos
    (and trio_h2t/_shared.py's plain helpers, the one allowed private module)."""
    for path in sorted((ROOT / "trio_h2t" / "interop").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.module in {None, "protos"} or node.module.startswith("protos."), (
                        f"{path.name}: from .{node.module}"
                    )
                    continue
                module = node.module or ""
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                module, names = "", [a.name for a in node.names]
            else:
                continue
            if module == "trio_h2t._shared":
                continue  # the one allowed private module (tests/grpc_layer/test_wire.py's SHARED)
            for full in [module, *(f"{module}.{n}" if module else n for n in names)]:
                if full.startswith("trio_h2t"):
                    assert not any(p.startswith("_") for p in full.split(".")), (
                        f"{path.name} imports {full}"
                    )


def test_cases_are_the_eighteen_described() -> None:
    """CASES holds exactly these 18 cases of grpc/grpc doc/interop-test-descriptions.md."""
    assert sorted(ALL) == sorted(
        [
            "empty_unary",
            "large_unary",
            "client_streaming",
            "server_streaming",
            "ping_pong",
            "empty_stream",
            "cancel_after_begin",
            "cancel_after_first_response",
            "timeout_on_sleeping_server",
            "status_code_and_message",
            "special_status_message",
            "custom_metadata",
            "unimplemented_method",
            "unimplemented_service",
            "client_compressed_unary",
            "server_compressed_unary",
            "client_compressed_streaming",
            "server_compressed_streaming",
        ]
    )


async def test_our_client_against_grpcio_server(grpc_stubs: Path) -> None:
    """(a) All 18 cases pass with trio_h2t's client against grpcio's TestService."""
    names = ALL
    lines: list[str] = []
    with trio.fail_after(LIMIT):
        async with _subprocess_server([sys.executable, PEER, "server"], _env(grpc_stubs)) as port:
            passed, failed = await interop_client.run_cases("127.0.0.1", port, names, lines.append)
    assert lines == [f"PASS {n}" for n in names] + [f"{len(names)} passed, 0 failed"]
    assert (passed, failed) == (18, 0)


async def test_grpcio_testservice_checks_the_request_flag_both_ways(grpc_stubs: Path) -> None:
    """grpcio's TestService fails a request whose Compressed-Flag disagrees with
    expect_compressed (INVALID_ARGUMENT), either way, and accepts a matching one."""
    outcomes: list[tuple[bool, bool, str]] = []
    with trio.fail_after(LIMIT):
        async with (
            _subprocess_server([sys.executable, PEER, "server"], _env(grpc_stubs)) as port,
            grpc.open_channel("127.0.0.1", port) as ch,
        ):
            unary = ch.unary_unary(
                "/grpc.testing.TestService/UnaryCall",
                request_serializer=M.SimpleRequest.SerializeToString,
                response_deserializer=M.SimpleResponse.FromString,
            )
            for expect in (True, False):
                for compression in ("gzip", None):
                    req = M.SimpleRequest(
                        response_size=3,
                        expect_compressed=M.BoolValue(value=expect),
                        payload=M.Payload(body=bytes(1000)),
                    )
                    try:
                        await unary(req, compression=compression, timeout=10)
                    except grpc.RpcError as exc:
                        outcome = exc.code.name
                    else:
                        outcome = "OK"
                    outcomes.append((expect, compression == "gzip", outcome))
    assert outcomes == [
        (True, True, "OK"),
        (True, False, "INVALID_ARGUMENT"),
        (False, True, "INVALID_ARGUMENT"),
        (False, False, "OK"),
    ]


async def test_grpcio_client_against_our_server(grpc_stubs: Path) -> None:
    """(b) grpcio's sync stubs pass all 18 cases against trio_h2t's server (one deviation)."""
    names = ALL
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(grpc.Server([TestService()]), 0, host="127.0.0.1") as srv:
            result = await trio.run_process(
                [sys.executable, PEER, "client", str(srv.port), *names],
                capture_stdout=True,
                capture_stderr=True,
                env=_env(grpc_stubs),
                check=False,
            )
    out = result.stdout.decode()
    assert out.splitlines() == [f"PASS {n}" for n in names], out + result.stderr.decode()[-2000:]
    assert result.returncode == 0


async def test_our_client_against_our_server_commands() -> None:
    """(c) python -m trio_h2t.interop.client --test_case all against .server: 18 passed."""
    env = _env()
    server = [sys.executable, "-m", "trio_h2t.interop.server", "--port", "0", "--host", "127.0.0.1"]
    with trio.fail_after(LIMIT):
        async with _subprocess_server(server, env) as port:
            result = await trio.run_process(
                [
                    sys.executable,
                    "-m",
                    "trio_h2t.interop.client",
                    "--server_host",
                    "127.0.0.1",
                    "--server_port",
                    str(port),
                    "--test_case",
                    "all",
                ],
                capture_stdout=True,
                capture_stderr=True,
                env=env,
                check=False,
            )
    lines = result.stdout.decode().splitlines()
    assert lines == [f"PASS {n}" for n in ALL] + ["18 passed, 0 failed"], lines
    assert result.returncode == 0


async def test_client_command_fails_nonzero_on_a_failed_case() -> None:
    """A failing case prints FAIL and the summary counts it; the exit status is 1."""
    handler = grpc.method_handlers_generic_handler("grpc.testing.Other", {})
    env = _env()
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(grpc.Server([handler]), 0, host="127.0.0.1") as srv:
            result = await trio.run_process(
                [
                    sys.executable,
                    "-m",
                    "trio_h2t.interop.client",
                    "--server_host",
                    "127.0.0.1",
                    "--server_port",
                    str(srv.port),
                    "--test_case",
                    "large_unary",
                ],
                capture_stdout=True,
                env=env,
                check=False,
            )
    lines = result.stdout.decode().splitlines()
    assert lines[0].startswith("FAIL large_unary: RpcError"), lines
    assert lines[1:] == ["0 passed, 1 failed"]
    assert result.returncode == 1


def test_client_command_that_cannot_connect_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing listening: one line on stderr naming the address and why, exit 1 (it
    was a traceback through three chained exceptions)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    status = interop_client.main(
        ["--server_host", "127.0.0.1", "--server_port", str(port), "--test_case", "empty_unary"]
    )
    err = capsys.readouterr().err
    assert status == 1
    assert err.splitlines() == [
        f"python -m trio_h2t.interop.client: cannot connect to 127.0.0.1:{port}:"
        f" Error connecting to ('127.0.0.1', {port}): Connection refused"
    ]


def test_server_command_on_a_taken_port_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A port in use: one line on stderr, exit 1 (it was an ExceptionGroup traceback)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        status = interop_server.main(["--port", str(port), "--host", "127.0.0.1"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.splitlines() == [
        f"python -m trio_h2t.interop.server: cannot listen on 127.0.0.1:{port}:"
        " Address already in use"
    ]


def test_server_command_stops_quietly_on_ctrl_c() -> None:
    """SIGINT (Ctrl-C) ends the server with status 130 and no traceback (the
    KeyboardInterrupt came out of serve's nursery in a group, which the old
    ``except KeyboardInterrupt`` missed)."""
    # The child restores Python's SIGINT handler: a shell's background job starts
    # with SIGINT ignored, and the test must not depend on how pytest was started.
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
        " from trio_h2t.interop.server import main;"
        " sys.exit(main(['--port', '0', '--host', '127.0.0.1']))"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("listening on port ")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=LIMIT)
    assert proc.returncode == 130, err
    assert (out, err) == ("", "")
