"""Every private h2/hpack/hyperframe name trio_h2t uses or overrides still exists, compatibly.

trio_h2t subclasses h2's connection and stream and reads a few private attributes
(``_h2state.py``, ``_hpack.py``). A new h2 release that renames one would break us
quietly; these tests fail first, naming it. ``.ci/run`` also runs the suite against
the newest h2 release.
"""

from __future__ import annotations

import inspect

import h2.config
import h2.connection
import h2.exceptions
import h2.frame_buffer
import h2.stream
import h2.windows
import hpack
import hpack.hpack
import hpack.huffman_table
import hpack.table
import pytest
from h2.errors import ErrorCodes
from hpack import Encoder

from trio_h2t._h2state import _Stream
from trio_h2t._hpack import CachingDecoder, HeaderListTooLarge

#: (class, private method, parameter names we rely on).
METHODS = [
    (h2.connection.H2Connection, "_receive_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_prepare_for_sending", ("self", "frames")),
    (h2.connection.H2Connection, "_begin_new_stream", ("self", "stream_id", "allowed_ids")),
    (h2.connection.H2Connection, "_stream_id_is_outbound", ("self", "stream_id")),
    (h2.connection.H2Connection, "_open_streams", ("self", "remainder")),
    (h2.connection.H2Connection, "_receive_headers_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_get_or_create_stream", ("self", "stream_id", "allowed_ids")),
    (h2.connection.H2Connection, "_receive_push_promise_frame", ("self", "frame")),
    (h2.connection.H2Connection, "_receive_goaway_frame", ("self", "frame")),
    (
        h2.connection.H2Connection,
        "_handle_data_on_closed_stream",
        ("self", "events", "exc", "frame"),
    ),
    (h2.connection.H2Connection, "_terminate_connection", ("self", "error_code")),
    (h2.connection.H2Connection, "_stream_closed_by", ("self", "stream_id")),
    (h2.connection.H2Connection, "_stream_is_closed_by_end", ("self", "stream_id")),
    (h2.stream.H2Stream, "_initialize_content_length", ("self", "headers")),
    (
        h2.stream.H2Stream,
        "_process_received_headers",
        ("self", "headers", "header_validation_flags", "header_encoding"),
    ),
    (h2.stream.H2Stream, "reset_stream", ("self", "error_code")),
    # _hpack.CachingDecoder reads blocks with its own loop, on hpack's pieces:
    (hpack.Decoder, "_update_encoding_context", ("self", "data")),
    (hpack.Decoder, "_assert_valid_table_size", ("self",)),
    (hpack.table.HeaderTable, "get_by_index", ("self", "index")),
    (hpack.table.HeaderTable, "add", ("self", "name", "value")),
    (hpack.hpack, "decode_integer", ("data", "prefix_bits")),
    (h2.connection, "_decode_headers", ("decoder", "encoded_header_block")),
    (hpack.huffman_table, "decode_huffman", ("huffman_string",)),
]


@pytest.mark.parametrize(("cls", "name", "params"), METHODS, ids=lambda v: str(v)[:40])
def test_private_method_exists_with_compatible_signature(
    cls: type, name: str, params: tuple[str, ...]
) -> None:
    """Each private h2/hpack function we call or override exists with the parameter names we use."""
    method = getattr(cls, name)
    assert tuple(inspect.signature(method).parameters) == params


def test_private_attributes_exist() -> None:
    """The private attributes we read or replace are still set by h2, hpack, hyperframe."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    for name in ("_frame_dispatch_table", "_closed_streams", "_data_to_send"):
        assert hasattr(conn, name), name
    assert hasattr(h2.frame_buffer.FrameBuffer(), "_data")
    assert hasattr(hpack.table.HeaderTable(), "_maxsize")
    assert hasattr(h2.exceptions.StreamClosedError(1), "_events")


def test_our_stream_sets_every_attribute_h2s_stream_sets() -> None:
    """_Stream sets each instance attribute of h2's H2Stream, state machine and window manager."""
    config = h2.config.H2Configuration(client_side=True)
    theirs: set[str] = set()
    theirs |= set(vars(h2.stream.H2Stream(1, config, 65_535, 65_535)))
    theirs |= set(vars(h2.stream.H2StreamStateMachine(1)))
    theirs |= set(vars(h2.windows.WindowManager(65_535)))
    # _Stream *is* its own state machine and inbound window manager (properties).
    theirs -= {"state_machine", "_inbound_window_manager"}
    ours = _Stream(1, config, 65_535, 65_535)
    missing = sorted(name for name in theirs if not hasattr(ours, name))
    assert not missing


def test_h2_wraps_the_decoders_oversize_error_keeping_its_cause() -> None:
    """h2's ``_decode_headers`` turns our HeaderListTooLarge into DenialOfServiceError
    (ENHANCE_YOUR_CALM) with it as ``__cause__``: what ``_h2state`` catches."""
    decoder = CachingDecoder()
    decoder.max_header_list_size = 100
    block = Encoder().encode([(b"x-big", b"v" * 200)])
    with pytest.raises(h2.exceptions.DenialOfServiceError) as info:
        h2.connection._decode_headers(decoder, block)
    assert isinstance(info.value.__cause__, HeaderListTooLarge)
    assert info.value.error_code == ErrorCodes.ENHANCE_YOUR_CALM
