"""Each correctness patch of ``_h2fixes`` holds on its own, and plain h2 behaves otherwise.

One scenario per patch (numbered as in ``trio_h2t/_h2fixes.py``): raw frames from a
peer go into one side, and the outcome (the connection error h2 raised, or the
events and the RST_STREAM frames it queued) is compared. The scenario runs on the
correctness layer alone (``speed_layer=False``), on both layers (what trio_h2t uses),
and on a plain ``h2.connection.H2Connection`` with the same configuration: the two
layers give the RFC's outcome, and plain h2 a different one, so each patch is a
change some test sees. ``tests/conformance`` also runs against a server with the
speed layer off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.frame_buffer
import h2.settings
import hpack
import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import (
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
)

from trio_h2t._h2fast import FastConnection
from trio_h2t._h2fixes import FixedConnection
from trio_h2t._h2state import MAX_INFORMATIONAL, make_h2_state

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
REQUEST = [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")]
POST = [(b":method", b"POST"), *REQUEST[1:]]


def build(layer: str, *, client_side: bool, max_concurrent_streams: int = 100) -> Any:
    """One side: ``fixes`` (correctness layer only), ``fast`` (both), or ``h2`` (plain)."""
    if layer == "h2":
        config = h2.config.H2Configuration(
            client_side=client_side,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            normalize_inbound_headers=False,
        )
        conn = h2.connection.H2Connection(config)
        conn.local_settings = h2.settings.Settings(
            client=client_side,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_concurrent_streams
            },
        )
    else:
        conn = make_h2_state(
            client_side=client_side,
            max_concurrent_streams=max_concurrent_streams,
            initial_window_size=65_535,
            max_header_list_size=65_536,
            speed_layer=layer == "fast",
        )
        assert type(conn) is (FastConnection if layer == "fast" else FixedConnection)
    conn.initiate_connection()
    conn.data_to_send()
    return conn


class Peer:
    """The other side, as raw frames: its own HPACK encoder, frames as bytes."""

    def __init__(self) -> None:
        self.encoder = hpack.Encoder()

    def headers(self, stream_id: int, headers: list[tuple[bytes, bytes]], *flags: str) -> bytes:
        frame = HeadersFrame(stream_id, self.encoder.encode(headers))
        frame.flags.add("END_HEADERS")
        for flag in flags:
            frame.flags.add(flag)
        return bytes(frame.serialize())


def frame(f: Frame, *flags: str) -> bytes:
    for flag in flags:
        f.flags.add(flag)
    return bytes(f.serialize())


SETTINGS = frame(SettingsFrame(0))
SETTINGS_ACK = frame(SettingsFrame(0), "ACK")


def outcome(conn: Any, *chunks: bytes) -> str:
    """Feed ``chunks``; say what happened: the connection error, or events and RSTs."""
    seen: list[str] = []
    try:
        for chunk in chunks:
            for ev in conn.receive_data(chunk):
                seen.append(type(ev).__name__)
    except h2.exceptions.ProtocolError as exc:
        return f"connection error {ErrorCodes(exc.error_code).name}"
    sent = conn.data_to_send()
    buf = h2.frame_buffer.FrameBuffer(server=False)
    buf.max_frame_size = 2**24 - 1
    buf.add_data(sent)
    for f in buf:
        if isinstance(f, RstStreamFrame):
            seen.append(f"RST({f.stream_id}, {ErrorCodes(f.error_code).name})")
        elif isinstance(f, GoAwayFrame):
            seen.append(f"GOAWAY({ErrorCodes(f.error_code).name})")
    return " ".join(x for x in seen if x not in ("RemoteSettingsChanged", "SettingsAcknowledged"))


Scenario = Callable[[str], str]
#: name -> (scenario, the RFC's outcome).
SCENARIOS: dict[str, tuple[Scenario, str]] = {}


def scenario(name: str, expected: str) -> Callable[[Scenario], Scenario]:
    """Register a scenario and the outcome RFC 9113 asks for."""

    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = (fn, expected)
        return fn

    return register


def serving(layer: str, *, max_concurrent_streams: int = 100) -> tuple[Any, Peer]:
    """A server side after the client's preface and SETTINGS, and that client."""
    server = build(layer, client_side=False, max_concurrent_streams=max_concurrent_streams)
    server.receive_data(PREFACE + SETTINGS + SETTINGS_ACK)
    server.data_to_send()
    return server, Peer()


def requesting(layer: str, request: list[tuple[bytes, bytes]] = REQUEST) -> tuple[Any, Peer]:
    """A client side that sent ``request`` on stream 1 and saw the server's SETTINGS."""
    client = build(layer, client_side=True)
    client.receive_data(SETTINGS + SETTINGS_ACK)
    client.send_headers(1, request, end_stream=True)
    client.data_to_send()
    return client, Peer()


# -- 1. GOAWAY stays ours ----------------------------------------------------------


@scenario("1 goaway leaves the connection open", "GoAwayReceived then a stream opens")
def _goaway(layer: str) -> str:
    client, _ = requesting(layer)
    goaway = GoAwayFrame(0)
    goaway.last_stream_id = 1
    said = outcome(client, frame(goaway))
    try:
        client.send_headers(3, REQUEST, end_stream=True)
    except h2.exceptions.ProtocolError:
        return f"{said} then closed"
    return f"{said} then a stream opens"


# -- 2. stream limits are ours ----------------------------------------------------


@scenario("2 streams past our limit are admitted", "RequestReceived RequestReceived")
def _limit(layer: str) -> str:
    server, peer = serving(layer, max_concurrent_streams=1)
    return outcome(server, peer.headers(1, REQUEST) + peer.headers(3, REQUEST))


# -- 3. events survive a protocol error --------------------------------------------


@scenario("3 events before a bad frame are kept", "PingReceived")
def _events_kept(layer: str) -> str:
    server, _ = serving(layer)
    bad = b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x"  # DATA on stream 0
    with pytest.raises(h2.exceptions.ProtocolError):
        server.receive_data(frame(PingFrame(0, b"12345678")) + bad)
    kept = getattr(server, "events_before_error", [])
    return " ".join(type(e).__name__ for e in kept)


# -- 4. RFC details h2 misses --------------------------------------------------------


@scenario("4 preface must start with SETTINGS (§3.4)", "connection error PROTOCOL_ERROR")
def _preface(layer: str) -> str:
    server = build(layer, client_side=False)
    return outcome(server, PREFACE + frame(PingFrame(0, b"12345678")) + SETTINGS)


@scenario("4 HPACK failure is COMPRESSION_ERROR (§4.3)", "connection error COMPRESSION_ERROR")
def _hpack(layer: str) -> str:
    server, _ = serving(layer)
    bad = HeadersFrame(1, b"\xff\xff\xff\xff\xff\xff")  # an index far past any table
    return outcome(server, frame(bad, "END_HEADERS"))


@scenario("4 DATA after END_STREAM is STREAM_CLOSED (§5.1)", "connection error STREAM_CLOSED")
def _data_after_end(layer: str) -> str:
    server, peer = serving(layer)
    server.receive_data(peer.headers(1, REQUEST, "END_STREAM"))
    server.send_headers(1, [(b":status", b"200")], end_stream=True)  # now closed
    server.data_to_send()
    return outcome(server, frame(DataFrame(1, b"late")))


@scenario("4 frames on a stream we reset are ignored (§5.1)", "")
def _after_our_reset(layer: str) -> str:
    server, peer = serving(layer)
    server.receive_data(peer.headers(1, POST))
    server.reset_stream(1, ErrorCodes.CANCEL)
    server.data_to_send()
    return outcome(server, frame(DataFrame(1, b"in flight")))


def push_from_client(layer: str) -> str:
    """A client's PUSH_PROMISE with an undecodable block, on stream 1."""
    server, peer = serving(layer)
    server.receive_data(peer.headers(1, REQUEST))
    push = PushPromiseFrame(1, promised_stream_id=2, data=b"\xff\xff\xff\xff\xff\xff")
    return outcome(server, frame(push, "END_HEADERS"))


@scenario(
    "4 SETTINGS ACK with payload is FRAME_SIZE_ERROR (§6.5)", "connection error FRAME_SIZE_ERROR"
)
def _settings_ack_payload(layer: str) -> str:
    server, _ = serving(layer)
    return outcome(server, b"\x00\x00\x06\x04\x01\x00\x00\x00\x00" + b"\x00\x03\x00\x00\x00\x64")


@scenario("4 RST_STREAM on an idle stream (§6.4)", "connection error PROTOCOL_ERROR")
def _rst_idle(layer: str) -> str:
    # Found by trio-h2t check (property idle-stream): h2 ignores it.
    server, peer = serving(layer)
    return outcome(server, peer.headers(1, REQUEST, "END_STREAM"), frame(RstStreamFrame(3)))


@scenario("4 WINDOW_UPDATE reserved bit is ignored (§6.9)", "WindowUpdated")
def _window_update_reserved(layer: str) -> str:
    server, _ = serving(layer)
    return outcome(server, b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + b"\x80\x00\x00\x01")


@scenario("4 oversized frame refused from its header (§4.2)", "connection error FRAME_SIZE_ERROR")
def _oversized(layer: str) -> str:
    server, _ = serving(layer)
    header = (20_000).to_bytes(3, "big") + b"\x00\x00\x00\x00\x00\x01"
    return outcome(server, header + b"x" * 100)  # most of the payload never comes


@scenario(
    "4 a client refuses a non-HTTP/2 server at once (§3.4)", "connection error PROTOCOL_ERROR"
)
def _not_http2(layer: str) -> str:
    client = build(layer, client_side=True)
    return outcome(client, b"HTTP/1.1 400 Bad Request\r\n\r\n")


# -- 5. a malformed message is a stream error -----------------------------------------


@scenario("5 malformed request headers reset the stream", "StreamReset RST(1, PROTOCOL_ERROR)")
def _malformed_headers(layer: str) -> str:
    server, peer = serving(layer)
    return outcome(server, peer.headers(1, [*REQUEST, (b"Upper", b"x")]))


@scenario("5 an invalid content-length resets the stream", "StreamReset RST(1, PROTOCOL_ERROR)")
def _bad_content_length(layer: str) -> str:
    server, peer = serving(layer)
    return outcome(server, peer.headers(1, [*POST, (b"content-length", b"abc")]))


@scenario("5 a body over content-length resets the stream", "StreamReset RST(1, PROTOCOL_ERROR)")
def _body_over(layer: str) -> str:
    server, peer = serving(layer)
    server.receive_data(peer.headers(1, [*POST, (b"content-length", b"3")]))
    return outcome(server, frame(DataFrame(1, b"toolong")))


@scenario("5 a body short at END_STREAM resets the stream", "StreamReset RST(1, PROTOCOL_ERROR)")
def _body_short(layer: str) -> str:
    server, peer = serving(layer)
    server.receive_data(peer.headers(1, [*POST, (b"content-length", b"9")]))
    return outcome(server, frame(DataFrame(1, b"short"), "END_STREAM"))


@scenario("5 HEADERS ending short of content-length reset", "StreamReset RST(1, PROTOCOL_ERROR)")
def _headers_end_short(layer: str) -> str:
    server, peer = serving(layer)
    return outcome(server, peer.headers(1, [*POST, (b"content-length", b"5")], "END_STREAM"))


@scenario("5 trailers keep the content-length to match", "StreamReset RST(1, PROTOCOL_ERROR)")
def _trailers_short(layer: str) -> str:
    server, peer = serving(layer)
    server.receive_data(peer.headers(1, [*POST, (b"content-length", b"10")]))
    server.receive_data(frame(DataFrame(1, b"half!")))
    return outcome(server, peer.headers(1, [(b"x-trailer", b"t")], "END_STREAM"))


@scenario("5 a body on a HEAD response resets the stream", "StreamReset RST(1, PROTOCOL_ERROR)")
def _head_body(layer: str) -> str:
    client, peer = requesting(layer, [(b":method", b"HEAD"), *REQUEST[1:]])
    client.receive_data(peer.headers(1, [(b":status", b"200"), (b"content-length", b"5")]))
    return outcome(client, frame(DataFrame(1, b"body!"), "END_STREAM"))


def _bodiless_status(layer: str, status: bytes) -> str:
    client, peer = requesting(layer)
    client.receive_data(peer.headers(1, [(b":status", status), (b"content-length", b"5")]))
    return outcome(client, frame(DataFrame(1, b"body!"), "END_STREAM"))


scenario("5 a body on a 204 resets the stream", "StreamReset RST(1, PROTOCOL_ERROR)")(
    lambda layer: _bodiless_status(layer, b"204")
)
scenario("5 a body on a 304 resets the stream", "StreamReset RST(1, PROTOCOL_ERROR)")(
    lambda layer: _bodiless_status(layer, b"304")
)


@scenario("5 request trailers keep HEAD for the response", "StreamReset RST(1, PROTOCOL_ERROR)")
def _head_trailers(layer: str) -> str:
    client = build(layer, client_side=True)
    client.receive_data(SETTINGS + SETTINGS_ACK)
    client.send_headers(1, [(b":method", b"HEAD"), *REQUEST[1:]])
    client.send_headers(1, [(b"x-trailer", b"t")], end_stream=True)
    client.data_to_send()
    peer = Peer()
    client.receive_data(peer.headers(1, [(b":status", b"200"), (b"content-length", b"5")]))
    return outcome(client, frame(DataFrame(1, b"body!"), "END_STREAM"))


@scenario(
    "4 HEADERS on an even stream a client never saw (§5.1.1)", "connection error PROTOCOL_ERROR"
)
def _even_stream(layer: str) -> str:
    client, peer = requesting(layer)
    return outcome(client, peer.headers(2, REQUEST, "END_STREAM"))  # h2: a request


@scenario(
    "5 a malformed block ending a half-closed stream resets it",
    "StreamReset RST(1, PROTOCOL_ERROR)",
)
def _malformed_end(layer: str) -> str:
    client, peer = requesting(layer)  # our side ended with the request
    return outcome(client, peer.headers(1, [(b":status", b"200"), (b"Upper", b"x")], "END_STREAM"))


#: Over the 65,536-byte list limit ``build`` sets, in one frame: the field enters
#: the peer's dynamic table once, then each copy is a one-byte reference.
BIG_LIST = [(b"x-big", b"v" * 4_000)] * 20


@scenario("5 a request header list over our limit gets 431", "RST(1, NO_ERROR)")
def _header_list_too_large(layer: str) -> str:
    server, peer = serving(layer)
    return outcome(server, peer.headers(1, [*POST, *BIG_LIST]))


@scenario("5 a response header list over our limit resets", "StreamReset RST(1, ENHANCE_YOUR_CALM)")
def _response_list_too_large(layer: str) -> str:
    client, peer = requesting(layer)
    return outcome(client, peer.headers(1, [(b":status", b"200"), *BIG_LIST]))


@scenario("5 too many 1xx responses reset the stream", "StreamReset RST(1, ENHANCE_YOUR_CALM)")
def _too_many_informational(layer: str) -> str:
    client, peer = requesting(layer)
    hint = [(b":status", b"103"), (b"link", b"</a>; rel=preload")]
    client.receive_data(b"".join(peer.headers(1, hint) for _ in range(MAX_INFORMATIONAL)))
    return outcome(client, peer.headers(1, hint))


@scenario("5 a 1xx crossing our RST_STREAM is ignored (§5.4.2)", "")
def _informational_after_our_reset(layer: str) -> str:
    # Found by test_fault_confinement's property test: h2 has no transition for a
    # 1xx on a closed stream, and raised ProtocolError (the whole connection).
    client, peer = requesting(layer)
    client.reset_stream(1, ErrorCodes.CANCEL)
    client.data_to_send()
    return outcome(client, peer.headers(1, [(b":status", b"103"), (b"link", b"</a>")]))


@pytest.mark.parametrize("layer", ["fixes", "fast"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_patch_holds_on_each_layer(name: str, layer: str) -> None:
    """Each correctness patch gives the RFC's outcome with and without the speed layer."""
    run, expected = SCENARIOS[name]
    assert run(layer) == expected


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_outcome_differs_without_the_patch(name: str) -> None:
    """Plain h2, configured alike, does something else: each patch changes behaviour."""
    run, expected = SCENARIOS[name]
    assert run("h2") != expected


@pytest.mark.parametrize("layer", ["fixes", "fast", "h2"])
def test_push_promise_from_a_client_needs_no_patch(layer: str) -> None:
    """RFC 9113 §8.4: h2 itself refuses a client's PUSH_PROMISE before decoding it (a
    server's SETTINGS_ENABLE_PUSH is 0 in h2's ``Settings``), so no layer overrides it."""
    assert push_from_client(layer) == "connection error PROTOCOL_ERROR"
