"""``test.Echo`` served by trio_h2t.grpc: the methods ``grpcio_peer.py`` also serves.

Each method's behaviour is chosen by its name (bytes messages). ``Echo.events``
records what the tests wait for: a handler cancelled by its client, or by its deadline.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import trio

from trio_h2t import grpc


class Echo:
    """The service object (registered with ``Server.add_service``)."""

    SERVICE_NAME = "test.Echo"

    def __init__(self) -> None:
        self.events: list[str] = []
        self.changed = trio.Event()
        self.cancel_reasons: list[object] = []
        self.peers: set[str] = set()  # the client address of each Peer call

    def _event(self, what: str) -> None:
        self.events.append(what)
        self.changed.set()
        self.changed = trio.Event()

    async def wait_for(self, what: str) -> None:
        while what not in self.events:
            await self.changed.wait()

    @grpc.rpc()
    async def Unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    @grpc.rpc()
    async def Meta(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        md = [(k, v) for k, v in context.invocation_metadata if k.startswith("x-")]
        await context.send_initial_metadata(md)
        context.set_trailing_metadata(md)
        return request

    @grpc.rpc()
    async def Status(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        spec = json.loads(request)
        found = spec.get("details_bin")
        # status_details alone: the server sends it as grpc-status-details-bin.
        status_details = None if found is None else bytes.fromhex(found)
        raise grpc.RpcError(spec["code"], spec["details"], status_details=status_details)

    @grpc.rpc()
    async def Deadline(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        remaining = context.time_remaining()
        return b"none" if remaining is None else repr(remaining).encode()

    @grpc.rpc()
    async def Sleep(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            await trio.sleep(float(request))
        except trio.Cancelled:
            self._event("sleep cancelled")
            raise
        return b"slept"

    @grpc.rpc()
    async def Compressed(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_compression("gzip")
        return request

    @grpc.rpc()
    async def Deflated(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_compression("deflate")
        return request

    @grpc.rpc()
    async def Big(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return b"x" * int(request)

    @grpc.rpc()
    async def Peer(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.peers.add(context.peer)
        return request

    @grpc.rpc()
    async def Encoding(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return context.request.headers.get(b"grpc-encoding", b"identity") + b" " + request

    @grpc.rpc()
    async def Fail(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        raise ValueError("secret internals")

    @grpc.rpc("unary_stream")
    async def Count(self, request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        for i in range(int(request)):
            yield str(i).encode()

    @grpc.rpc("unary_stream")
    async def Forever(self, request: bytes, context: grpc.ServicerContext) -> None:
        try:
            while True:
                await context.write(b"tick")
                await trio.sleep(0.05)
        except trio.Cancelled:
            self.cancel_reasons.append(context.cancel_reason)
            self._event("forever cancelled")
            raise

    @grpc.rpc("stream_unary")
    async def Concat(self, requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> bytes:
        return b"".join([r async for r in requests])

    @grpc.rpc("stream_stream")
    async def Upper(
        self, requests: AsyncIterator[bytes], context: grpc.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for r in requests:
            yield r.upper()
