"""Narrow protocols: what a lower module reaches of a higher one, and nothing more.

The package is layered (tests/test_import.py): each import goes down a floor or
along one, and none goes back up, not even for annotations. Where a lower object
must call a higher one (a stream its connection, a stream view its stream) it holds
it as one of these protocols, checked structurally by mypy where the higher object
is handed down. Each protocol lists only what its holder uses today; a new use
widens it here, in sight of the layering.

- ``StreamCore``: what an ``H2Stream`` (``_stream.py``) reaches of its
  ``ConnectionCore`` (``_connection.py``, which builds on streams).
- ``ViewedStream``: what an ``H2StreamView`` (``_streamview.py``) reaches of the
  ``H2Stream`` under it (``_stream.py``, whose ``as_stream`` builds the view).

(``_items.ItemStream``, what a control item reaches of its stream, lives with the
items: this module imports the control buffer, which imports the items.)
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from ._config import TransportConfig
from ._controlbuf import ControlBuffer
from ._exceptions import ConnectionClosingError
from ._flow import ConnectionInFlow
from ._messages import ConnectionInfo

__all__ = ["StreamCore", "ViewedStream"]

#: The stream type a core takes back in its calls (``H2Stream``).
StreamT_contra = TypeVar("StreamT_contra", contravariant=True)


class StreamCore(Protocol[StreamT_contra]):
    """What a stream reaches of its connection; every method is synchronous."""

    @property
    def cbuf(self) -> ControlBuffer:
        """The control buffer the stream's items go to (loopy consumes it)."""

    @property
    def client_side(self) -> bool: ...

    @property
    def config(self) -> TransportConfig: ...

    @property
    def initial_window_size(self) -> int:
        """The stream window a new stream starts with (grows with the BDP estimate)."""

    @property
    def in_flow(self) -> ConnectionInFlow:
        """The connection's receive window and inbound budget (the stream's share of it)."""

    def connection_info(self) -> ConnectionInfo:
        """The transport's addresses and TLS state."""

    def closing_error(self) -> ConnectionClosingError:
        """The error for work refused because the connection is over."""

    def reset_stream(self, stream: StreamT_contra, code: int, error: BaseException | None) -> None:
        """Reset ``stream`` now (RST_STREAM via loopy); fail it with ``error``."""

    def send_window_update(self, stream: StreamT_contra, increment: int) -> None:
        """Queue a WINDOW_UPDATE of ``increment`` for ``stream``."""

    def connection_window_freed(self) -> None:
        """Unread bytes left the inbound budget: a connection WINDOW_UPDATE may be due."""


class ViewedStream(Protocol):
    """What a stream view calls on the stream it wraps (``H2Stream``'s own methods;
    their docstrings are the contract)."""

    @property
    def stream_id(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    # What the view's users reach through ``view.stream`` (its docstring: headers,
    # trailers, ``reset``) besides the calls the view makes itself.
    @property
    def headers(self) -> list[tuple[bytes, bytes]] | None: ...

    @property
    def trailers(self) -> list[tuple[bytes, bytes]] | None: ...

    async def send_data(self, data: bytes | bytearray | memoryview) -> None: ...

    async def end(self) -> None: ...

    async def receive_some(self, max_bytes: int | None = None) -> bytes: ...

    def reset(self, error_code: int = ...) -> None: ...

    def view_raise_if_failed(self) -> None: ...

    async def view_wait_write_quota(self) -> None: ...

    def view_close_after_output(self) -> None: ...
