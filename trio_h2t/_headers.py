"""One-pass validation of a header block (RFC 9113 §8.1.1, §8.2, §8.3), both ways.

h2 validates inbound headers with a chain of seven generators (h2's ``utilities.py``
``validate_headers``), testing every byte of every name and value in a Python loop.
:func:`validate_received` makes the same checks in one pass, with regular expressions
for the byte ranges and sets of names already known to be good, and raises the same
exception type (``h2.exceptions.ProtocolError``) for exactly the same blocks;
``tests/test_headers.py`` checks that equivalence against h2's own pipeline on
generated blocks.

:func:`validate_to_send` applies the same rules to a block the application asks us
to send (h2's outbound validation is off, see ``make_h2_state``) and raises
``ValueError`` in the calling task, before anything is queued: a malformed block
never reaches the wire, where the peer would answer it with a reset.

Both are pure functions of the block, so accepted blocks are remembered: an
application sends the same few blocks again and again (a client's request headers, a
server's response headers and trailers), and a peer's blocks repeat the same way. A
process-wide map holds at most ``ACCEPTED_ENTRIES`` accepted blocks of at most
``MAX_REMEMBERED_BLOCK`` bytes of names and values (cleared when full); a block found
there is not checked again. A block to send is remembered under a key of its own
(it is also checked for its pseudo-header values), so a received block never vouches
for one to send. Rejections are never remembered. The map is only read and
written between awaits and each operation on it is atomic, so tasks, connections and
threads share it safely.

Why a process-wide map is acceptable (it is the one piece of state shared across
connections): it is bounded, so it costs at most about 64 x (1 KiB + the tuple
overhead), under 150 KiB, however many connections or peers there are; it holds
only blocks that passed validation, so a peer can neither make it grow nor poison
it (a hostile peer sending distinct blocks only makes it clear itself, costing the
checks it would have cost anyway); and what it stores is a pure function of the
block, so sharing it changes no result, only how fast it is found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NoReturn

from h2.exceptions import ProtocolError
from hpack.table import HeaderTable

__all__ = [
    "ACCEPTED_ENTRIES",
    "CONNECTION_HEADERS",
    "HEAD_RULE",
    "MAX_REMEMBERED_BLOCK",
    "PERCENT_ENCODE_HINT",
    "BodyRule",
    "body_rule",
    "validate_received",
    "validate_to_send",
]

#: What a header block we send lets the body after it be: ``(limit, exact, what)``,
#: the body being exactly (``exact``) or at most ``limit`` bytes, as ``what`` says.
BodyRule = tuple[int, bool, str]
#: The rule for a response to HEAD (RFC 9110 §9.3.2), whatever its content-length.
HEAD_RULE: BodyRule = (0, False, "a response to HEAD (RFC 9110 §9.3.2)")

#: Accepted blocks remembered (process-wide).
ACCEPTED_ENTRIES = 64
#: Largest block remembered: bytes of names and values together.
MAX_REMEMBERED_BLOCK = 1024
#: Checked and accepted: (response, trailer, *fields) -> None, or for a block to
#: send (_TO_SEND..., response, trailer, *fields) -> its body rule. See the module
#: docstring.
_accepted: dict[tuple[object, ...], BodyRule | None] = {}


# §8.2.1: a name is 0x21-0x40 or 0x5b-0x7e (no controls, space, uppercase, DEL or
# non-ASCII), and a colon only as the first byte (a pseudo-header).
_NAME = re.compile(rb"[\x21-\x40\x5b-\x7e][\x21-\x39\x3b-\x40\x5b-\x7e]*")
# §8.2.1: a value has no NUL, LF or CR, and neither starts nor ends with SP or HTAB.
_BAD_VALUE = re.compile(rb"[\x00\n\r]|\A[ \t]|[ \t]\Z")

#: §8.2.2: connection-specific fields, malformed in HTTP/2.
CONNECTION_HEADERS = frozenset(
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
        if name[:1] != b":" and name not in (b"host", b"te") and name not in CONNECTION_HEADERS
    ]
    + [b"grpc-status", b"grpc-message", b"grpc-encoding", b"grpc-accept-encoding"]
    + [b"grpc-timeout", b"grpc-status-details-bin"]
)


def _check_name(name: bytes) -> None:
    if _NAME.fullmatch(name) is None:
        if name != name.lower() and _NAME.fullmatch(name.lower()) is not None:
            raise ProtocolError(
                f"Illegal header name {name!r}: HTTP/2 field names are lowercase (RFC 9113 §8.2.1)"
            )
        raise ProtocolError(f"Illegal header name {name!r}")
    if name in CONNECTION_HEADERS:
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
    key = (response, trailer, *headers)
    if key in _accepted:
        return
    _check(headers, response, trailer)
    _remember(key, headers)


def _remember(
    key: tuple[object, ...], headers: Sequence[tuple[bytes, bytes]], rule: BodyRule | None = None
) -> None:
    if sum(len(name) + len(value) for name, value in headers) <= MAX_REMEMBERED_BLOCK:
        if len(_accepted) >= ACCEPTED_ENTRIES:
            _accepted.clear()
        _accepted[key] = rule


def _check(headers: Sequence[tuple[bytes, bytes]], response: bool, trailer: bool) -> None:
    """The checks of :func:`validate_received`, on every block: each field, then what
    the block's kind needs of its pseudo-headers. The received-header hot path,
    guarded by ``benchmarks/micro/headers.py`` (against h2's ``validate_headers``)."""
    pseudo: dict[bytes, bytes] = {}  # the pseudo-headers seen, in order, and their values
    regular = False  # a regular field seen: no pseudo-header may follow
    host = None
    request = not response and not trailer
    good = _GOOD_NAMES
    for name, value in headers:
        if name in good:
            regular = True
        elif name in _PSEUDO:  # a legal name, and not connection-specific
            if regular or name in pseudo or (request and not value and name == b":path"):
                _refuse_pseudo_field(name, pseudo, regular)
            pseudo[name] = value
        else:
            host = _check_regular_field(name, value, host, request)
            regular = True
        if value and _BAD_VALUE.search(value) is not None:
            raise ProtocolError(f"Illegal header value {value!r}")
    if trailer:
        if pseudo:
            raise ProtocolError(f"Pseudo-header in trailer {set(pseudo)}")
    elif response:
        _check_response_pseudo(pseudo)
    else:
        _check_request_pseudo(pseudo)
        _check_request_authority(pseudo.get(b":authority"), host)


def _refuse_pseudo_field(name: bytes, pseudo: dict[bytes, bytes], regular: bool) -> NoReturn:
    """Why a pseudo-header is refused: a duplicate, after a regular field, or else a
    request's empty :path."""
    if name in pseudo:
        raise ProtocolError(f"Duplicate pseudo-header field {name!r}")
    if regular:
        raise ProtocolError(f"Pseudo-header field out of sequence: {name!r}")
    raise ProtocolError("An empty :path header is forbidden")


def _check_regular_field(
    name: bytes, value: bytes, host: bytes | None, request: bool
) -> bytes | None:
    """A regular field whose name is not known to be good: a legal name, no custom
    pseudo-header, ``te`` only as ``trailers``, one ``host`` in a request. Returns
    the block's ``host`` so far."""
    _check_name(name)
    if name[0] == 0x3A:  # ':'
        raise ProtocolError(f"Custom pseudo-header field {name!r}")
    if name == b"te" and value.lower() != b"trailers":
        raise ProtocolError(f"Invalid value for TE header: {value!r}")
    if name != b"host":
        return host
    if host is not None and request:
        raise ProtocolError("Request header block has multiple Host headers.")
    return value


def _check_response_pseudo(pseudo: dict[bytes, bytes]) -> None:
    """A response's pseudo-headers: :status, and none of a request's."""
    if b":status" not in pseudo:
        raise ProtocolError("Header block missing mandatory b':status' header")
    if pseudo.keys() & _REQUEST_ONLY:
        raise ProtocolError(f"Encountered request-only headers {pseudo.keys() & _REQUEST_ONLY}")


def _check_request_pseudo(pseudo: dict[bytes, bytes]) -> None:
    """A request's pseudo-headers: :method; :scheme and :path unless an ordinary
    CONNECT (§8.5), which has neither; no :status; :protocol only on CONNECT."""
    if b":method" not in pseudo:
        raise ProtocolError("Header block missing mandatory b':method' header")
    connect = pseudo[b":method"] == b"CONNECT"
    if connect and b":protocol" not in pseudo:
        if b":scheme" in pseudo or b":path" in pseudo:
            raise ProtocolError("Ordinary CONNECT MUST NOT include :scheme or :path")
    elif b":scheme" not in pseudo or b":path" not in pseudo:
        raise ProtocolError("Request header block missing :scheme or :path")
    if b":status" in pseudo:
        raise ProtocolError("Encountered response-only header b':status'")
    if not connect and b":protocol" in pseudo:
        raise ProtocolError("Encountered connect-request-only header b':protocol'")


def _check_request_authority(authority: bytes | None, host: bytes | None) -> None:
    """A request names its authority: :authority or host, equal if both."""
    if authority is None and host is None:
        raise ProtocolError("Request header block does not have an :authority or Host header.")
    if authority is not None and host is not None and authority != host:
        raise ProtocolError(
            f"Request header block has mismatched :authority and Host headers: "
            f"{authority!r} / {host!r}"
        )


def validate_to_send(
    headers: Sequence[tuple[bytes, bytes]],
    *,
    response: bool,
    trailer: bool,
    informational: bool = False,
) -> BodyRule | None:
    """Raise ``ValueError`` if ``headers`` is not a block RFC 9113 lets us send;
    else return its :func:`body_rule` (None for trailers).

    The rules and the kinds are :func:`validate_received`'s, so a block we send is
    one our own server or client would accept. A response's ``:status`` must be a
    final one (200-599), or with ``informational`` a 1xx other than 101.
    """
    # A block to send is also checked for its pseudo-header values, which the rules
    # for received blocks leave open; its verdict is remembered under a key of its
    # own, so an accepted received block never vouches for one to send.
    key = (_TO_SEND_INFO if informational else _TO_SEND, response, trailer, *headers)
    rule = _accepted.get(key, _UNKNOWN)
    if rule is not _UNKNOWN:
        return rule  # type: ignore[return-value]  # a BodyRule or None
    try:
        _check(headers, response, trailer)
    except ProtocolError as exc:
        kind = "trailer" if trailer else "response" if response else "request"
        raise ValueError(f"malformed {kind} header block, not sent: {exc}") from None
    result = None
    if not trailer:
        _check_pseudo_values(headers, response, informational)
        result = body_rule(headers)
    _remember(key, headers, result)
    return result


# The first item of a to-send verdict's key in ``_accepted`` (final or 1xx).
_TO_SEND = object()
_TO_SEND_INFO = object()
_UNKNOWN = object()  # not in ``_accepted``


def body_rule(block: Sequence[tuple[bytes, bytes]]) -> BodyRule | None:
    """What the body after our header ``block`` may be (a :data:`BodyRule`), or None.

    Exactly its content-length; nothing on a 204 or 304 response, whatever its
    content-length says (RFC 9110 §6.4.1; a response to HEAD is the caller's
    ``HEAD_RULE``). Raises ValueError for a content-length that is not one decimal
    number (RFC 9110 §8.6).
    """
    length: int | None = None
    status = None
    for name, value in block:
        if name == b"content-length":
            if not value.isdigit():
                raise ValueError(f"content-length must be a decimal number, not {value!r}")
            if length is not None and int(value) != length:
                raise ValueError("content-length given twice with different values")
            length = int(value)
        elif name == b":status":
            status = value
    if status == b"204" or status == b"304":
        return 0, False, f"a {status.decode()} response (RFC 9110 §6.4.1)"
    if length is None:
        return None
    return length, True, f"its content-length of {length}"


# RFC 9110 §5.6.2: a method is a token, one or more tchar.
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 9113 §8.3.1, RFC 9110 §4.2.3 (origin-form): "/" and then visible ASCII (no
# space, no control, no non-ASCII byte; those must be percent-encoded).
_ORIGIN_FORM = re.compile(rb"/[\x21-\x7e]*")
# RFC 9110 §15: a status code is three digits, 100-599.
_STATUS = re.compile(rb"[1-5][0-9][0-9]")
PERCENT_ENCODE_HINT = 'percent-encode it first, e.g. urllib.parse.quote(path, safe="/?&=%")'


def _check_pseudo_values(
    headers: Sequence[tuple[bytes, bytes]], response: bool, informational: bool
) -> None:
    """The values of the pseudo-headers we send, which the receiving rules leave open.

    Only for blocks we send: the pseudo-headers come first (``validate_received``
    checked that), so the loop stops at the first regular field. Raises ValueError.
    """
    method = path = None
    for name, value in headers:
        if name[:1] != b":":
            break
        if name == b":status":
            _check_status_value(value, informational)
        elif name == b":method":
            method = value
            if _TOKEN.fullmatch(value) is None:
                raise ValueError(f":method must be a token (RFC 9110 §5.6.2), not {value!r}")
        elif name == b":path":
            path = value
    if path is not None and not response:
        _check_path_value(path, method)


def _check_status_value(value: bytes, informational: bool) -> None:
    """A :status to send: three digits, 100-599, not 101; 1xx exactly when
    ``informational``."""
    if _STATUS.fullmatch(value) is None:
        raise ValueError(f":status must be three digits from 100 to 599, not {value!r}")
    if value == b"101":
        # RFC 9113 §8.6: "the 101 (Switching Protocols) informational status
        # code cannot be used" (HTTP/2 has no Upgrade).
        raise ValueError(":status 101 cannot be used in HTTP/2 (RFC 9113 §8.6)")
    if informational and value[:1] != b"1":
        raise ValueError(
            f":status {value.decode()} is final: send_informational sends 1xx "
            "responses only (send_headers sends the final one)"
        )
    if not informational and value[:1] == b"1":
        raise ValueError(
            f":status {value.decode()} is informational: send it with "
            "send_informational(); send_headers sends the final response (200-599)"
        )


def _check_path_value(path: bytes, method: bytes | None) -> None:
    """A request's :path to send: ``*`` for OPTIONS only, else origin-form."""
    if path == b"*":
        if method != b"OPTIONS":
            raise ValueError(':path "*" is only for OPTIONS requests (RFC 9113 §8.3.1)')
    elif _ORIGIN_FORM.fullmatch(path) is None:
        raise ValueError(
            f":path must be origin-form: '/' then visible ASCII, no spaces, not {path!r}; "
            + PERCENT_ENCODE_HINT
        )
