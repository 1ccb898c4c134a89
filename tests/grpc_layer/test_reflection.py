"""gRPC server reflection on trio_h2t.grpc (trio_h2t/grpc/reflection.py).

A real trio_h2t.grpc server on 127.0.0.1 describes a shop service built in a private
descriptor pool (two files, nested types, enums, a proto2 extension). grpcio-
reflection's client (``reflection_peer.py``, a subprocess: grpcio blocks) lists the
services and resolves a method's input type over v1alpha; our own client drives v1
and v1alpha with raw requests on one stream each; the interop server answers too.
The committed reflection_*_pb2 match a fresh generation by scripts/gen_health.py.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio
from google.protobuf import descriptor_pb2, descriptor_pool

import trio_h2t
from trio_h2t import grpc
from trio_h2t.grpc import reflection
from trio_h2t.grpc.protos import reflection_v1_pb2, reflection_v1alpha_pb2
from trio_h2t.interop import server as interop_server

from .stubgen import ROOT

PEER = str(Path(__file__).with_name("reflection_peer.py"))
LIMIT = 60
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value
ORDERS = "shop.v1.Orders"


def _shop_pool() -> descriptor_pool.DescriptorPool:
    """shop/money.proto (Money, Currency) and shop/orders.proto (Order with a nested
    Line and State, the Orders service; proto2, so Order takes an extension)."""
    F = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop.v1")
    money.syntax = "proto3"
    currency = money.enum_type.add(name="Currency")
    currency.value.add(name="CURRENCY_UNSPECIFIED", number=0)
    currency.value.add(name="EUR", number=1)
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(
        name="currency",
        number=2,
        type=F.TYPE_ENUM,
        label=F.LABEL_OPTIONAL,
        type_name=".shop.v1.Currency",
    )
    orders = descriptor_pb2.FileDescriptorProto(
        name="shop/orders.proto", package="shop.v1", dependency=["shop/money.proto"]
    )
    order = orders.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    state = order.enum_type.add(name="State")
    state.value.add(name="OPEN", number=0)
    order.field.add(
        name="lines",
        number=1,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_REPEATED,
        type_name=".shop.v1.Order.Line",
    )
    order.field.add(
        name="total",
        number=2,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_OPTIONAL,
        type_name=".shop.v1.Money",
    )
    order.extension_range.add(start=100, end=200)
    receipt = orders.message_type.add(name="Receipt")
    receipt.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    svc = orders.service.add(name="Orders")
    svc.method.add(name="Place", input_type=".shop.v1.Order", output_type=".shop.v1.Receipt")
    notes = descriptor_pb2.FileDescriptorProto(
        name="shop/notes.proto", package="shop.v1", dependency=["shop/orders.proto"]
    )
    notes.extension.add(
        name="note",
        number=150,
        type=F.TYPE_STRING,
        label=F.LABEL_OPTIONAL,
        extendee=".shop.v1.Order",
    )
    pool = descriptor_pool.DescriptorPool()
    for file in (money, orders, notes):
        pool.Add(file)
    return pool


@asynccontextmanager
async def _served(*handlers: object) -> AsyncIterator[trio_h2t.H2Server]:
    async with trio_h2t.open_server(grpc.Server(handlers), 0, host="127.0.0.1") as server:
        yield server


def _shop_reflection() -> reflection.ReflectionServicer:
    return reflection.service([ORDERS], pool=_shop_pool())


async def _ask(port: int, pb: ModuleType, requests: list[Any]) -> list[Any]:
    """Send ``requests`` on one ServerReflectionInfo stream, one answer after each."""
    service = pb.DESCRIPTOR.services_by_name["ServerReflection"].full_name
    async with grpc.open_channel("127.0.0.1", port) as channel:
        method = channel.stream_stream(
            f"/{service}/ServerReflectionInfo",
            request_serializer=pb.ServerReflectionRequest.SerializeToString,
            response_deserializer=pb.ServerReflectionResponse.FromString,
        )
        answers = []
        async with method.open() as call:
            for request in requests:
                await call.send_message(request)
                answers.append(await call.receive_message())
            await call.done_writing()
            assert [m async for m in call] == []
            assert call.code == grpc.StatusCode.OK
    return answers


def _names(answer: Any) -> list[str]:
    """The file names in a file_descriptor_response, in order."""
    return [
        descriptor_pb2.FileDescriptorProto.FromString(raw).name
        for raw in answer.file_descriptor_response.file_descriptor_proto
    ]


def test_committed_reflection_pb2_matches_fresh_generation(tmp_path: Path) -> None:
    """scripts/gen_health.py regenerates the committed reflection_*_pb2.py and .pyi exactly."""
    spec = importlib.util.spec_from_file_location("gen_health", ROOT / "scripts/gen_health.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(tmp_path)
    for name in ("reflection_v1_pb2", "reflection_v1alpha_pb2"):
        for ext in (".py", ".pyi"):
            committed = (ROOT / "trio_h2t/grpc/protos" / (name + ext)).read_text()
            assert (tmp_path / (name + ext)).read_text() == committed, name + ext


def test_v1alpha_messages_match_grpcio_reflections() -> None:
    """Our v1alpha messages have grpcio-reflection's names, numbers and types (same wire)."""
    from grpc_reflection.v1alpha import reflection_pb2 as theirs

    def shape(file: Any) -> dict[str, list[tuple[str, int, int, bool, str | None]]]:
        def oneof(f: Any) -> str | None:
            return f.containing_oneof.name if f.containing_oneof else None

        return {
            name: [(f.name, f.number, f.type, f.is_repeated, oneof(f)) for f in m.fields]
            for name, m in file.message_types_by_name.items()
        }

    assert shape(reflection_v1alpha_pb2.DESCRIPTOR) == shape(theirs.DESCRIPTOR)
    assert shape(reflection_v1_pb2.DESCRIPTOR) == shape(theirs.DESCRIPTOR)
    ours = reflection_v1alpha_pb2.DESCRIPTOR.services_by_name["ServerReflection"]
    assert ours.full_name == theirs.DESCRIPTOR.services_by_name["ServerReflection"].full_name


async def test_grpcio_reflection_client_lists_and_resolves() -> None:
    """grpcio-reflection's database lists the services and resolves Place's input type."""
    with trio.fail_after(LIMIT):
        async with _served(_shop_reflection()) as server:
            done = await trio.run_process(
                [sys.executable, PEER, str(server.port), "shop.v1.Orders.Place"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout)
    assert out == {
        "services": sorted([ORDERS, *reflection.SERVICE_NAMES]),
        "inputs": ["shop.v1.Order"],
        "files": ["shop/orders.proto"],
        "missing": True,
    }


@pytest.mark.parametrize("pb", [reflection_v1_pb2, reflection_v1alpha_pb2], ids=["v1", "v1alpha"])
async def test_raw_requests_on_one_stream(pb: ModuleType) -> None:
    """Each question answered in order on one stream; dependencies sent once; NOT_FOUND goes on."""
    R = pb.ServerReflectionRequest
    requests = [
        R(host="h", list_services=""),
        R(file_containing_symbol="shop.v1.Orders.Place"),  # a method
        R(file_containing_symbol="shop.v1.Order.Line"),  # a nested message: deps already sent
        R(file_containing_symbol="no.such.Thing"),
        R(file_by_filename="shop/money.proto"),  # the requested file is always sent
        R(file_containing_symbol="shop.v1.Order.State"),  # a nested enum
        R(file_containing_symbol="shop.v1.Currency"),  # a top-level enum
        R(file_by_filename="missing.proto"),
        R(
            file_containing_extension=pb.ExtensionRequest(
                containing_type="shop.v1.Order", extension_number=150
            )
        ),
        R(all_extension_numbers_of_type="shop.v1.Order"),
        R(all_extension_numbers_of_type="shop.v1.Nope"),
        R(file_containing_symbol=f"{pb.DESCRIPTOR.package}.ServerReflection"),  # itself
        R(),
        R(file_containing_symbol="shop.v1.Money.cents"),  # a field
        R(file_containing_symbol="shop.v1.EUR"),  # an enum value (in its enum's scope)
    ]
    with trio.fail_after(LIMIT):
        async with _served(_shop_reflection()) as server:
            got = await _ask(server.port, pb, requests)
    assert [a.original_request for a in got] == requests
    assert got[0].valid_host == "h"
    assert [s.name for s in got[0].list_services_response.service] == sorted(
        [ORDERS, *reflection.SERVICE_NAMES]
    )
    assert _names(got[1]) == ["shop/orders.proto", "shop/money.proto"]
    assert _names(got[2]) == ["shop/orders.proto"]
    for unknown in (got[3], got[7], got[10]):
        assert unknown.WhichOneof("message_response") == "error_response"
        assert unknown.error_response.error_code == NOT_FOUND
    assert got[3].error_response.error_message == "symbol 'no.such.Thing' not found"
    assert _names(got[4]) == ["shop/money.proto"]
    assert _names(got[5]) == ["shop/orders.proto"]
    assert _names(got[6]) == ["shop/money.proto"]
    assert _names(got[8]) == ["shop/notes.proto"]  # its dependencies were sent already
    numbers = got[9].all_extension_numbers_response
    assert (numbers.base_type_name, list(numbers.extension_number)) == ("shop.v1.Order", [150])
    assert _names(got[11]) == [
        f"grpc/reflection/{pb.DESCRIPTOR.package.split('.')[-1]}/reflection.proto"
    ]
    assert got[12].error_response.error_code == grpc.StatusCode.INVALID_ARGUMENT.value
    assert _names(got[13]) == _names(got[14]) == ["shop/money.proto"]


async def test_each_stream_sends_dependencies_afresh() -> None:
    """A new stream gets a file's dependencies again (the 'sent' set is per stream)."""
    R = reflection_v1_pb2.ServerReflectionRequest
    with trio.fail_after(LIMIT):
        async with _served(_shop_reflection()) as server:
            for _ in range(2):
                (got,) = await _ask(
                    server.port, reflection_v1_pb2, [R(file_by_filename="shop/notes.proto")]
                )
                assert _names(got) == ["shop/notes.proto", "shop/orders.proto", "shop/money.proto"]


async def test_enable_server_reflection_adds_to_a_server() -> None:
    """enable_server_reflection registers on an existing Server; the default pool is used."""
    server = grpc.Server()
    servicer = reflection.enable_server_reflection(["grpc.testing.TestService"], server)
    assert servicer.service_names == tuple(
        sorted(["grpc.testing.TestService", *reflection.SERVICE_NAMES])
    )
    assert server.lookup(f"/{reflection.SERVICE_NAME}/ServerReflectionInfo") is not None
    assert server.lookup(f"/{reflection.SERVICE_NAME}/Other") is None
    R = reflection_v1_pb2.ServerReflectionRequest
    with trio.fail_after(LIMIT):
        async with trio_h2t.open_server(server, 0, host="127.0.0.1") as h2server:
            (got,) = await _ask(
                h2server.port,
                reflection_v1_pb2,
                [R(file_containing_symbol="grpc.testing.TestService.UnaryCall")],
            )
    assert _names(got)[0] == "trio_h2t/interop/protos/test.proto"  # interop's, in the default pool


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_reflection_stub(version: str) -> None:
    """ReflectionStub asks either version with the v1 messages, requests given up front."""
    R = reflection.ServerReflectionRequest
    with trio.fail_after(LIMIT):
        async with (
            _served(_shop_reflection()) as server,
            grpc.open_channel("127.0.0.1", server.port) as channel,
        ):
            stub = reflection.ReflectionStub(channel, version=version)
            requests = [R(list_services=""), R(file_containing_symbol="shop.v1.Money")]
            async with stub.ServerReflectionInfo(requests) as call:
                listed, money = [answer async for answer in call]
    assert ORDERS in [s.name for s in listed.list_services_response.service]
    assert _names(money) == ["shop/money.proto"]


def test_wrong_calls_name_the_fix() -> None:
    """One name instead of a list, a non-pool pool or a non-Server raise TypeError."""
    with pytest.raises(TypeError, match=r"pass \['shop.v1.Orders'\]"):
        reflection.service("shop.v1.Orders")
    with pytest.raises(TypeError, match="non-empty str"):
        reflection.ReflectionServicer([""])
    with pytest.raises(TypeError, match="DescriptorPool"):
        reflection.service([ORDERS], pool=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"trio_h2t\.grpc\.Server"):
        reflection.enable_server_reflection([ORDERS], object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'v1' or 'v1alpha'"):
        reflection.ReflectionStub(object(), version="v2")  # type: ignore[arg-type]


async def test_interop_server_answers_reflection() -> None:
    """python -m trio_h2t.interop.server's serve() lists TestService and describes UnaryCall."""
    R = reflection_v1_pb2.ServerReflectionRequest
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server: trio_h2t.H2Server = await nursery.start(
                functools.partial(interop_server.serve, 0, host="127.0.0.1")
            )
            listed, described = await _ask(
                server.port,
                reflection_v1_pb2,
                [R(list_services=""), R(file_containing_symbol="grpc.testing.TestService")],
            )
            done = await trio.run_process(
                [sys.executable, PEER, str(server.port), "grpc.testing.TestService.UnaryCall"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            nursery.cancel_scope.cancel()
    assert [s.name for s in listed.list_services_response.service] == sorted(
        [interop_server.SERVICE, *reflection.SERVICE_NAMES]
    )
    assert _names(described) == [
        "trio_h2t/interop/protos/test.proto",
        "trio_h2t/interop/protos/empty.proto",
        "trio_h2t/interop/protos/messages.proto",
    ]
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["inputs"] == ["grpc.testing.SimpleRequest"]
