"""Every private h2/hpack/hyperframe name trio_h2t uses or overrides still exists, compatibly.

trio_h2t subclasses h2's connection and stream and reads a few private attributes
(``_h2fixes.py``, the correctness layer; ``_h2fast.py``, the speed layer; ``_h2/hpack.py``).
A new h2 release that renames one would break us quietly; these tests fail first,
naming it, and a private name used in those modules but not pinned here fails too.
``.ci/run`` also runs the suite against the newest h2 release. The one private name
of trio's we use, the stdlib socket under trio's (``_sock``), is pinned here too.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.stream
import h2.windows
import hpack
import hpack.hpack
import hpack.huffman_table
import hpack.table
import pytest
import trio
from h2.errors import ErrorCodes
from hpack import Encoder
from hyperframe.exceptions import InvalidPaddingError
from hyperframe.frame import HeadersFrame

import trio_h2t
from trio_h2t._h2.hpack import CachingDecoder, HeaderListTooLarge, ReadOnDecoder
from trio_h2t._h2.streamstates import TRANSITIONS, StreamInput, StreamState
from trio_h2t._h2fast import FastConnection, FastStream, H2ReceiveWindow
from trio_h2t._h2fixes import FixedFrameBuffer
from trio_h2t._sockopts import CLOSED_ERRNOS, stdlib_socket

#: (class, private method, parameter names we rely on).
METHODS = [
    (h2.connection.H2Connection, "_receive_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_prepare_for_sending", ("self", "frames")),
    (h2.connection.H2Connection, "_begin_new_stream", ("self", "stream_id", "allowed_ids")),
    (h2.connection.H2Connection, "_stream_id_is_outbound", ("self", "stream_id")),
    (h2.connection.H2Connection, "_open_streams", ("self", "remainder")),
    (h2.connection.H2Connection, "_receive_headers_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_receive_goaway_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_get_or_create_stream", ("self", "stream_id", "allowed_ids")),
    (
        h2.connection.H2Connection,
        "_handle_data_on_closed_stream",
        ("self", "events", "exc", "frame"),
    ),
    (h2.connection.H2Connection, "_terminate_connection", ("self", "error_code")),
    (h2.connection.H2Connection, "_stream_closed_by", ("self", "stream_id")),
    (h2.connection.H2Connection, "_stream_is_closed_by_end", ("self", "stream_id")),
    (h2.connection.H2Connection, "_receive_data_frame", ("self", "frame")),
    # _h2fixes.frame_data looks a stream up as h2's send_data does:
    (h2.connection.H2Connection, "_get_stream_by_id", ("self", "stream_id")),
    (h2.connection.H2Connection, "_receive_priority_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_receive_alt_svc_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_receive_unknown_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_receive_rst_stream_frame", ("self", "frame")),
    (h2.stream.H2Stream, "_initialize_content_length", ("self", "headers")),
    (
        h2.stream.H2Stream,
        "_process_received_headers",
        ("self", "headers", "header_validation_flags", "header_encoding"),
    ),
    (h2.stream.H2Stream, "_build_hdr_validation_flags", ("self", "events")),
    # Public methods we override: our versions must keep accepting h2's arguments.
    (h2.connection.H2Connection, "receive_data", ("self", "data")),
    (
        h2.connection.H2Connection,
        "send_headers",
        (
            "self",
            "stream_id",
            "headers",
            "end_stream",
            "priority_weight",
            "priority_depends_on",
            "priority_exclusive",
        ),
    ),
    (h2.stream.H2Stream, "receive_headers", ("self", "headers", "end_stream", "header_encoding")),
    (h2.stream.H2Stream, "send_headers", ("self", "headers", "encoder", "end_stream")),
    (hpack.table.HeaderTable, "add", ("self", "name", "value")),
    (hpack.Encoder, "encode", ("self", "headers", "huffman")),
    (hpack.Decoder, "decode", ("self", "data", "raw")),
    (h2.stream.H2Stream, "reset_stream", ("self", "error_code")),
    # _h2.hpack.ReadOnDecoder reads blocks with its own loop, on hpack's pieces:
    (hpack.Decoder, "_update_encoding_context", ("self", "data")),
    (hpack.Decoder, "_assert_valid_table_size", ("self",)),
    (hpack.table.HeaderTable, "get_by_index", ("self", "index")),
    (hpack.hpack, "decode_integer", ("data", "prefix_bits")),
    (h2.connection, "_decode_headers", ("decoder", "encoded_header_block")),
    (hpack.huffman_table, "decode_huffman", ("huffman_string",)),
]

#: Private instance attributes of h2, hpack and hyperframe objects we read or replace.
ATTRIBUTES = {
    "_frame_dispatch_table",
    "_closed_streams",
    "_data_to_send",
    "_maxsize",
    "_events",
    "_expected_content_length",
    "_actual_content_length",
    "_authority",
    "_inbound_window_manager",
    "_inbound_flow_control_window_manager",
    "_normalize_inbound_headers",
    "_validate_inbound_headers",
}

#: h2's private events of its send path, which FastStream's state machine builds as
#: h2's does (``_h2fast._H2_EVENTS``).
SENT_EVENTS = {"_RequestSent", "_ResponseSent", "_TrailersSent", "_PushedRequestSent"}

#: Private names our layers introduce; none may collide with a name h2 or hpack defines.
OURS = {
    "_MAX_SLOTS",
    "_block_size",
    "_block",
    "_buf",
    "_check_first",
    "_check_preface",
    "_data_event",
    "_empty_continuations",
    "_end",
    "_inbound_data",
    "_record",
    "_preface",
    "_through_block",
    "_slack",
    "_start",
    "_wrap",
    "_count_block",
    "_cache",
    "_check_not_forgotten",
    "_code",
    "_first_checked",
    "_grow",
    "_header_list_too_large",
    "_mask",
    "_preface_checked",
    "_primed",
    "_prune_at",
    "_read_block",
    "_read_literal",
    "_replace",  # NamedTuple's, on the _h2.frames records
    "_slots",
    "_stream_class",
    "_trace_frames",
    "_validated",
}

_MODULES = ("_h2fixes.py", "_h2fast.py", "_h2/hpack.py", "_h2state.py")
_THEIR_CLASSES = (
    h2.connection.H2Connection,
    h2.stream.H2Stream,
    h2.stream.H2StreamStateMachine,
    h2.windows.WindowManager,
    hpack.table.HeaderTable,
    hpack.Encoder,
    hpack.Decoder,
)


def _private_names_in_our_layers() -> set[str]:
    """Every ``_name`` our h2 layers access as an attribute or define as a method."""
    names: set[str] = set()
    for module in _MODULES:
        tree = ast.parse((Path(trio_h2t.__file__).parent / module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        names.add(item.name)
                    elif isinstance(item, ast.Assign | ast.AnnAssign):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_every_private_name_our_layers_use_is_pinned_here() -> None:
    """Each private name in _h2fixes/_h2fast/_h2.hpack is pinned above (h2's) or listed as ours."""
    pinned = {name for _, name, _ in METHODS} | ATTRIBUTES | SENT_EVENTS | OURS
    assert sorted(_private_names_in_our_layers() - pinned) == []


def test_our_private_names_do_not_collide_with_h2s() -> None:
    """No private name our layers introduce is also defined by h2 or hpack (a silent override)."""
    clashes = sorted(n for n in OURS for cls in _THEIR_CLASSES if hasattr(cls, n))
    assert clashes == []


@pytest.mark.parametrize(("cls", "name", "params"), METHODS, ids=lambda v: str(v)[:40])
def test_private_method_exists_with_compatible_signature(
    cls: type, name: str, params: tuple[str, ...]
) -> None:
    """Each private h2 method we call or override exists with the parameter names we use."""
    method = getattr(cls, name)
    assert tuple(inspect.signature(method).parameters) == params


def test_private_attributes_exist() -> None:
    """The private attributes we read or replace are still set by h2, hpack, hyperframe."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    for name in (
        "_frame_dispatch_table",
        "_closed_streams",
        "_data_to_send",
        "_inbound_flow_control_window_manager",
    ):
        assert hasattr(conn, name), name
    assert hasattr(hpack.table.HeaderTable(), "_maxsize")
    assert hasattr(h2.exceptions.StreamClosedError(1), "_events")
    stream = h2.stream.H2Stream(1, h2.config.H2Configuration(), 65_535, 65_535)
    for name in (
        "_expected_content_length",
        "_actual_content_length",
        "_authority",
        "_inbound_window_manager",
    ):
        assert hasattr(stream, name), name


@pytest.mark.parametrize("name", sorted(SENT_EVENTS))
def test_private_sent_events_exist(name: str) -> None:
    """h2's private send-path events exist, build without arguments, and are header events."""
    event = getattr(h2.events, name)()
    assert isinstance(event, h2.events._HeadersSent)


@pytest.mark.parametrize("name", ["normalize_inbound_headers", "validate_inbound_headers"])
@pytest.mark.parametrize("value", [False, True])
def test_config_options_live_where_the_speed_layer_reads_them(name: str, value: bool) -> None:
    """h2's ``_BooleanConfigOption`` keeps each option as ``"_" + name`` (``FastStream._validated``
    reads it there), at construction and after a later assignment."""
    options: dict[str, Any] = {name: value}
    config = h2.config.H2Configuration(**options)
    assert getattr(config, "_" + name) is value
    setattr(config, name, not value)
    assert getattr(config, "_" + name) is (not value)


def test_send_data_is_a_no_op_transition_in_the_states_frame_data_skips() -> None:
    """``_h2fixes.frame_data`` skips the SEND_DATA transitions in the open states:
    h2's tables and ours must still keep the state there and run nothing."""
    conn_states = (
        h2.connection.ConnectionState.CLIENT_OPEN,
        h2.connection.ConnectionState.SERVER_OPEN,
    )
    table = h2.connection.H2ConnectionStateMachine._transitions
    for cs in conn_states:
        assert table[(cs, h2.connection.ConnectionInputs.SEND_DATA)] == (None, cs)
    for ss in (h2.stream.StreamState.OPEN, h2.stream.StreamState.HALF_CLOSED_REMOTE):
        assert h2.stream._transitions[(ss, h2.stream.StreamInputs.SEND_DATA)] == (None, ss)
        ours = StreamState(ss)  # FastStream's transitions: _h2/streamstates.py
        assert TRANSITIONS[(ours, StreamInput.SEND_DATA)] == (ours, None)


def test_our_stream_sets_every_attribute_h2s_stream_sets() -> None:
    """FastStream sets each instance attribute of h2's H2Stream and state machine, and
    the public ones of h2's window manager (its private ``_bytes_processed`` is used
    by ``WindowManager``'s own methods only, which ours replaces)."""
    config = h2.config.H2Configuration(client_side=True)
    theirs: set[str] = set()
    theirs |= set(vars(h2.stream.H2Stream(1, config, 65_535, 65_535)))
    theirs |= set(vars(h2.stream.H2StreamStateMachine(1)))
    theirs |= {n for n in vars(h2.windows.WindowManager(65_535)) if not n.startswith("_")}
    # FastStream *is* its own state machine and inbound window manager (properties).
    theirs -= {"state_machine", "_inbound_window_manager"}
    ours = FastStream(1, config, 65_535, 65_535)
    missing = sorted(name for name in theirs if not hasattr(ours, name))
    assert not missing


def _what_h2_uses_on(attribute: str) -> set[str]:
    """The names h2's stream and connection code reads, sets or calls on
    ``self.<attribute>`` (directly, or through a local it is assigned to)."""
    used: set[str] = set()
    for module in (h2.stream, h2.connection):
        tree = ast.parse(inspect.getsource(module))
        aliases: set[str] = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == attribute
            ):
                aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            inner = node.value
            if (isinstance(inner, ast.Attribute) and inner.attr == attribute) or (
                isinstance(inner, ast.Name) and inner.id in aliases
            ):
                used.add(node.attr)
    return used


@pytest.mark.parametrize(
    "attribute", ["_inbound_window_manager", "_inbound_flow_control_window_manager"]
)
def test_h2_asks_our_inbound_windows_only_what_they_answer(attribute: str) -> None:
    """h2's code uses its ``WindowManager`` (a stream's ``_inbound_window_manager``,
    the connection's ``_inbound_flow_control_window_manager``) through five names;
    ``FastStream`` and ``FastConnection`` put our ``_h2/windows.py`` ``ReceiveWindow``
    there (``H2ReceiveWindow``), which has each. An h2 that calls something new on it
    fails here."""
    used = _what_h2_uses_on(attribute)
    assert used, "h2 no longer keeps its window manager there: the scan found nothing"
    assert used <= {
        "window_consumed",
        "window_opened",
        "process_bytes",
        "current_window_size",
        "max_window_size",
    }
    config = h2.config.H2Configuration(client_side=True)
    for window in (
        FastStream(1, config, 65_535, 65_535)._inbound_window_manager,
        FastConnection(config)._inbound_flow_control_window_manager,
    ):
        assert isinstance(window, H2ReceiveWindow)
        missing = sorted(name for name in used if not hasattr(window, name))
        assert not missing


@pytest.mark.parametrize("decoder_class", [ReadOnDecoder, CachingDecoder])
def test_h2_wraps_the_decoders_oversize_error_keeping_its_cause(decoder_class: type) -> None:
    """h2's ``_decode_headers`` turns our HeaderListTooLarge into DenialOfServiceError
    (ENHANCE_YOUR_CALM) with it as ``__cause__``: what ``_h2fixes`` catches."""
    decoder = decoder_class()
    decoder.max_header_list_size = 100
    block = Encoder().encode([(b"x-big", b"v" * 200)])
    with pytest.raises(h2.exceptions.DenialOfServiceError) as info:
        h2.connection._decode_headers(decoder, block)
    assert isinstance(info.value.__cause__, HeaderListTooLarge)
    assert info.value.error_code == ErrorCodes.ENHANCE_YOUR_CALM


def test_hyperframe_still_gets_headers_padding_wrong() -> None:
    """hyperframe's ``HeadersFrame.parse_body`` refuses padding that leaves the field
    block fragment empty and accepts padding that runs into the priority fields,
    both against RFC 9113 §6.2: one of the differences between our codec
    (``_h2.frames``) and hyperframe that ``tests/test_h2_frames.py`` allows. If this
    fails, hyperframe was fixed and that allowance may go."""
    empty = HeadersFrame(1)
    empty.flags.add("PADDED")
    with pytest.raises(InvalidPaddingError):
        empty.parse_body(memoryview(b"\x03" + b"\x00" * 3))
    overlong = HeadersFrame(1)
    overlong.flags.add("PADDED")
    overlong.flags.add("PRIORITY")
    overlong.parse_body(memoryview(b"\x06" + b"\x00\x00\x00\x00\x0f" + b"\x00" * 3))
    assert overlong.data == b""


def test_the_frame_buffer_takes_the_padding_rule_from_the_raw_bytes() -> None:
    """A padded HEADERS whose padding takes all the rest reaches h2 as a frame with an
    empty fragment; padding one octet longer is h2's ProtocolError (PROTOCOL_ERROR)."""
    buffer = FixedFrameBuffer(server=True)
    buffer.max_frame_size = 16_384
    buffer.add_data(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    buffer.add_data(b"\x00\x00\x04\x01\x0d\x00\x00\x00\x01" + b"\x03" + b"\x00" * 3)
    frame = next(buffer)
    assert isinstance(frame, HeadersFrame)
    assert frame.data == b""
    assert set(frame.flags) == {"END_STREAM", "END_HEADERS", "PADDED"}
    buffer.add_data(b"\x00\x00\x04\x01\x0d\x00\x00\x00\x03" + b"\x04" + b"\x00" * 3)
    with pytest.raises(h2.exceptions.ProtocolError) as info:
        next(buffer)
    assert info.value.error_code == ErrorCodes.PROTOCOL_ERROR


async def test_trio_socket_still_wraps_a_stdlib_socket() -> None:
    """The reader and loopy call the stdlib socket under trio's (``_sockopts.stdlib_socket``,
    trio's private ``_sock``); without it they fall back to trio's slower wrappers, so
    a trio that moves it must fail here rather than only slow down."""
    a, b = trio.socket.socketpair()
    with a, b:
        raw = stdlib_socket(a)
        assert raw is not None
        assert raw.fileno() == a.fileno()
        assert not raw.getblocking()


def test_trio_socket_stream_closed_errnos_are_ours() -> None:
    """``_sockopts.stream_error`` maps an OSError to ClosedResourceError for the errnos
    ``trio.SocketStream`` does (its private ``_closed_stream_errnos``), so the direct
    socket path raises what trio's wrappers raise; a trio that changes the set must
    fail here."""
    from trio import _highlevel_socket

    assert _highlevel_socket._closed_stream_errnos == set(CLOSED_ERRNOS)


def test_h2_dispatches_altsvc_and_unknown_frames_to_our_overrides() -> None:
    """h2 binds its frame handlers per instance (``_frame_dispatch_table``), so our
    overrides of ``_receive_alt_svc_frame`` and ``_receive_unknown_frame`` are the
    ones called; an unknown type arrives as hyperframe's ``ExtensionFrame``, whose
    ``type`` tells PRIORITY_UPDATE (0x10) apart."""
    from hyperframe.frame import AltSvcFrame, ExtensionFrame

    from trio_h2t._h2fixes import FixedConnection, IgnoredFrameReceived

    conn = FixedConnection(h2.config.H2Configuration(client_side=False))
    table = conn._frame_dispatch_table
    assert table[AltSvcFrame] == conn._receive_alt_svc_frame
    assert table[ExtensionFrame] == conn._receive_unknown_frame
    frames, events = conn._receive_unknown_frame(ExtensionFrame(0x10, 0, 0, b"\0\0\0\1u=1"))
    assert frames == []
    [event] = events
    assert isinstance(event, IgnoredFrameReceived)
    assert event.kind == "priority_updates"


def test_data_received_has_the_attributes_the_speed_layer_sets() -> None:
    # FastConnection._data_event builds h2's DataReceived without its
    # __init__ (a call per DATA frame) and sets these four attributes itself: an h2
    # whose event gained a field, or a __post_init__, must fail here first.
    event = h2.events.DataReceived(stream_id=1)
    assert sorted(vars(event)) == ["data", "flow_controlled_length", "stream_ended", "stream_id"]
    assert not hasattr(h2.events.DataReceived, "__post_init__")
    assert not hasattr(h2.events.DataReceived, "__slots__")


def test_our_inbound_windows_names_do_not_collide_with_h2s_stream() -> None:
    """``FastStream`` inherits our ``ReceiveWindow`` (``_h2/windows.py``) beside h2's
    ``H2Stream``: apart from the names of h2's ``WindowManager`` it stands in for, none
    of its names may be one h2's stream (class or instance) defines, which it would
    silently shadow or be shadowed by."""
    from trio_h2t._h2.windows import ReceiveWindow

    stream = h2.stream.H2Stream(1, h2.config.H2Configuration(), 65_535, 65_535)
    window_api = set(dir(h2.windows.WindowManager(65_535)))
    ours = {n for n in dir(ReceiveWindow) if not n.startswith("__")} - window_api
    assert ours, "the scan found none of ReceiveWindow's own names"
    clashes = sorted(n for n in ours if hasattr(h2.stream.H2Stream, n) or n in vars(stream))
    assert clashes == []
