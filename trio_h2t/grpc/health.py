"""The standard gRPC health service, ``grpc.health.v1.Health``, on trio_h2t.grpc.

Theory of operation
-------------------
grpc/grpc ``doc/health-checking.md`` defines two methods: ``Check`` answers the
current status of a service (``""`` is the server as a whole) or NOT_FOUND for a
service the server does not know; ``Watch`` streams the current status at once, then
one message per change, and answers SERVICE_UNKNOWN (without ending the call) for an
unknown service. :class:`HealthServicer` keeps the statuses in a dict that only
:meth:`~HealthServicer.set_status` (sync, so no checkpoint splits a change) writes.
Watchers wait on a ``trio.Event`` that every change sets and replaces: a watcher
takes the event *before* reading the status, so no change is missed between the read
and the wait.

The messages are ``trio_h2t/grpc/protos/health_pb2.py``, generated from the vendored
``grpc/health/v1/health.proto`` (``scripts/gen_health.py``; committed, and checked
against a fresh generation by ``tests/grpc_layer/test_health.py``), registered in a
private descriptor pool so grpcio-health-checking's ``grpc_health.v1`` can be
imported in the same process. Needs protobuf 7.x (the ``grpc`` extra).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import final

import trio

from trio_h2t import grpc
from trio_h2t._shared import require_extra

require_extra("google.protobuf", extra="grpc", needed_by="trio_h2t.grpc.health")

from .protos import health_pb2

__all__ = [
    "SERVICE_NAME",
    "HealthCheckRequest",
    "HealthCheckResponse",
    "HealthServicer",
    "HealthStub",
    "ServingStatus",
]

SERVICE_NAME = "grpc.health.v1.Health"
HealthCheckRequest = health_pb2.HealthCheckRequest
HealthCheckResponse = health_pb2.HealthCheckResponse
#: The enum (``ServingStatus.SERVING``...; values are ints, names via ``Name``).
ServingStatus = health_pb2.HealthCheckResponse.ServingStatus

_CHECK = f"/{SERVICE_NAME}/Check"
_WATCH = f"/{SERVICE_NAME}/Watch"


@final
class HealthServicer:
    """The health service: ``grpc.Server([HealthServicer()])``.

    The server as a whole (``""``) starts SERVING; :meth:`set_status` sets or
    changes any service's status, :meth:`clear_status` forgets one.
    """

    SERVICE_NAME = SERVICE_NAME

    def __init__(self) -> None:
        # owner: set_status / clear_status / enter_graceful_shutdown (sync, no await)
        self._statuses: dict[str, int] = {"": ServingStatus.SERVING}
        self._changed = trio.Event()  # owner: the same; replaced on every change
        self._shutting_down = False  # owner: enter_graceful_shutdown (set once)

    def status(self, service: str = "") -> int | None:
        """The status of ``service`` (a ``ServingStatus`` value), or None if unknown."""
        return self._statuses.get(service)

    def set_status(self, service: str, status: int | str) -> None:
        """Set the status of ``service`` (``""``: the server); ``status`` is a
        ``ServingStatus`` value or name ("SERVING"). Watchers see the change.
        After :meth:`enter_graceful_shutdown` changes are ignored, as grpcio's."""
        value = ServingStatus.Value(status) if isinstance(status, str) else int(status)
        ServingStatus.Name(value)  # ValueError for a value the enum lacks
        if self._shutting_down:
            return
        self._statuses[service] = value
        self._notify()

    def clear_status(self, service: str) -> None:
        """Forget ``service``: Check answers NOT_FOUND, Watch SERVICE_UNKNOWN."""
        if self._statuses.pop(service, None) is not None:
            self._notify()

    def enter_graceful_shutdown(self) -> None:
        """Set every service that was set NOT_SERVING, end every Watch (after it sends
        that; a Watch of an unknown service with no further message), and ignore later
        changes: call it before closing the server."""
        self._statuses = dict.fromkeys(self._statuses, ServingStatus.NOT_SERVING)
        self._shutting_down = True
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        """The current status, or RpcError(NOT_FOUND) for an unknown service.

        Checkpoint: none of its own (the server's call does). On cancellation: nothing.
        """
        status = self._statuses.get(request.service)
        if status is None:
            raise grpc.RpcError(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)  # type: ignore[arg-type]

    async def Watch(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> AsyncIterator[health_pb2.HealthCheckResponse]:
        """The current status at once, then each change, until the client ends the
        call or :meth:`enter_graceful_shutdown` (NOT_SERVING is sent if the service was
        set, then OK). A server's shutdown cancels it like any handler still running.

        Checkpoint: while waiting for a change. On cancellation (the client reset
        the stream, or the deadline): the generator ends, nothing more is sent.
        """
        last: int | None = None
        while True:
            changed = self._changed  # taken before the read: no change is missed
            status = self._statuses.get(request.service, ServingStatus.SERVICE_UNKNOWN)
            if status != last:
                last = status
                yield health_pb2.HealthCheckResponse(status=status)  # type: ignore[arg-type]
            if self._shutting_down:
                return  # NOT_SERVING sent; end with OK so a graceful drain need not wait
            await changed.wait()

    def service(self, method: str) -> grpc.MethodHandler | None:
        """The handler for ``method`` (a path), or None: a grpc.GenericHandler."""
        if method == _CHECK:
            return grpc.unary_unary_handler(
                self.Check,
                request_deserializer=health_pb2.HealthCheckRequest.FromString,
                response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
            )
        if method == _WATCH:
            return grpc.unary_stream_handler(
                self.Watch,
                request_deserializer=health_pb2.HealthCheckRequest.FromString,
                response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
            )
        return None


@final
class HealthStub:
    """A client of any server's health service, on a :class:`trio_h2t.grpc.Channel`."""

    def __init__(self, channel: grpc.Channel) -> None:
        # Every attribute is immutable after init.
        self.channel = channel
        self._check: grpc.UnaryUnaryMethod[
            health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        ] = channel.unary_unary(
            _CHECK,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        self._watch: grpc.UnaryStreamMethod[
            health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        ] = channel.unary_stream(
            _WATCH,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )

    async def Check(
        self,
        request: health_pb2.HealthCheckRequest,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (sent as grpc-timeout)
        metadata: grpc.MetadataLike = (),
    ) -> health_pb2.HealthCheckResponse:
        """Check: the status of ``request.service``.

        Checkpoint: always. On cancellation: RST_STREAM(CANCEL).
        Raises: grpc.RpcError (NOT_FOUND for an unknown service).
        """
        return await self._check(request, timeout=timeout, metadata=metadata)

    def Watch(
        self,
        request: health_pb2.HealthCheckRequest,
        *,
        timeout: float | None = None,
        metadata: grpc.MetadataLike = (),
    ) -> AbstractAsyncContextManager[
        grpc.Call[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse]
    ]:
        """Watch: ``async with stub.Watch(request) as call: async for response in call``.

        Checkpoint: entering. On cancellation, or leaving the block: RST_STREAM(CANCEL).
        """
        return self._watch(request, timeout=timeout, metadata=metadata)
