"""The checks both proxy test modules run: the interop client's CLI, and our
``open_channel`` for the four call kinds, through the proxy."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import trio
from interop.conftest import PROC_TIMEOUT

from trio_h2t import grpc
from trio_h2t.interop import client as interop_client
from trio_h2t.interop.protos import messages_pb2 as M

from .conftest import Proxy

_SERVICE = "/grpc.testing.TestService/"


def run_all_cases(proxy: Proxy) -> dict[str, str]:
    """``python -m trio_h2t.interop.client --test_case all`` through ``proxy``:
    each case's name -> ``PASS`` or its ``FAIL ...`` line."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "trio_h2t.interop.client", "--server_host", "127.0.0.1"),
            *("--server_port", str(proxy.port), "--test_case", "all"),
        ],
        capture_output=True,
        timeout=PROC_TIMEOUT,
        check=False,
    )
    out: dict[str, str] = {}
    for line in result.stdout.decode().splitlines():
        word, _, rest = line.partition(" ")
        if word == "PASS":
            out[rest] = "PASS"
        elif word == "FAIL":
            out[rest.partition(":")[0]] = line
    assert set(out) == set(interop_client.CASES), result.stdout.decode() + result.stderr.decode()
    return out


def _methods(ch: grpc.Channel) -> tuple[Any, Any, Any, Any]:
    def make(kind: str, name: str, req: Any, resp: Any) -> Any:
        return getattr(ch, kind)(
            _SERVICE + name,
            request_serializer=req.SerializeToString,
            response_deserializer=resp.FromString,
        )

    return (
        make("unary_unary", "UnaryCall", M.SimpleRequest, M.SimpleResponse),
        make(
            "unary_stream",
            "StreamingOutputCall",
            M.StreamingOutputCallRequest,
            M.StreamingOutputCallResponse,
        ),
        make(
            "stream_unary",
            "StreamingInputCall",
            M.StreamingInputCallRequest,
            M.StreamingInputCallResponse,
        ),
        make(
            "stream_stream",
            "FullDuplexCall",
            M.StreamingOutputCallRequest,
            M.StreamingOutputCallResponse,
        ),
    )


async def four_kinds(proxy: Proxy, rounds: int) -> None:
    """``rounds`` calls of each kind on one ``open_channel`` to the proxy, checked."""
    with trio.fail_after(PROC_TIMEOUT):
        async with grpc.open_channel("127.0.0.1", proxy.port) as ch:
            unary, output, inp, duplex = _methods(ch)
            for i in range(rounds):
                resp = await unary(M.SimpleRequest(response_size=100 + i))
                assert len(resp.payload.body) == 100 + i
                params = [M.ResponseParameters(size=s) for s in (1, 2, 3 + i)]
                req = M.StreamingOutputCallRequest(response_parameters=params)
                async with output(req) as call:
                    got = [len(r.payload.body) async for r in call]
                assert got == [1, 2, 3 + i]
                reqs = [
                    M.StreamingInputCallRequest(payload=M.Payload(body=bytes(n)))
                    for n in (10, 20, i)
                ]
                summed = await inp(reqs)
                assert summed.aggregated_payload_size == 30 + i
                async with duplex.open() as call:
                    for size in (5, 6 + i):
                        await call.send_message(
                            M.StreamingOutputCallRequest(
                                response_parameters=[M.ResponseParameters(size=size)]
                            )
                        )
                        reply = await call.receive_message()
                        assert len(reply.payload.body) == size
                    await call.done_writing()
                    with pytest.raises(trio.EndOfChannel):
                        await call.receive_message()
                assert call.code == grpc.StatusCode.OK


async def big_client_stream(proxy: Proxy) -> None:
    """A client stream of 2 MiB (four 512 KiB messages) through the proxy, summed."""
    with trio.fail_after(PROC_TIMEOUT):
        async with grpc.open_channel("127.0.0.1", proxy.port) as ch:
            inp = _methods(ch)[2]
            reqs = [M.StreamingInputCallRequest(payload=M.Payload(body=bytes(512 * 1024)))] * 4
            summed = await inp(reqs)
            assert summed.aggregated_payload_size == 2 * 1024 * 1024


async def silent_stream_is_cut(proxy: Proxy) -> grpc.RpcError:
    """A server stream that is silent for 2 s after its first message, through a
    proxy with a 1 s idle limit: the first message arrives, then the call fails."""
    with trio.fail_after(PROC_TIMEOUT):
        async with grpc.open_channel("127.0.0.1", proxy.port) as ch:
            output = _methods(ch)[1]
            params = [
                M.ResponseParameters(size=1),
                M.ResponseParameters(size=2, interval_us=2_000_000),
            ]
            got = []
            try:
                async with output(M.StreamingOutputCallRequest(response_parameters=params)) as call:
                    async for resp in call:
                        got.append(len(resp.payload.body))
            except grpc.RpcError as exc:
                assert got == [1]
                return exc
            raise AssertionError(f"the stream was not cut: got {got}")
