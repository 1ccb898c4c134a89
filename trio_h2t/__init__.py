"""trio_h2t: a Trio-native, structured-concurrency HTTP/2 transport.

General layout: every public name lives in a private ``_module`` and is re-exported
here with ``from ._x import Y as Y``; tracebacks say ``trio_h2t.Y``. Nothing else is
public. ``tests/test_exports.py`` checks it.

- Client: :func:`open_connection` (TCP, optionally TLS) / :func:`open_unix_connection`
  (Unix socket) / :func:`open_client_connection` (any
  ``trio.abc.Stream``) give a :class:`ClientConnection`; its ``open_stream`` gives
  an :class:`H2Stream`.
- Server: :func:`open_server` / :func:`serve_tcp` (TCP, optionally TLS) /
  :func:`serve_listeners` (any ``trio.abc.Listener``) / :func:`serve_connection` (any
  ``trio.abc.Stream``) run ``handler(stream)`` (a :data:`Handler`) for each incoming
  stream; ``stream.request`` is its :class:`Request`, ``stream.cancel_reason`` a
  :class:`CancelReason`. ``serve_connection`` reports a :class:`ServerConnection`,
  the ``serve_*`` of many connections an :class:`H2Server`.
- Statistics: ``statistics()`` of either connection gives a
  :class:`ConnectionStatistics`, with the writer task's :class:`LoopyStatistics`;
  ``H2Server.statistics()`` a :class:`ServerStatistics`.
- Messages: :class:`Headers` (a read-only multi-dict), :class:`Request`,
  :class:`Response` (from ``ClientConnection.request``), :class:`TLSInfo`.
- Errors: see ``_exceptions.py`` and ``docs/errors.md``. :class:`ErrorCodes` is h2's
  enum of RFC 9113 §7 error codes (``h2.errors.ErrorCodes``, re-exported as is): the
  type of every ``error_code`` attribute for a code it knows.
"""

from ._client import (
    ClientConnection as ClientConnection,
    open_client_connection as open_client_connection,
    open_connection as open_connection,
    open_unix_connection as open_unix_connection,
)
from ._config import TransportConfig as TransportConfig
from ._exceptions import (
    ConnectionClosingError as ConnectionClosingError,
    ConnectionLostError as ConnectionLostError,
    ErrorCodes as ErrorCodes,
    GoAwayError as GoAwayError,
    H2ProtocolError as H2ProtocolError,
    KeepaliveTimeoutError as KeepaliveTimeoutError,
    LocalProtocolError as LocalProtocolError,
    RemoteProtocolError as RemoteProtocolError,
    StreamRefusedError as StreamRefusedError,
    StreamResetError as StreamResetError,
)
from ._messages import (
    CancelReason as CancelReason,
    Headers as Headers,
    Request as Request,
    Response as Response,
    TLSInfo as TLSInfo,
)
from ._server import (
    H2Server as H2Server,
    Handler as Handler,
    ServerConnection as ServerConnection,
    open_server as open_server,
    serve_connection as serve_connection,
    serve_listeners as serve_listeners,
    serve_tcp as serve_tcp,
)
from ._statistics import (
    ConnectionStatistics as ConnectionStatistics,
    LoopyStatistics as LoopyStatistics,
    ServerStatistics as ServerStatistics,
)
from ._stream import H2Stream as H2Stream
from ._streamview import H2StreamView as H2StreamView
from ._util import fixup_module_metadata as _fixup_module_metadata
from ._version import __version__ as __version__
from ._workerpool import serve_worker as serve_worker, supervise_workers as supervise_workers

__all__ = [
    "CancelReason",
    "ClientConnection",
    "ConnectionClosingError",
    "ConnectionLostError",
    "ConnectionStatistics",
    "ErrorCodes",
    "GoAwayError",
    "H2ProtocolError",
    "H2Server",
    "H2Stream",
    "H2StreamView",
    "Handler",
    "Headers",
    "KeepaliveTimeoutError",
    "LocalProtocolError",
    "LoopyStatistics",
    "RemoteProtocolError",
    "Request",
    "Response",
    "ServerConnection",
    "ServerStatistics",
    "StreamRefusedError",
    "StreamResetError",
    "TLSInfo",
    "TransportConfig",
    "__version__",
    "open_client_connection",
    "open_connection",
    "open_server",
    "open_unix_connection",
    "serve_connection",
    "serve_listeners",
    "serve_tcp",
    "serve_worker",
    "supervise_workers",
]

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
