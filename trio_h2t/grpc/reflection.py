"""gRPC server reflection (``grpc.reflection.v1`` and ``v1alpha``) on trio_h2t.grpc.

Theory of operation
-------------------
Generic tools (grpcurl, grpcio-reflection's ``ProtoReflectionDescriptorDatabase``)
learn a server's services by one bidirectional method,
``ServerReflection/ServerReflectionInfo``: each request asks one question and gets
one response, in order, on the same stream. The questions are answered from
protobuf descriptors (``google.protobuf.descriptor_pool``): the pool given, or the
default pool (where protoc's generated ``_pb2`` modules register), then the private
pools of this package's own ``reflection_*_pb2`` and ``health_pb2`` (so the
reflection and health services describe themselves).

- ``list_services``: the service names given to :func:`service`.
- ``file_by_filename`` / ``file_containing_symbol`` (a service, method, message,
  enum, field, enum value or nested type, fully qualified) /
  ``file_containing_extension``: the file's serialized ``FileDescriptorProto``,
  then those of its transitive dependencies. The requested file is always sent; a
  dependency only once per stream (grpc's reference servers do the same: a client
  keeps what it was sent).
- ``all_extension_numbers_of_type``: the extension numbers known for a message.
- An unknown name is an ``error_response`` with NOT_FOUND (a request with no
  question, INVALID_ARGUMENT); the stream goes on.

The two versions are the same protocol under two package names (same messages and
field numbers); each path decodes and encodes with its own generated module
(``trio_h2t/grpc/protos/reflection_{v1,v1alpha}_pb2.py``, ``scripts/gen_health.py``,
private pools like health's, so grpcio-reflection can be imported beside it).
Needs protobuf 7.x (the ``grpc`` extra).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from types import ModuleType
from typing import Any, final

from trio_h2t._shared import require_extra

require_extra("google.protobuf", extra="grpc", needed_by="trio_h2t.grpc.reflection")

from google.protobuf import descriptor, descriptor_pool

from trio_h2t import grpc

from .protos import health_pb2, reflection_v1_pb2, reflection_v1alpha_pb2

__all__ = [
    "SERVICE_NAME",
    "SERVICE_NAMES",
    "SERVICE_NAME_V1ALPHA",
    "ExtensionRequest",
    "ReflectionServicer",
    "ReflectionStub",
    "ServerReflectionRequest",
    "ServerReflectionResponse",
    "enable_server_reflection",
    "service",
]

SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
SERVICE_NAME_V1ALPHA = "grpc.reflection.v1alpha.ServerReflection"
#: The v1 messages (v1alpha's are the same on the wire: ReflectionStub uses these for both).
ServerReflectionRequest = reflection_v1_pb2.ServerReflectionRequest
ServerReflectionResponse = reflection_v1_pb2.ServerReflectionResponse
ExtensionRequest = reflection_v1_pb2.ExtensionRequest
#: Both versions' service names: list them with the application's own.
SERVICE_NAMES = (SERVICE_NAME, SERVICE_NAME_V1ALPHA)

_METHODS: dict[str, ModuleType] = {
    f"/{SERVICE_NAME}/ServerReflectionInfo": reflection_v1_pb2,
    f"/{SERVICE_NAME_V1ALPHA}/ServerReflectionInfo": reflection_v1alpha_pb2,
}
#: This package's own descriptors, looked up after the application's pool.
_OWN_POOLS = tuple(
    m.DESCRIPTOR.pool for m in (reflection_v1_pb2, reflection_v1alpha_pb2, health_pb2)
)
#: What is asked of a pool (protobuf's upb pool is not a descriptor_pool.DescriptorPool).
_POOL_METHODS = (
    "FindFileByName",
    "FindFileContainingSymbol",
    "FindServiceByName",
    "FindMessageTypeByName",
    "FindExtensionByNumber",
    "FindAllExtensions",
)


class _NotFound(Exception):
    """A name no pool knows: answered as error_response(NOT_FOUND)."""


@final
class ReflectionServicer:
    """The reflection service: ``grpc.Server([reflection.service(names)])``.

    ``service_names`` are the fully qualified services ``list_services`` answers
    (include :data:`SERVICE_NAMES` to list reflection itself); ``pool`` the
    descriptor pool to describe them from (default: protobuf's default pool).
    """

    def __init__(
        self,
        service_names: Iterable[str],
        *,
        pool: descriptor_pool.DescriptorPool | None = None,
    ) -> None:
        if isinstance(service_names, str | bytes):
            raise TypeError(
                "service_names is an iterable of service names, not one name: "
                f"pass [{service_names!r}]"
            )
        names = tuple(service_names)
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(
                    f"a service name is a non-empty str ('package.Service'), not {name!r}"
                )
        if pool is not None and not all(hasattr(pool, m) for m in _POOL_METHODS):
            raise TypeError(
                f"pool must be a google.protobuf.descriptor_pool.DescriptorPool, not {pool!r}"
            )
        self.service_names = tuple(sorted(set(names)))  # immutable after init
        # immutable after init
        self._pools = (descriptor_pool.Default() if pool is None else pool, *_OWN_POOLS)

    def service(self, method: str) -> grpc.MethodHandler | None:
        """The handler for ``method`` (a path), or None: a grpc.GenericHandler."""
        module = _METHODS.get(method)
        if module is None:
            return None

        async def info(requests: AsyncIterator[Any], context: grpc.ServicerContext) -> Any:
            async for response in self._answers(module, requests):
                yield response

        return grpc.stream_stream_handler(
            info,
            request_deserializer=module.ServerReflectionRequest.FromString,
            response_serializer=module.ServerReflectionResponse.SerializeToString,
        )

    async def _answers(self, pb: ModuleType, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """One response per request; ``sent`` holds the files this stream has had.

        Checkpoint: while waiting for a request. On cancellation (the client reset
        the stream, the deadline, the server's shutdown): nothing more is sent.
        """
        sent: set[str] = set()
        async for request in requests:
            response = pb.ServerReflectionResponse(
                valid_host=request.host, original_request=request
            )
            try:
                self._answer(pb, request, response, sent)
            except _NotFound as exc:
                response.error_response.error_code = grpc.StatusCode.NOT_FOUND.value
                response.error_response.error_message = str(exc)
            yield response

    def _answer(self, pb: ModuleType, request: Any, response: Any, sent: set[str]) -> None:
        which = request.WhichOneof("message_request")
        if which == "list_services":
            response.list_services_response.SetInParent()
            for name in self.service_names:
                response.list_services_response.service.add(name=name)
        elif which == "file_by_filename":
            filename = request.file_by_filename
            files = self._find(f"file {filename!r}", lambda p: p.FindFileByName(filename))
            self._files(files, response, sent)
        elif which == "file_containing_symbol":
            symbol = request.file_containing_symbol
            found = self._find(f"symbol {symbol!r}", lambda p: _file_containing(p, symbol))
            self._files(found, response, sent)
        elif which == "file_containing_extension":
            ext = request.file_containing_extension
            found = self._find(
                f"extension {ext.extension_number} of {ext.containing_type!r}",
                lambda p: (
                    p.FindExtensionByNumber(
                        p.FindMessageTypeByName(ext.containing_type), ext.extension_number
                    ).file
                ),
            )
            self._files(found, response, sent)
        elif which == "all_extension_numbers_of_type":
            name = request.all_extension_numbers_of_type
            pool, message = self._find_with_pool(
                f"message type {name!r}", lambda p: p.FindMessageTypeByName(name)
            )
            numbers = response.all_extension_numbers_response
            numbers.base_type_name = message.full_name
            numbers.extension_number.extend(
                sorted(e.number for e in pool.FindAllExtensions(message))
            )
        else:
            response.error_response.error_code = grpc.StatusCode.INVALID_ARGUMENT.value
            response.error_response.error_message = "the request asks nothing (no message_request)"

    def _find(self, what: str, look: Callable[[Any], Any]) -> Any:
        return self._find_with_pool(what, look)[1]

    def _find_with_pool(
        self, what: str, look: Callable[[Any], Any]
    ) -> tuple[descriptor_pool.DescriptorPool, Any]:
        """``look(pool)`` in the first pool that knows the name, or _NotFound(what)."""
        for pool in self._pools:
            try:
                return pool, look(pool)
            except KeyError:
                continue
        raise _NotFound(f"{what} not found")

    @staticmethod
    def _files(first: descriptor.FileDescriptor, response: Any, sent: set[str]) -> None:
        """``first`` and its transitive dependencies not yet ``sent`` on this stream."""
        out = response.file_descriptor_response.file_descriptor_proto
        out.append(first.serialized_pb)
        sent.add(first.name)
        queue = list(first.dependencies)
        while queue:
            dep = queue.pop(0)
            if dep.name in sent:
                continue
            sent.add(dep.name)
            out.append(dep.serialized_pb)
            queue.extend(dep.dependencies)


def _file_containing(
    pool: descriptor_pool.DescriptorPool, symbol: str
) -> descriptor.FileDescriptor:
    """The file declaring ``symbol``; KeyError if ``pool`` has none. protobuf's
    upb pool does not look up methods (``package.Service.Method``): that is asked
    of the service."""
    try:
        return pool.FindFileContainingSymbol(symbol)
    except KeyError:
        parent, _, method = symbol.rpartition(".")
        if parent and method in pool.FindServiceByName(parent).methods_by_name:
            return pool.FindServiceByName(parent).file
        raise


def service(
    service_names: Iterable[str], *, pool: descriptor_pool.DescriptorPool | None = None
) -> ReflectionServicer:
    """A reflection service listing ``service_names`` and both reflection services,
    described from ``pool`` (default: the default pool): add it to a ``grpc.Server``."""
    return ReflectionServicer([*_names(service_names), *SERVICE_NAMES], pool=pool)


def enable_server_reflection(
    service_names: Iterable[str],
    server: grpc.Server,
    *,
    pool: descriptor_pool.DescriptorPool | None = None,
) -> ReflectionServicer:
    """Add :func:`service` (``service_names`` and reflection's own) to ``server``,
    as grpcio's function of that name does; returns the servicer."""
    if not isinstance(server, grpc.Server):
        raise TypeError(f"server must be a trio_h2t.grpc.Server, not {server!r}")
    servicer = service(service_names, pool=pool)
    server.add_generic_handler(servicer)
    return servicer


def _names(service_names: Iterable[str]) -> Iterable[str]:
    if isinstance(service_names, str | bytes):
        raise TypeError(
            f"service_names is an iterable of service names, not one name: pass [{service_names!r}]"
        )
    return service_names


@final
class ReflectionStub:
    """A client of any server's reflection service, on a :class:`trio_h2t.grpc.Channel`.

    ``version`` picks the service, ``"v1"`` (default) or ``"v1alpha"`` (what older
    servers offer); the messages are the v1 ones either way (the same on the wire).
    """

    def __init__(self, channel: grpc.Channel, *, version: str = "v1") -> None:
        names = {"v1": SERVICE_NAME, "v1alpha": SERVICE_NAME_V1ALPHA}
        if version not in names:
            raise ValueError(f"version is 'v1' or 'v1alpha', not {version!r}")
        # Every attribute is immutable after init.
        self.channel = channel
        self.version = version
        self._info: grpc.StreamStreamMethod[
            reflection_v1_pb2.ServerReflectionRequest, reflection_v1_pb2.ServerReflectionResponse
        ] = channel.stream_stream(
            f"/{names[version]}/ServerReflectionInfo",
            request_serializer=ServerReflectionRequest.SerializeToString,
            response_deserializer=ServerReflectionResponse.FromString,
        )

    def ServerReflectionInfo(
        self,
        requests: Iterable[reflection_v1_pb2.ServerReflectionRequest]
        | AsyncIterable[reflection_v1_pb2.ServerReflectionRequest]
        | None = None,
        *,
        timeout: float | None = None,
        metadata: grpc.MetadataLike = (),
    ) -> AbstractAsyncContextManager[
        grpc.Call[
            reflection_v1_pb2.ServerReflectionRequest, reflection_v1_pb2.ServerReflectionResponse
        ]
    ]:
        """``async with stub.ServerReflectionInfo() as call``: ``send_message`` a
        request, ``receive_message`` its answer, ``done_writing`` at the end (or pass
        ``requests`` and iterate the call).

        Checkpoint: entering. On cancellation, or leaving the block: RST_STREAM(CANCEL).
        """
        return self._info(requests, timeout=timeout, metadata=metadata)
