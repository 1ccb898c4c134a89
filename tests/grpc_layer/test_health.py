"""grpc.health.v1.Health on trio_h2t.grpc (trio_h2t/grpc/health.py).

Check and Watch with our HealthStub and with grpcio-health-checking's stub (in a
subprocess, ``stubs_peer.py``) against our server over 127.0.0.1; the committed
health_pb2 matches a fresh generation by scripts/gen_health.py.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import trio_h2t
from trio_h2t import grpc
from trio_h2t.grpc import health

from .stubgen import ROOT

PEER = str(Path(__file__).with_name("stubs_peer.py"))
LIMIT = 60
S = health.ServingStatus


@asynccontextmanager
async def _served(servicer: health.HealthServicer) -> AsyncIterator[trio_h2t.H2Server]:
    async with trio_h2t.open_server(grpc.Server([servicer]), 0, host="127.0.0.1") as server:
        yield server


def test_committed_health_pb2_matches_fresh_generation(tmp_path: Path) -> None:
    """scripts/gen_health.py regenerates the committed health_pb2.py and .pyi exactly."""
    spec = importlib.util.spec_from_file_location("gen_health", ROOT / "scripts/gen_health.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(tmp_path)
    for name in ("health_pb2.py", "health_pb2.pyi"):
        committed = (ROOT / "trio_h2t/grpc/protos" / name).read_text()
        assert (tmp_path / name).read_text() == committed, name


def test_health_pb2_coexists_with_grpcio_health() -> None:
    """Ours and grpcio-health-checking's messages import together and share the wire."""
    from grpc_health.v1 import health_pb2 as theirs

    ours = health.HealthCheckResponse(status=S.SERVICE_UNKNOWN).SerializeToString()
    assert (
        theirs.HealthCheckResponse.FromString(ours).status
        == theirs.HealthCheckResponse.SERVICE_UNKNOWN
    )


async def test_our_stub_check() -> None:
    """Check: the server's own status, a set status, NOT_FOUND for an unknown or cleared one."""
    servicer = health.HealthServicer()
    servicer.set_status("routes", "NOT_SERVING")
    servicer.set_status("other", S.SERVING)
    with trio.fail_after(LIMIT):
        async with _served(servicer) as server, grpc.open_channel("127.0.0.1", server.port) as ch:
            stub = health.HealthStub(ch)
            got = await stub.Check(health.HealthCheckRequest(service=""))
            assert got.status == S.SERVING
            got = await stub.Check(health.HealthCheckRequest(service="routes"))
            assert got.status == S.NOT_SERVING
            servicer.clear_status("other")
            for name in ("other", "nope"):
                with pytest.raises(grpc.RpcError) as info:
                    await stub.Check(health.HealthCheckRequest(service=name))
                assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert servicer.status("routes") == S.NOT_SERVING
    assert servicer.status("other") is None


async def test_our_stub_watch_updates_and_graceful_shutdown() -> None:
    """Watch: SERVICE_UNKNOWN first, each change once, then NOT_SERVING and OK at shutdown."""
    servicer = health.HealthServicer()
    with trio.fail_after(LIMIT):
        async with _served(servicer) as server, grpc.open_channel("127.0.0.1", server.port) as ch:
            stub = health.HealthStub(ch)
            async with stub.Watch(health.HealthCheckRequest(service="svc")) as call:
                seen = [(await call.__anext__()).status]
                for status in ("SERVING", "SERVING", "NOT_SERVING"):  # the repeat is not sent
                    servicer.set_status("svc", status)
                    if seen[-1] != S.Value(status):
                        seen.append((await call.__anext__()).status)
                servicer.clear_status("svc")
                seen.append((await call.__anext__()).status)
                servicer.set_status("svc", "SERVING")
                seen.append((await call.__anext__()).status)
                servicer.enter_graceful_shutdown()
                seen.extend([r.status async for r in call])
                assert call.code == grpc.StatusCode.OK
            servicer.set_status("svc", "SERVING")  # ignored after shutdown
    assert seen == [
        S.SERVICE_UNKNOWN,
        S.SERVING,
        S.NOT_SERVING,
        S.SERVICE_UNKNOWN,
        S.SERVING,
        S.NOT_SERVING,
    ]
    assert servicer.status("svc") == S.NOT_SERVING


async def test_watch_of_an_unknown_service_stays_open_then_ends_without_not_serving() -> None:
    """Watch of a service never set: SERVICE_UNKNOWN, the call stays open (as grpc's
    doc/health-checking.md says), and enter_graceful_shutdown ends it with OK and no
    NOT_SERVING (only set services become NOT_SERVING)."""
    servicer = health.HealthServicer()
    with trio.fail_after(LIMIT):
        async with _served(servicer) as server, grpc.open_channel("127.0.0.1", server.port) as ch:
            stub = health.HealthStub(ch)
            async with stub.Watch(health.HealthCheckRequest(service="nope")) as call:
                seen = [(await call.__anext__()).status]
                with trio.move_on_after(0.2) as still_open:
                    await call.__anext__()
                assert still_open.cancelled_caught  # no end, no further message
                servicer.enter_graceful_shutdown()
                seen.extend([r.status async for r in call])
                assert call.code == grpc.StatusCode.OK
    assert seen == [S.SERVICE_UNKNOWN]
    assert servicer.status("nope") is None


async def test_watch_ends_when_server_stops() -> None:
    """A Watch still open when the server stops (no grace) ends with an RpcError."""
    servicer = health.HealthServicer()
    with trio.fail_after(LIMIT):
        async with _served(servicer) as server, grpc.open_channel("127.0.0.1", server.port) as ch:
            stub = health.HealthStub(ch)

            async def watch_past_stop() -> None:
                async with stub.Watch(health.HealthCheckRequest(service="")) as call:
                    assert (await call.__anext__()).status == S.SERVING
                    await server.aclose(grace=0)
                    async for _ in call:
                        pass

            with pytest.raises(grpc.RpcError) as info:
                await watch_past_stop()
    assert info.value.code == grpc.StatusCode.UNAVAILABLE  # the connection ended under it


async def test_grpcio_health_client_against_our_server() -> None:
    """grpcio-health-checking's stub: Check, NOT_FOUND, Watch SERVICE_UNKNOWN then the update."""
    servicer = health.HealthServicer()
    servicer.set_status("routes", "NOT_SERVING")
    out = b""
    with trio.fail_after(LIMIT):
        async with _served(servicer) as server, trio.open_nursery() as nursery:
            run = functools.partial(
                trio.run_process,
                [sys.executable, PEER, "-", "health", str(server.port)],
                stdout=subprocess.PIPE,
                check=False,
            )
            proc: trio.Process = await nursery.start(run)
            assert proc.stdout is not None
            while b"watching\n" not in out:
                chunk = await proc.stdout.receive_some()
                assert chunk, out
                out += chunk
            servicer.set_status("later", "SERVING")
            while chunk := await proc.stdout.receive_some():
                out += chunk
            await proc.wait()
    text = out.decode()
    assert proc.returncode == 0, text
    for name in ("check-server", "check-routes", "check-unknown", "watch-unknown", "watch-update"):
        assert f"ok {name}" in text, text
