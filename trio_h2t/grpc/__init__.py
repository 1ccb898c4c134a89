"""trio_h2t.grpc: gRPC on the trio_h2t transport (its public API only).

General layout, as in ``trio_h2t/__init__.py``: every public name lives in a private
module and is re-exported here; tracebacks say ``trio_h2t.grpc.X``.

- Wire, sans-IO (no trio): ``_framing.py`` (the length-prefixed codec, compression),
  ``_metadata.py`` (:class:`Metadata`, ``grpc-timeout``), ``_status.py``
  (:class:`StatusCode`, :class:`RpcError`, ``grpc-message``, HTTP and RST_STREAM
  mappings), ``_codec.py`` (default serializers), ``_service_config.py``
  (:func:`parse_service_config`: retry policies, timeouts, size limits, LB policy).
- Client, ``_client.py``: :func:`open_channel` / :class:`Channel`, its methods
  (:class:`UnaryUnaryMethod`...) and :class:`Call`.
- Server, ``_server.py``: :class:`Server` (a trio_h2t handler), handlers
  (:func:`unary_unary_handler`..., :func:`method_handlers_generic_handler`,
  :func:`rpc` for service classes) and :class:`ServicerContext`.

See ``docs/grpc.md``.
"""

import contextlib

from ._backoff import ConnectionBackoff as ConnectionBackoff
from ._balancer import ConnectivityState as ConnectivityState
from ._client import (
    Call as Call,
    Channel as Channel,
    StreamStreamMethod as StreamStreamMethod,
    StreamUnaryMethod as StreamUnaryMethod,
    UnaryStreamMethod as UnaryStreamMethod,
    UnaryUnaryMethod as UnaryUnaryMethod,
    open_channel as open_channel,
)
from ._framing import (
    DEFAULT_MAX_RECEIVE_MESSAGE_SIZE as DEFAULT_MAX_RECEIVE_MESSAGE_SIZE,
    MessageDecoder as MessageDecoder,
    encode_message as encode_message,
)
from ._metadata import (
    Metadata as Metadata,
    MetadataLike as MetadataLike,
    encode_timeout as encode_timeout,
    parse_timeout as parse_timeout,
)
from ._server import (
    GenericHandler as GenericHandler,
    MethodHandler as MethodHandler,
    MethodKind as MethodKind,
    Server as Server,
    ServicerContext as ServicerContext,
    method_handlers_generic_handler as method_handlers_generic_handler,
    rpc as rpc,
    stream_stream_handler as stream_stream_handler,
    stream_unary_handler as stream_unary_handler,
    unary_stream_handler as unary_stream_handler,
    unary_unary_handler as unary_unary_handler,
)
from ._service_config import (
    MethodConfig as MethodConfig,
    RetryPolicy as RetryPolicy,
    RetryThrottling as RetryThrottling,
    ServiceConfig as ServiceConfig,
    parse_service_config as parse_service_config,
)
from ._status import (
    RpcError as RpcError,
    StatusCode as StatusCode,
    decode_grpc_message as decode_grpc_message,
    encode_grpc_message as encode_grpc_message,
    status_from_http as status_from_http,
    status_from_rst as status_from_rst,
)
from ._target import Target as Target, parse_target as parse_target

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_SIZE",
    "Call",
    "Channel",
    "ConnectionBackoff",
    "ConnectivityState",
    "GenericHandler",
    "Metadata",
    "MetadataLike",
    "MessageDecoder",
    "MethodHandler",
    "MethodConfig",
    "MethodKind",
    "RetryPolicy",
    "RetryThrottling",
    "RpcError",
    "Server",
    "ServiceConfig",
    "ServicerContext",
    "StatusCode",
    "StreamStreamMethod",
    "StreamUnaryMethod",
    "Target",
    "UnaryStreamMethod",
    "UnaryUnaryMethod",
    "decode_grpc_message",
    "encode_grpc_message",
    "encode_message",
    "encode_timeout",
    "method_handlers_generic_handler",
    "open_channel",
    "parse_service_config",
    "parse_target",
    "parse_timeout",
    "rpc",
    "status_from_http",
    "status_from_rst",
    "stream_stream_handler",
    "stream_unary_handler",
    "unary_stream_handler",
    "unary_unary_handler",
]


def _fixup_module_metadata() -> None:
    # As trio_h2t's own fix-up (kept local: the gRPC layer uses only public names).
    for name in __all__:
        obj = globals()[name]
        if getattr(obj, "__module__", "").startswith("trio_h2t.grpc."):
            with contextlib.suppress(AttributeError, TypeError):
                obj.__module__ = __name__


_fixup_module_metadata()
del _fixup_module_metadata
