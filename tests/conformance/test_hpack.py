"""RFC 7541 (HPACK) decoding errors and state: h2spec's ``hpack`` group.

RFC 9113 §4.3: a decoding error in a field block MUST be treated as a connection
error COMPRESSION_ERROR. Each invalid representation is appended to (or put in front
of) a valid request block, as h2spec does. The h2spec id is in each docstring; cases
marked "beyond h2spec" check further MUSTs of RFC 7541.
"""

from __future__ import annotations

from collections.abc import Iterable

from hpack import HeaderTuple
from hyperframe.frame import SettingsFrame

from .harness import ErrorCode, H2Client, Setting, request_headers


def send_block(conn: H2Client, block: bytes) -> None:
    conn.send_headers(1, block)


def common_block(conn: H2Client) -> bytes:
    return conn.encode_headers(request_headers())


def expect_compression_error(conn: H2Client) -> None:
    conn.expect_connection_error(ErrorCode.COMPRESSION_ERROR)


################################################################
# §2.3 Indexing tables (h2spec hpack/2.3.3)
################################################################


def test_2_3_3_indexed_field_out_of_range(conn: H2Client) -> None:
    """RFC 7541 §2.3.3: an index beyond both tables (126, with an almost empty
    dynamic table) MUST be a decoding error (h2spec hpack/2.3.3/1)."""
    send_block(conn, common_block(conn) + b"\xfe")
    expect_compression_error(conn)


def test_2_3_3_literal_name_index_out_of_range(conn: H2Client) -> None:
    """RFC 7541 §2.3.3: a literal whose name index is beyond both tables (70, with an
    empty dynamic table) is a decoding error (beyond h2spec)."""
    send_block(conn, b"\x7f\x07\x02ok")  # literal with indexing, name index 63 + 7
    expect_compression_error(conn)


def test_2_3_3_first_index_past_dynamic_table(conn: H2Client) -> None:
    """RFC 7541 §2.3.3: with one dynamic entry (62) the index 63 is out of range: a
    decoding error (beyond h2spec)."""
    block = b"\x82\x86\x84" + b"\x41\x09127.0.0.1"  # GET http / , :authority added as 62
    send_block(conn, block + b"\xbf")  # indexed 63
    expect_compression_error(conn)


def test_2_3_2_dynamic_table_entry_resolves(conn: H2Client) -> None:
    """RFC 7541 §2.3.2: an entry added by the client (index 62) resolves in the next
    block (beyond h2spec)."""
    conn.send_headers(1, b"\x82\x86\x84" + b"\x41\x09127.0.0.1")
    assert conn.read_response(1).status == 200
    conn.send_headers(3, b"\x82\x86\x84\xbe")  # :authority from index 62
    assert conn.read_response(3).status == 200


################################################################
# §4 Dynamic table management (h2spec hpack/4.2)
################################################################


def test_4_2_table_size_update_at_end_of_block(conn: H2Client) -> None:
    """RFC 7541 §4.2: a dynamic table size update MUST come at the start of a block;
    one at the end is a decoding error (h2spec hpack/4.2/1)."""
    send_block(conn, common_block(conn) + b"\x21")
    expect_compression_error(conn)


def test_4_2_table_size_update_in_middle_of_block(conn: H2Client) -> None:
    """RFC 7541 §4.2: a size update after the first field is a decoding error, even
    with fields after it (beyond h2spec)."""
    send_block(conn, b"\x82\x20\x86\x84\x01\x09127.0.0.1")
    expect_compression_error(conn)


################################################################
# §5 Primitive type representations (h2spec hpack/5.2)
################################################################


def test_5_1_integer_overflow(conn: H2Client) -> None:
    """RFC 7541 §5.1: an integer beyond the decoder's limits (an index of about 2^70)
    MUST be a decoding error (beyond h2spec)."""
    send_block(conn, common_block(conn) + b"\xff" + b"\xff" * 10 + b"\x7f")
    expect_compression_error(conn)


def test_5_1_truncated_integer(conn: H2Client) -> None:
    """RFC 7541 §5.1: a block ending inside a multi-byte integer is a decoding error
    (beyond h2spec)."""
    send_block(conn, common_block(conn) + b"\xff\x80")
    expect_compression_error(conn)


def test_5_2_truncated_string(conn: H2Client) -> None:
    """RFC 7541 §5.2: a string literal longer than the rest of the block is a decoding
    error (beyond h2spec)."""
    send_block(conn, common_block(conn) + b"\x00\x06x-test\x0aonly4")
    expect_compression_error(conn)


def test_5_2_huffman_padding_longer_than_7_bits(conn: H2Client) -> None:
    """RFC 7541 §5.2: Huffman padding strictly longer than 7 bits MUST be a decoding
    error (h2spec hpack/5.2/1)."""
    send_block(conn, common_block(conn) + b"\x00\x85\xf2\xb2\x4a\x84\xff\x84\x49\x50\x9f\xff")
    expect_compression_error(conn)


def test_5_2_huffman_padding_not_eos_prefix(conn: H2Client) -> None:
    """RFC 7541 §5.2: Huffman padding that is not a prefix of EOS (zero bits) MUST be a
    decoding error (h2spec hpack/5.2/2)."""
    send_block(conn, common_block(conn) + b"\x00\x85\xf2\xb2\x4a\x84\xff\x83\x49\x50\x90")
    expect_compression_error(conn)


def test_5_2_huffman_string_containing_eos(conn: H2Client) -> None:
    """RFC 7541 §5.2: a Huffman string containing the EOS symbol MUST be a decoding
    error (h2spec hpack/5.2/3)."""
    send_block(conn, common_block(conn) + b"\x00\x85\xf2\xb2\x4a\x87\xff\xff\xff\xfd\x25\x42\x7f")
    expect_compression_error(conn)


################################################################
# §6 Binary format (h2spec hpack/6.1, 6.3)
################################################################


def test_6_1_indexed_field_with_index_0(conn: H2Client) -> None:
    """RFC 7541 §6.1: index 0 in an indexed field representation MUST be a decoding
    error (h2spec hpack/6.1/1)."""
    send_block(conn, common_block(conn) + b"\x80")
    expect_compression_error(conn)


def test_6_3_table_size_update_above_settings(conn: H2Client) -> None:
    """RFC 7541 §6.3: a size update above the SETTINGS_HEADER_TABLE_SIZE limit (4096
    + 1) MUST be a decoding error (h2spec hpack/6.3/1)."""
    limit = conn.server_settings.get(Setting.HEADER_TABLE_SIZE, 4096)
    assert limit == 4096, "the update below encodes 4097"
    send_block(conn, b"\x3f\xe2\x1f" + common_block(conn))
    expect_compression_error(conn)


################################################################
# State the server keeps (beyond h2spec)
################################################################


def test_hpack_dynamic_table_is_used_across_requests(conn: H2Client) -> None:
    """RFC 7541 §2.3.2: entries the client adds to the dynamic table are used by the
    server's decoder for later blocks (requests 2 and 3 are mostly indexed)."""
    for sid in (1, 3, 5):
        conn.send_headers(sid, [*request_headers(), ("x-custom", "same value every time")])
        assert conn.read_response(sid).status == 200
    assert len(conn.encode_headers(request_headers())) < 8  # all indexed by now


def test_hpack_server_signals_smaller_table_size(conn: H2Client) -> None:
    """RFC 7541 §4.2: after the client lowers SETTINGS_HEADER_TABLE_SIZE to 0, the
    server's next header block starts with a dynamic table size update to 0."""
    conn.send(SettingsFrame(0, {Setting.HEADER_TABLE_SIZE: 0}))
    conn.expect_settings_ack()
    conn.decoder.max_allowed_table_size = 0
    raw_blocks: list[bytes] = []
    original = conn.decoder.decode

    def spy(data: bytes, raw: bool = False) -> Iterable[HeaderTuple]:
        raw_blocks.append(bytes(data))
        return original(data, raw=raw)

    conn.decoder.decode = spy  # type: ignore[method-assign]
    conn.send_request(1)
    conn.read_response(1)
    assert raw_blocks, "no response header block"
    assert raw_blocks[0][:1] == b"\x20", (
        f"block does not start with a size update: {raw_blocks[0]!r}"
    )
