"""protoc-gen-trio_h2t: stubs generated at test time from ``protos/routes.proto``.

The generated module passes ``mypy --strict``; a server built from the generated
base class and a client on the generated stub make all four call types over
127.0.0.1; grpcio's generated stub calls that server, and our stub calls grpcio's
server (``stubs_peer.py`` in a subprocess).
"""

from __future__ import annotations

import functools
import importlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio

import trio_h2t
from trio_h2t import grpc

from .stubgen import ROOT, generate

PEER = str(Path(__file__).with_name("stubs_peer.py"))
LIMIT = 60

USER_CODE = """
from collections.abc import AsyncIterator

from trio_h2t import grpc

import routes_pb2
import routes_trio_h2t


class Routes(routes_trio_h2t.RoutesServicer):
    async def Double(
        self, request: routes_pb2.Point, context: grpc.ServicerContext
    ) -> routes_pb2.Point:
        return routes_pb2.Point(x=2 * request.x)

    async def Swap(
        self, requests: AsyncIterator[routes_pb2.Point], context: grpc.ServicerContext
    ) -> AsyncIterator[routes_pb2.Point]:
        async for p in requests:
            yield p


async def use(channel: grpc.Channel) -> int:
    stub = routes_trio_h2t.RoutesStub(channel)
    point: routes_pb2.Point = await stub.Double(routes_pb2.Point(x=1), timeout=1.0)
    async with stub.Expand(point) as call:
        async for p in call:
            point = p
    summary: routes_pb2.Summary = await stub.Sum([point])
    note: routes_pb2.Summary.Note = await stub.Missing(point)
    return point.x + summary.total + len(note.text)
"""

MYPY_INI = """\
[mypy]
strict = True
# protoc's own .pyi writes a bare Mapping for message-typed fields
[mypy-routes_pb2]
disallow_any_generics = False
"""


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """routes_pb2(.pyi), routes_trio_h2t.py and routes_pb2_grpc.py, generated now."""
    out = tmp_path_factory.mktemp("routes_gen")
    generate(out)
    return out


@pytest.fixture(scope="module")
def gen(gen_dir: Path) -> Iterator[tuple[ModuleType, ModuleType]]:
    """The generated routes_pb2 and routes_trio_h2t, imported."""
    sys.path.insert(0, str(gen_dir))
    try:
        yield importlib.import_module("routes_pb2"), importlib.import_module("routes_trio_h2t")
    finally:
        sys.path.remove(str(gen_dir))


def test_generated_module_passes_mypy_strict(gen_dir: Path) -> None:
    """mypy --strict accepts the generated module and code using its stub and base class."""
    (gen_dir / "use_routes.py").write_text(USER_CODE)
    (gen_dir / "mypy.ini").write_text(MYPY_INI)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--no-incremental",
            "routes_trio_h2t.py",
            "use_routes.py",
        ],
        cwd=gen_dir,
        env={"MYPYPATH": str(ROOT), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_generated_module_mypy_catches_a_wrong_type(gen_dir: Path) -> None:
    """The stubs are typed, not Any: passing a Summary where a Point goes fails mypy."""
    (gen_dir / "wrong.py").write_text(
        "import routes_pb2, routes_trio_h2t\n"
        "async def f(stub: routes_trio_h2t.RoutesStub) -> None:\n"
        "    await stub.Double(routes_pb2.Summary())\n"
    )
    (gen_dir / "mypy.ini").write_text(MYPY_INI)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-incremental", "wrong.py"],
        cwd=gen_dir,
        env={"MYPYPATH": str(ROOT), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'incompatible type "Summary"; expected "Point"' in result.stdout, result.stdout


def _servicer(gen: tuple[ModuleType, ModuleType]) -> Any:
    pb, stubs = gen

    class Routes(stubs.RoutesServicer):  # type: ignore[misc,name-defined]
        async def Double(self, request: Any, context: grpc.ServicerContext) -> Any:
            return pb.Point(x=2 * request.x, y=2 * request.y)

        async def Expand(self, request: Any, context: grpc.ServicerContext) -> AsyncIterator[Any]:
            for i in range(request.x):
                yield pb.Point(x=i, y=request.y)

        async def Sum(self, requests: AsyncIterator[Any], context: grpc.ServicerContext) -> Any:
            points = [p async for p in requests]
            return pb.Summary(count=len(points), total=sum(p.x for p in points))

        async def Swap(
            self, requests: AsyncIterator[Any], context: grpc.ServicerContext
        ) -> AsyncIterator[Any]:
            async for p in requests:
                yield pb.Point(x=p.y, y=p.x)

    return Routes()


@asynccontextmanager
async def _our_server(gen: tuple[ModuleType, ModuleType], *, add: bool) -> AsyncIterator[int]:
    if add:  # through the generated registration function
        server = grpc.Server()
        gen[1].add_RoutesServicer_to_server(_servicer(gen), server)
    else:  # the servicer as a generic handler
        server = grpc.Server([_servicer(gen)])
    async with trio_h2t.open_server(server, 0, host="127.0.0.1") as listening:
        yield listening.port


async def _four_calls(gen: tuple[ModuleType, ModuleType], channel: grpc.Channel) -> None:
    pb, stubs = gen
    stub = stubs.RoutesStub(channel)
    got = await stub.Double(pb.Point(x=3, y=4), timeout=10)
    assert (got.x, got.y) == (6, 8)
    async with stub.Expand(pb.Point(x=3, y=7)) as call:
        assert [(p.x, p.y) async for p in call] == [(0, 7), (1, 7), (2, 7)]
    got = await stub.Sum([pb.Point(x=i) for i in range(5)])
    assert (got.count, got.total) == (5, 10)
    async with stub.Swap() as call:
        await call.send_message(pb.Point(x=1, y=2))
        first = await call.__anext__()
        await call.send_message(pb.Point(x=5, y=6))
        await call.done_writing()
        rest = [(p.x, p.y) async for p in call]
    assert [(first.x, first.y), *rest] == [(2, 1), (6, 5)]


@pytest.mark.parametrize("add", [True, False], ids=["add_to_server", "generic_handler"])
async def test_generated_stub_and_servicer_four_call_types(
    gen: tuple[ModuleType, ModuleType], add: bool
) -> None:
    """Our generated stub against a server from our generated base class: all four types."""
    with trio.fail_after(LIMIT):
        async with (
            _our_server(gen, add=add) as port,
            grpc.open_channel("127.0.0.1", port) as channel,
        ):
            await _four_calls(gen, channel)


async def test_generated_base_class_unimplemented_by_default(
    gen: tuple[ModuleType, ModuleType],
) -> None:
    """A method the subclass does not override ends the call with UNIMPLEMENTED."""
    pb, stubs = gen
    with trio.fail_after(LIMIT):
        async with (
            _our_server(gen, add=True) as port,
            grpc.open_channel("127.0.0.1", port) as channel,
        ):
            with pytest.raises(grpc.RpcError) as info:
                await stubs.RoutesStub(channel).Missing(pb.Point())
    assert info.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert "Missing" in info.value.details


async def test_grpcio_stub_against_generated_servicer(
    gen: tuple[ModuleType, ModuleType], gen_dir: Path
) -> None:
    """grpcio's generated stub calls our server built from the generated base class."""
    with trio.fail_after(LIMIT):
        async with _our_server(gen, add=True) as port:
            result = await trio.run_process(
                [sys.executable, PEER, str(gen_dir), "client", str(port)],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()[-2000:]
    for name in ("double", "expand", "sum", "swap", "missing"):
        assert f"ok {name}" in out, out


async def test_generated_stub_against_grpcio_server(
    gen: tuple[ModuleType, ModuleType], gen_dir: Path
) -> None:
    """Our generated stub makes all four call types against grpcio's server."""
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            run = functools.partial(
                trio.run_process,
                [sys.executable, PEER, str(gen_dir), "server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                check=False,
            )
            proc: trio.Process = await nursery.start(run)
            assert proc.stdout is not None
            assert proc.stdin is not None
            line = b""
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(1)
                assert chunk, line
                line += chunk
            port = int(line.split()[1])
            try:
                async with grpc.open_channel("127.0.0.1", port) as channel:
                    await _four_calls(gen, channel)
            finally:
                await proc.stdin.aclose()


def test_plugin_flag_and_console_script(tmp_path: Path) -> None:
    """``--plugin=protoc-gen-trio_h2t=PATH`` works, and pyproject's console script
    ``protoc-gen-trio_h2t`` names the plugin's main."""
    import tomllib

    from trio_h2t.grpc import _protoc_plugin

    from .stubgen import PROTOS, protoc, write_launcher

    launcher = write_launcher(tmp_path)
    result = protoc(
        [
            "-I.",
            f"--plugin=protoc-gen-trio_h2t={launcher}",
            f"--trio_h2t_out={tmp_path}",
            "routes.proto",
        ],
        path_dir=tmp_path / "nowhere",
        cwd=PROTOS,
    )
    assert result.returncode == 0, result.stderr
    assert "class RoutesServicer:" in (tmp_path / "routes_trio_h2t.py").read_text()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attr = scripts["protoc-gen-trio_h2t"].partition(":")
    assert module == _protoc_plugin.__name__
    assert callable(getattr(_protoc_plugin, attr))


async def test_generated_stub_passes_wait_for_ready_and_credentials(
    gen: tuple[ModuleType, ModuleType],
) -> None:
    """Every generated stub method takes wait_for_ready= and credentials= and hands
    them to the channel's call (credentials run once per call; a wrong
    wait_for_ready is the channel's TypeError)."""
    pb, stubs = gen
    seen: list[str] = []

    def credentials(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        seen.append(context.method_name)
        return [("authorization", "Bearer t")]

    options: dict[str, Any] = {"wait_for_ready": True, "credentials": credentials}
    with trio.fail_after(LIMIT):
        async with (
            _our_server(gen, add=False) as port,
            grpc.open_channel(f"127.0.0.1:{port}", insecure_call_credentials=True) as channel,
        ):
            stub = stubs.RoutesStub(channel)
            assert (await stub.Double(pb.Point(x=1), **options)).x == 2
            async with stub.Expand(pb.Point(x=2), **options) as call:
                assert len([p async for p in call]) == 2
            assert (await stub.Sum([pb.Point(x=3)], **options)).total == 3
            async with stub.Swap([pb.Point(x=1, y=2)], **options) as call:
                assert [(p.x, p.y) async for p in call] == [(2, 1)]
            with pytest.raises(TypeError, match="wait_for_ready"):
                await stub.Double(pb.Point(x=1), wait_for_ready="yes")
    assert seen == ["Double", "Expand", "Sum", "Swap"]
