"""Client-side health checking of one connection (grpc's doc/health-checking.md, gRFC A17).

Theory of operation
-------------------
With the service config's ``healthCheckConfig.serviceName`` set and the
``round_robin`` policy, each subchannel whose connection is up runs
:func:`watch_health` on it: one ``grpc.health.v1.Health/Watch`` call, asking for
that service's status. What it learns goes to the subchannel through ``report``:

- before the first answer: ``CHECKING`` (the subchannel shows CONNECTING, so no
  call goes to a backend that is not known to serve yet);
- each answer: ``SERVING`` (READY), or ``NOT_SERVING`` for any other status
  (NOT_SERVING, SERVICE_UNKNOWN, UNKNOWN: the subchannel shows TRANSIENT_FAILURE
  and leaves the rotation);
- the call answered UNIMPLEMENTED (the backend has no health service): health
  checking is off for this connection, which counts as healthy (``DISABLED``,
  READY); a new connection of the subchannel asks again;
- the call ended any other way (the stream ended, a status, a reset): ``FAILED``
  (TRANSIENT_FAILURE), then the call is made again. After a call that brought an
  answer the next starts at once; otherwise it waits out grpc's connection
  backoff (``_backoff.py``), as A17 says.

The subchannel cancels the watch when its connection stops taking streams (GOAWAY,
loss) or the channel closes. The call is opened by ``open_watch``, given by the
channel (``_client.py``): a plain unary-stream call through trio_h2t.grpc's own
client on the subchannel's connection, so this module imports no client code.
The two messages are encoded here by hand (a string field 1, an enum field 1): the
channel does not need protobuf for them.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterable, Callable
from contextlib import AbstractAsyncContextManager

import trio

from ._backoff import BackoffState
from ._status import RpcError, StatusCode

__all__ = [
    "WATCH_METHOD",
    "SERVING",
    "Health",
    "OpenWatch",
    "decode_status",
    "encode_request",
    "status_name",
    "watch_health",
]

WATCH_METHOD = "/grpc.health.v1.Health/Watch"

#: HealthCheckResponse.ServingStatus values (grpc/health/v1/health.proto).
_STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
SERVING = 1

#: ``open_watch(request_bytes)``: the Watch call's context manager, its responses
#: (serialized HealthCheckResponse messages) iterated inside.
OpenWatch = Callable[[bytes], AbstractAsyncContextManager[AsyncIterable[bytes]]]


class Health(enum.Enum):
    """What a health watch reports to its subchannel."""

    CHECKING = "CHECKING"  # a Watch call is starting: no answer yet (CONNECTING)
    SERVING = "SERVING"  # the latest answer is SERVING (READY)
    NOT_SERVING = "NOT_SERVING"  # the latest answer is anything else (TRANSIENT_FAILURE)
    FAILED = "FAILED"  # the call ended; it is made again (TRANSIENT_FAILURE)
    DISABLED = "DISABLED"  # UNIMPLEMENTED: health checking off, healthy (READY)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_request(service: str) -> bytes:
    """A serialized ``HealthCheckRequest(service=service)``."""
    if not service:
        return b""
    data = service.encode("utf-8")
    return b"\x0a" + _varint(len(data)) + data


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def decode_status(data: bytes) -> int:
    """The ``status`` of a serialized ``HealthCheckResponse`` (0, UNKNOWN, if absent;
    the last one if repeated; unknown fields skipped). ValueError if malformed."""
    status = 0
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _read_varint(data, at)
            if field == 1:
                status = value
        elif wire == 1:
            at += 8
        elif wire == 2:
            length, at = _read_varint(data, at)
            at += length
        elif wire == 5:
            at += 4
        else:
            raise ValueError(f"wire type {wire} in a HealthCheckResponse")
        if at > len(data):
            raise ValueError("truncated HealthCheckResponse")
    return status


def status_name(status: int) -> str:
    """``SERVING``, ``NOT_SERVING``... for a ServingStatus value."""
    return _STATUS_NAMES.get(status, str(status))


async def watch_health(
    open_watch: OpenWatch,
    service: str,
    backoff: BackoffState,
    report: Callable[[Health, str], None],
) -> None:
    """Watch ``service``'s health on one connection, calling ``report(health, why)``
    at every change (the module's docstring), until cancelled or DISABLED.

    Checkpoint: always. On cancellation: the Watch call is reset (RST_STREAM
    CANCEL); nothing more is reported.
    """
    request = encode_request(service)
    while True:
        report(Health.CHECKING, "waiting for the first health-check answer")
        delay = backoff.next_delay()
        start = trio.current_time()
        answered = False
        try:
            async with open_watch(request) as call:
                async for message in call:
                    status = decode_status(message)
                    if not answered:
                        answered = True
                        backoff.reset()
                    if status == SERVING:
                        report(Health.SERVING, "SERVING")
                    else:
                        why = f"health check of {service!r}: {status_name(status)}"
                        report(Health.NOT_SERVING, why)
            why = "the health-check Watch call ended"
        except RpcError as exc:
            if exc.code == StatusCode.UNIMPLEMENTED:
                report(Health.DISABLED, "the backend has no health service (UNIMPLEMENTED)")
                return
            why = f"the health-check Watch call failed: {exc.code.name} {exc.details}"
        except ValueError as exc:
            why = f"a malformed health-check answer: {exc}"
        report(Health.FAILED, why)
        if not answered:
            await trio.sleep_until(start + delay)
        else:
            await trio.lowlevel.checkpoint()
