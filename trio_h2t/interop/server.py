"""The interop server: ``grpc.testing.TestService`` on trio_h2t.grpc.

Each method does what grpc/grpc ``doc/interop-test-descriptions.md`` ("Server")
asks of it:

- UnaryCall: a payload of ``response_size`` zero bytes; ``response_compressed``
  (CompressedResponse) picks gzip or identity for the response;
  ``expect_compressed`` (CompressedRequest) fails the call with INVALID_ARGUMENT
  when the request's Compressed-Flag disagrees; ``response_status`` (Echo Status)
  ends the call with that code and message.
- StreamingOutputCall / FullDuplexCall: one response per ResponseParameters
  (its size, ``interval_us`` before it, its ``compressed`` flag); HalfDuplexCall
  answers after the client half-closes.
- StreamingInputCall: the sum of the request payload sizes, after the half-close.
- Every method echoes ``x-grpc-test-echo-initial`` in its initial metadata and
  ``x-grpc-test-echo-trailing-bin`` in its trailing metadata (Echo Metadata).
- UnimplementedCall is not implemented: the server answers UNIMPLEMENTED.
- ``fill_server_id`` (UnaryCall) puts the serving process's pid in ``server_id``:
  which worker answered.

Server reflection (``trio_h2t.grpc.reflection``, v1 and v1alpha) lists TestService
and the reflection services and describes them from ``test_pb2``'s descriptors.

``python -m trio_h2t.interop.server --port N`` (0 picks a free port) prints
``listening on port N`` once it accepts connections, then serves until killed.
``--call_log PATH`` appends one line per RPC to PATH (``call /grpc.testing.TestService/X``),
written before the call is served: tests/proxies/ counts these lines to see that a proxy
spread the calls over several backend processes.
With ``--workers N`` it runs N worker processes on that one port (``SO_REUSEPORT``)
under the transport's supervisor (``trio_h2t/_workers.py``, as ``trio-h2t serve
--workers``): it prints ``serving on http://HOST:PORT`` once all listen, restarts a
worker that dies, and on SIGTERM or SIGINT drains every worker (the calls in
progress finish, within ``graceful_close_timeout``) and exits.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import TextIO

import trio

import trio_h2t
from trio_h2t import grpc
from trio_h2t._shared import only_exception as _leaf
from trio_h2t.grpc import reflection

from .protos import empty_pb2, messages_pb2, test_pb2

__all__ = ["SERVICE", "TestService", "main", "serve"]

#: test_pb2 registers its descriptor in the default pool, where reflection finds it.
SERVICE = test_pb2.DESCRIPTOR.services_by_name["TestService"].full_name
ECHO_INITIAL = "x-grpc-test-echo-initial"
ECHO_TRAILING = "x-grpc-test-echo-trailing-bin"
#: The algorithm CompressedResponse uses (grpc core's interop server uses gzip too).
COMPRESSION = "gzip"

Empty = empty_pb2.Empty
SimpleRequest = messages_pb2.SimpleRequest
SimpleResponse = messages_pb2.SimpleResponse
StreamingInputCallRequest = messages_pb2.StreamingInputCallRequest
StreamingInputCallResponse = messages_pb2.StreamingInputCallResponse
StreamingOutputCallRequest = messages_pb2.StreamingOutputCallRequest
StreamingOutputCallResponse = messages_pb2.StreamingOutputCallResponse
ResponseParameters = messages_pb2.ResponseParameters
EchoStatus = messages_pb2.EchoStatus


def _payload(size: int) -> messages_pb2.Payload:
    return messages_pb2.Payload(type=messages_pb2.COMPRESSABLE, body=bytes(size))


async def _echo_metadata(context: grpc.ServicerContext) -> None:
    """Echo Metadata: the initial key in the response headers (sent now), the
    trailing one with the status."""
    initial = [(k, v) for k, v in context.invocation_metadata if k == ECHO_INITIAL]
    trailing = [(k, v) for k, v in context.invocation_metadata if k == ECHO_TRAILING]
    if trailing:
        context.set_trailing_metadata(trailing)
    if initial:
        await context.send_initial_metadata(initial)


def _check_compressed(expect: messages_pb2.BoolValue | None, context: grpc.ServicerContext) -> None:
    """CompressedRequest: the request's Compressed-Flag must match ``expect``."""
    if expect is None:
        return
    compressed = bool(context.request_compressed)
    if expect.value and not compressed:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Expected compressed request")
    if not expect.value and compressed:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Expected uncompressed request")


def _check_status(status: EchoStatus | None, context: grpc.ServicerContext) -> None:
    """Echo Status: end the call with ``status`` (if it is not OK)."""
    if status is not None and status.code != 0:
        context.abort(status.code, status.message)


def _check_type(response_type: int, context: grpc.ServicerContext) -> None:
    if response_type != messages_pb2.COMPRESSABLE:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"unsupported response_type {response_type}"
        )


async def _respond(params: Sequence[ResponseParameters], context: grpc.ServicerContext) -> None:
    for p in params:
        if p.interval_us:
            await trio.sleep(p.interval_us / 1e6)
        compress = not p.HasField("compressed") or p.compressed.value
        await context.write(
            StreamingOutputCallResponse(payload=_payload(p.size)), compress=compress
        )


class TestService:
    """``grpc.testing.TestService`` (register with ``grpc.Server([TestService()])``)."""

    SERVICE_NAME = SERVICE
    __test__ = False  # not a pytest test class, despite its name

    @grpc.rpc(request_deserializer=Empty.FromString, response_serializer=Empty.SerializeToString)
    async def EmptyCall(self, request: empty_pb2.Empty, context: grpc.ServicerContext) -> Empty:
        await _echo_metadata(context)
        return Empty()

    @grpc.rpc(
        request_deserializer=SimpleRequest.FromString,
        response_serializer=SimpleResponse.SerializeToString,
    )
    async def UnaryCall(
        self, request: SimpleRequest, context: grpc.ServicerContext
    ) -> SimpleResponse:
        _check_compressed(
            request.expect_compressed if request.HasField("expect_compressed") else None, context
        )
        _check_type(request.response_type, context)
        if request.HasField("response_compressed"):
            context.set_compression(COMPRESSION if request.response_compressed.value else None)
        await _echo_metadata(context)
        _check_status(
            request.response_status if request.HasField("response_status") else None, context
        )
        response = SimpleResponse(payload=_payload(request.response_size))
        if request.fill_server_id:
            response.server_id = str(os.getpid())
        return response

    @grpc.rpc(
        "unary_stream",
        request_deserializer=StreamingOutputCallRequest.FromString,
        response_serializer=StreamingOutputCallResponse.SerializeToString,
    )
    async def StreamingOutputCall(
        self, request: StreamingOutputCallRequest, context: grpc.ServicerContext
    ) -> None:
        _check_type(request.response_type, context)
        if any(
            p.HasField("compressed") and p.compressed.value for p in request.response_parameters
        ):
            context.set_compression(COMPRESSION)
        await _echo_metadata(context)
        await _respond(request.response_parameters, context)
        _check_status(
            request.response_status if request.HasField("response_status") else None, context
        )

    @grpc.rpc(
        "stream_unary",
        request_deserializer=StreamingInputCallRequest.FromString,
        response_serializer=StreamingInputCallResponse.SerializeToString,
    )
    async def StreamingInputCall(
        self, requests: AsyncIterator[StreamingInputCallRequest], context: grpc.ServicerContext
    ) -> StreamingInputCallResponse:
        await _echo_metadata(context)
        total = 0
        async for request in requests:
            _check_compressed(
                request.expect_compressed if request.HasField("expect_compressed") else None,
                context,
            )
            total += len(request.payload.body)
        return StreamingInputCallResponse(aggregated_payload_size=total)

    @grpc.rpc(
        "stream_stream",
        request_deserializer=StreamingOutputCallRequest.FromString,
        response_serializer=StreamingOutputCallResponse.SerializeToString,
    )
    async def FullDuplexCall(
        self, requests: AsyncIterator[StreamingOutputCallRequest], context: grpc.ServicerContext
    ) -> None:
        await _echo_metadata(context)
        async for request in requests:
            _check_status(
                request.response_status if request.HasField("response_status") else None, context
            )
            _check_type(request.response_type, context)
            await _respond(request.response_parameters, context)

    @grpc.rpc(
        "stream_stream",
        request_deserializer=StreamingOutputCallRequest.FromString,
        response_serializer=StreamingOutputCallResponse.SerializeToString,
    )
    async def HalfDuplexCall(
        self, requests: AsyncIterator[StreamingOutputCallRequest], context: grpc.ServicerContext
    ) -> None:
        await _echo_metadata(context)
        buffered = [r async for r in requests]
        for request in buffered:
            _check_status(
                request.response_status if request.HasField("response_status") else None, context
            )
            await _respond(request.response_parameters, context)


class _CallLog:
    """Wraps the gRPC handler: one line per RPC (its ``:path``) to a file, then the call.

    The line is a small write to a local file, made before the call is served (line
    buffered, so a reader sees it once the call has started).
    """

    def __init__(self, app: grpc.Server, log: TextIO) -> None:
        self._app = app  # immutable after init
        self._log = log  # shared: written only from handler tasks, one whole line at a time

    async def __call__(self, stream: trio_h2t.H2Stream) -> None:
        """Log the call's path, then serve it.

        Checkpoint: always (the served call's). On cancellation: as the call's.
        """
        path = dict(stream.headers or ()).get(b":path", b"?")
        self._log.write(f"call {path.decode('ascii', 'replace')}\n")
        await self._app(stream)


async def serve(
    port: int,
    *,
    host: str | None = None,
    call_log: TextIO | None = None,
    task_status: trio.TaskStatus[trio_h2t.H2Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve TestService (and reflection) on TCP ``port`` (0: a free one) until
    cancelled; with ``call_log``, one line per RPC is written to it.

    Checkpoint: always. On cancellation: the listeners close, connections end.
    """
    await trio_h2t.serve_tcp(_handler(call_log), port, host=host, task_status=task_status)


def _handler(call_log: TextIO | None) -> trio_h2t.Handler:
    """TestService and reflection, with the call log when one is given."""
    app = grpc.Server([TestService(), reflection.service([SERVICE])])
    return app if call_log is None else _CallLog(app, call_log)


async def _main(port: int, host: str | None, call_log: TextIO | None) -> None:
    async with trio.open_nursery() as nursery:
        server: trio_h2t.H2Server = await nursery.start(
            functools.partial(serve, port, host=host, call_log=call_log)
        )
        print(f"listening on port {server.port}", flush=True)


def _supervise(port: int, host: str | None, workers: int, call_log: str | None) -> int:
    """``--workers N``: N ``--worker`` processes on one port under the transport's
    supervisor (``trio_h2t.supervise_workers``); its exit status."""
    bind = host or "0.0.0.0"

    def command(real_port: int) -> list[str]:
        argv = [sys.executable, "-m", "trio_h2t.interop.server", "--worker"]
        argv += ["--host", bind, "--port", str(real_port)]
        return argv if call_log is None else [*argv, "--call_log", call_log]

    return trio.run(
        functools.partial(trio_h2t.supervise_workers, command, workers, host=bind, port=port)
    )


async def _worker(port: int, host: str | None, call_log: TextIO | None) -> None:
    """One worker of ``--workers`` (``trio_h2t.serve_worker``)."""
    await trio_h2t.serve_worker(_handler(call_log), port, host=host or "0.0.0.0")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``--port N`` [``--host H``] [``--call_log PATH``]
    [``--workers N``] (``--use_tls`` is accepted only as false)."""
    parser = argparse.ArgumentParser(prog="python -m trio_h2t.interop.server")
    parser.add_argument("--port", type=int, required=True, help="TCP port (0: a free one)")
    parser.add_argument("--host", default=None, help="address to bind (default: all)")
    parser.add_argument("--use_tls", default="false", choices=["true", "false"])
    parser.add_argument("--call_log", default=None, help="append one line per RPC to this file")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes sharing the port (SO_REUSEPORT), supervised; default 1",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.use_tls == "true":
        parser.error("--use_tls=true is not supported (plaintext h2c only)")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    log = None
    try:
        if args.workers > 1:
            return _supervise(args.port, args.host, args.workers, args.call_log)
        if args.call_log is not None:
            log = open(args.call_log, "a", buffering=1, encoding="ascii")  # noqa: SIM115
        trio.run(_worker if args.worker else _main, args.port, args.host, log)
    except BaseException as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, KeyboardInterrupt):  # Ctrl-C: the way to stop it
            return 130
        if isinstance(leaf, OSError):  # the port is taken, the address is not ours
            where = f"{args.host or '*'}:{args.port}"
            print(
                f"{parser.prog}: cannot listen on {where}: {leaf.strerror or leaf}", file=sys.stderr
            )
            return 1
        raise
    finally:
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
