"""One-pass validation of a received header block (RFC 9113 §8.1.1, §8.2, §8.3).

h2 validates inbound headers with a chain of seven generators, testing every byte of
every name and value in a Python loop (python-peers.md §1.6). :func:`validate_received`
makes the same checks in one pass, with regular expressions for the byte ranges and a
set of names already known to be good, and raises the same exception type
(``h2.exceptions.ProtocolError``) for exactly the same blocks;
``tests/test_headers.py`` checks that equivalence against h2's own pipeline on
generated blocks.

It is a pure function: no state, no task owns anything here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from h2.exceptions import ProtocolError
from hpack.table import HeaderTable

__all__ = ["validate_received"]

# §8.2.1: a name is 0x21-0x40 or 0x5b-0x7e (no controls, space, uppercase, DEL or
# non-ASCII), and a colon only as the first byte (a pseudo-header).
_NAME = re.compile(rb"[\x21-\x40\x5b-\x7e][\x21-\x39\x3b-\x40\x5b-\x7e]*")
# §8.2.1: a value has no NUL, LF or CR, and neither starts nor ends with SP or HTAB.
_BAD_VALUE = re.compile(rb"[\x00\n\r]|\A[ \t]|[ \t]\Z")

_CONNECTION_HEADERS = frozenset(
    [b"connection", b"proxy-connection", b"keep-alive", b"transfer-encoding", b"upgrade"]
)
_PSEUDO = frozenset([b":method", b":scheme", b":authority", b":path", b":status", b":protocol"])
_REQUEST_ONLY = frozenset([b":scheme", b":path", b":authority", b":method", b":protocol"])

# Names that need no check but of their value: the regular names of HPACK's static
# table, less those with rules of their own ("host", and any connection-specific
# one), and gRPC's. Membership skips the regex.
_GOOD_NAMES = frozenset(
    [
        name
        for name, _ in HeaderTable.STATIC_TABLE
        if name[:1] != b":" and name not in (b"host", b"te") and name not in _CONNECTION_HEADERS
    ]
    + [b"grpc-status", b"grpc-message", b"grpc-encoding", b"grpc-accept-encoding"]
    + [b"grpc-timeout", b"grpc-status-details-bin"]
)


def _check_name(name: bytes) -> None:
    if _NAME.fullmatch(name) is None:
        raise ProtocolError(f"Illegal header name {name!r}")
    if name in _CONNECTION_HEADERS:
        raise ProtocolError(f"Connection-specific header field present: {name!r}.")


def validate_received(
    headers: Sequence[tuple[bytes, bytes]], *, response: bool, trailer: bool
) -> None:
    """Raise ``ProtocolError`` if ``headers`` is not a valid block of its kind.

    ``response``: a response (or informational response) header block; ``trailer``:
    a trailer block; neither: a request. The checks are h2's (with its inbound
    validation on and normalisation off): legal bytes in names and values, no empty
    name, ``te`` only as ``trailers``, no connection-specific field, pseudo-headers
    known, unique and first, the pseudo-headers each kind needs (and no others), for
    requests ``:authority`` or ``host`` (equal if both, one ``host`` at most) and a
    non-empty ``:path``.
    """
    pseudo: set[bytes] = set()
    regular = False
    method = authority = host = None
    good = _GOOD_NAMES
    for name, value in headers:
        if name not in good:
            _check_name(name)
            if name[0] == 0x3A:  # ':'
                if name in pseudo:
                    raise ProtocolError(f"Received duplicate pseudo-header field {name!r}")
                if regular:
                    raise ProtocolError(f"Received pseudo-header field out of sequence: {name!r}")
                if name not in _PSEUDO:
                    raise ProtocolError(f"Received custom pseudo-header field {name!r}")
                pseudo.add(name)
                if name == b":method":
                    method = value
                elif name == b":authority":
                    authority = value
                elif name == b":path" and not value and not response and not trailer:
                    raise ProtocolError("An empty :path header is forbidden")
            else:
                regular = True
                if name == b"te" and value.lower() != b"trailers":
                    raise ProtocolError(f"Invalid value for TE header: {value!r}")
                if name == b"host":
                    if host is not None and not response and not trailer:
                        raise ProtocolError("Request header block has multiple Host headers.")
                    host = value
        else:
            regular = True
        if value and _BAD_VALUE.search(value) is not None:
            raise ProtocolError(f"Illegal header value {value!r}")

    if trailer:
        if pseudo:
            raise ProtocolError(f"Received pseudo-header in trailer {pseudo}")
        return
    if response:
        if b":status" not in pseudo:
            raise ProtocolError("Header block missing mandatory b':status' header")
        if pseudo & _REQUEST_ONLY:
            raise ProtocolError(f"Encountered request-only headers {pseudo & _REQUEST_ONLY}")
        return
    # A request.
    if b":method" not in pseudo:
        raise ProtocolError("Header block missing mandatory b':method' header")
    connect = method == b"CONNECT"
    if connect and b":protocol" not in pseudo:
        # Ordinary CONNECT (§8.5): no :scheme, no :path.
        if b":scheme" in pseudo or b":path" in pseudo:
            raise ProtocolError("Ordinary CONNECT MUST NOT include :scheme or :path")
    elif b":scheme" not in pseudo or b":path" not in pseudo:
        raise ProtocolError("Request header block missing :scheme or :path")
    if b":status" in pseudo:
        raise ProtocolError("Encountered response-only header b':status'")
    if not connect and b":protocol" in pseudo:
        raise ProtocolError("Encountered connect-request-only header b':protocol'")
    if authority is None and host is None:
        raise ProtocolError("Request header block does not have an :authority or Host header.")
    if authority is not None and host is not None and authority != host:
        raise ProtocolError(
            f"Request header block has mismatched :authority and Host headers: "
            f"{authority!r} / {host!r}"
        )
