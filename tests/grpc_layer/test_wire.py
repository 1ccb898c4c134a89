"""The sans-IO wire pieces of trio_h2t.grpc, and its import discipline."""

from __future__ import annotations

import ast
import base64
import gzip
import pickle
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from trio_h2t import grpc
from trio_h2t.grpc import _framing, _metadata, _status

GRPC_DIR = Path(grpc.__file__).parent
SANS_IO = ["_codec.py", "_framing.py", "_metadata.py", "_status.py"]


# ---------------------------------------------------------------------- imports


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, names, level) for every import statement of ``path``."""
    found: list[tuple[str, list[str], int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, [], 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", [a.name for a in node.names], node.level))
    return found


#: The one private transport module the gRPC layer may import, an explicit exception:
#: ``trio_h2t/_shared.py`` holds plain helpers (``AsyncWithOnly``,
#: ``NoPublicConstructor``, the exception-group unwrapping, the missing-extra message)
#: written once for both layers; it imports only the standard library and holds no
#: transport state (checked below), so the layer still sees no transport internals.
SHARED = frozenset({"trio_h2t._shared"})


def test_the_shared_module_is_dependency_free() -> None:
    """trio_h2t/_shared.py imports only the standard library (no trio_h2t, no trio)."""
    path = GRPC_DIR.parent / "_shared.py"
    for module, _names, level in _imports(path):
        assert level == 0, f"_shared.py: relative import {module}"
        top = module.split(".")[0]
        assert top in sys.stdlib_module_names, f"_shared.py imports {module}"


def test_grpc_layer_imports_only_public_transport_names() -> None:
    """No module of trio_h2t/grpc imports a private trio_h2t module or name."""
    files = sorted(GRPC_DIR.glob("*.py"))
    assert len(files) >= 6
    for path in files:
        for module, names, level in _imports(path):
            if level == 1:
                continue  # the gRPC layer's own modules (from ._x import ...)
            assert level == 0, f"{path.name}: relative import beyond trio_h2t.grpc"
            if module in SHARED:
                continue  # the one allowed private module: see SHARED
            if module == "trio_h2t" or module.startswith("trio_h2t."):
                parts = module.split(".")
                assert not any(p.startswith("_") for p in parts), f"{path.name}: {module}"
                assert all(not n.startswith("_") for n in names), f"{path.name}: {names}"
            assert module.split(".")[0] != "h2", f"{path.name}: {module}"


#: Expressions that hold a transport object in trio_h2t/grpc (an H2Stream, a
#: ClientConnection, a Request): no private attribute may be read through them.
TRANSPORT_HOLDERS = {"stream", "self._stream", "self._conn", "conn", "request", "trio_h2t"}


def test_grpc_layer_reads_no_private_transport_attribute() -> None:
    """No ``stream._x`` / ``self._conn._x`` / ``trio_h2t._x`` in trio_h2t/grpc."""
    for path in sorted(GRPC_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                holder = ast.unparse(node.value)
                if node.attr.startswith("__") and node.attr.endswith("__"):
                    continue  # dunders (__version__, __anext__...) are public protocol
                assert holder not in TRANSPORT_HOLDERS, f"{path.name}: {holder}.{node.attr}"


def test_sans_io_modules_do_not_import_trio() -> None:
    """The wire modules use neither trio nor the transport, nor the task layer."""
    for name in SANS_IO:
        for module, _names, level in _imports(GRPC_DIR / name):
            assert not module.startswith(("trio", "trio_h2t")), f"{name}: {module}"
            if level == 1:
                assert module not in ("_client", "_server"), f"{name}: {module}"


# ---------------------------------------------------------------------- framing


def _frames(messages: list[bytes]) -> bytes:
    return b"".join(grpc.encode_message(m) for m in messages)


@given(
    st.lists(st.binary(max_size=300), max_size=8),
    st.lists(st.integers(min_value=1, max_value=64), max_size=40),
)
def test_decoder_reassembles_any_split(messages: list[bytes], cuts: list[int]) -> None:
    """Messages come out whole and in order however the bytes are split into chunks."""
    wire = _frames(messages)
    decoder = grpc.MessageDecoder(buffer_reuse=False)
    out: list[bytes] = []
    pos = 0
    for cut in cuts:
        out.extend(payload for _, payload in decoder.feed(wire[pos : pos + cut]))
        pos += cut
    out.extend(payload for _, payload in decoder.feed(wire[pos:]))
    assert out == messages
    assert not decoder.pending


@given(
    st.lists(st.binary(max_size=300) | st.binary(min_size=1000, max_size=5000), max_size=6),
    st.lists(st.integers(min_value=1, max_value=3000), max_size=40),
)
def test_reusing_decoder_reassembles_any_split(messages: list[bytes], cuts: list[int]) -> None:
    """With buffer reuse (small and >= 1 KiB bodies, whole or in pieces) the same
    messages come out, each a fresh bytes, even though the caller overwrites its
    chunk buffer after every feed."""
    wire = _frames(messages)
    decoder = grpc.MessageDecoder()
    assert decoder.buffer_reuse
    out: list[bytes] = []
    pos = 0
    chunk = bytearray()
    for cut in [*cuts, len(wire)]:
        chunk[:] = wire[pos : pos + cut]
        got = decoder.feed(chunk)
        chunk[:] = b"\xff" * len(chunk)  # the caller reuses its buffer
        for _, payload in got:
            assert type(payload) is bytes
        out.extend(payload for _, payload in got)
        pos += cut
    assert out == messages
    assert not decoder.pending


def test_reusing_decoder_keeps_one_buffer_and_hands_out_copies() -> None:
    """Large messages in pieces share the decoder's kept buffer, never the payloads."""
    decoder = grpc.MessageDecoder()
    first, second = b"a" * 4000, b"b" * 3000
    wire = _frames([first, second])
    got = [p for i in range(0, len(wire), 700) for _, p in decoder.feed(wire[i : i + 700])]
    assert got == [first, second]  # the second body overwrote the kept buffer, not ``first``
    assert len(decoder._body) == 4000  # sized once, to the largest


def test_decoder_several_messages_in_one_chunk_and_empty_messages() -> None:
    """One chunk with three messages (one empty) yields all three, flags kept."""
    wire = _frames([b"a", b""]) + grpc.encode_message(b"zz", compressed=True)
    assert grpc.MessageDecoder().feed(wire) == [(False, b"a"), (False, b""), (True, b"zz")]


def test_decoder_reports_a_partial_message() -> None:
    """``pending`` is true after part of a prefix, and after a prefix without its body."""
    decoder = grpc.MessageDecoder()
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.pending
    assert decoder.feed(b"\x00\x00\x03ab") == []
    assert decoder.pending
    assert decoder.feed(b"c") == [(False, b"abc")]
    assert not decoder.pending


def test_receive_limit_is_checked_on_the_prefix() -> None:
    """A prefix over the limit raises RESOURCE_EXHAUSTED before any body byte arrives."""
    decoder = grpc.MessageDecoder(max_message_size=10)
    assert decoder.feed(grpc.encode_message(b"x" * 10)) == [(False, b"x" * 10)]
    with pytest.raises(grpc.RpcError) as info:
        decoder.feed(b"\x00" + (11).to_bytes(4, "big"))  # the prefix alone
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_decoder_whole_message_chunk_comes_out_as_bytes() -> None:
    """A chunk that is exactly one message (the small-call case) gives its body as bytes;
    over the limit or with a bad flag it still raises."""
    wire = grpc.encode_message(b"hello")
    out = grpc.MessageDecoder().feed(wire)
    assert out == [(False, b"hello")]
    assert type(out[0][1]) is bytes
    assert grpc.MessageDecoder().feed(grpc.encode_message(b"")) == [(False, b"")]
    with pytest.raises(grpc.RpcError) as info:
        grpc.MessageDecoder(max_message_size=4).feed(wire)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(grpc.RpcError) as info:
        grpc.MessageDecoder().feed(b"\x02" + wire[1:])
    assert info.value.code == grpc.StatusCode.INTERNAL


def test_default_receive_limit_is_4_mib() -> None:
    """The default limit is 4 MiB, inclusive."""
    assert grpc.DEFAULT_MAX_RECEIVE_MESSAGE_SIZE == 4 * 1024 * 1024
    decoder = grpc.MessageDecoder()
    assert decoder.feed(b"\x00" + (4 * 1024 * 1024).to_bytes(4, "big")) == []
    with pytest.raises(grpc.RpcError):
        grpc.MessageDecoder().feed(b"\x00" + (4 * 1024 * 1024 + 1).to_bytes(4, "big"))


def test_invalid_compressed_flag_is_internal() -> None:
    """A flag byte other than 0 or 1 is a protocol error: INTERNAL."""
    with pytest.raises(grpc.RpcError) as info:
        grpc.MessageDecoder().feed(b"\x02\x00\x00\x00\x00")
    assert info.value.code == grpc.StatusCode.INTERNAL


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compression_round_trip(encoding: str) -> None:
    """What we compress, we decompress; gzip is RFC 1952, deflate the zlib format."""
    data = b"hello " * 1000
    packed = _framing.compress(data, encoding)
    assert len(packed) < len(data)
    assert _framing.decompress(packed, encoding, None) == data
    if encoding == "gzip":
        assert gzip.decompress(packed) == data
    else:
        assert zlib.decompress(packed) == data


def test_raw_deflate_is_accepted() -> None:
    """A raw RFC 1951 stream labelled deflate is decompressed too."""
    obj = zlib.compressobj(wbits=-15)
    raw = obj.compress(b"abc" * 100) + obj.flush()
    assert _framing.decompress(raw, "deflate", None) == b"abc" * 100


def test_decompressed_size_is_limited() -> None:
    """A small compressed message expanding past the limit is RESOURCE_EXHAUSTED."""
    bomb = _framing.compress(b"\x00" * 100_000, "gzip")
    with pytest.raises(grpc.RpcError) as info:
        _framing.decompress(bomb, "gzip", 1000)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_corrupt_compressed_message_is_internal() -> None:
    """Bytes that are not gzip are INTERNAL."""
    with pytest.raises(grpc.RpcError) as info:
        _framing.decompress(b"not gzip", "gzip", None)
    assert info.value.code == grpc.StatusCode.INTERNAL


# ---------------------------------------------------------------------- timeout


@pytest.mark.parametrize(
    ("seconds", "wire"),
    [
        (1e-9, "1n"),
        (0.05, "50000000n"),
        (1.0, "1000000u"),
        (0.5, "500000u"),
        (100.0, "100000m"),
        (3600.0, "3600000m"),
        (1e6, "1000000S"),
        (1e9, "16666667M"),
    ],
)
def test_encode_timeout_uses_finest_unit_within_8_digits(seconds: float, wire: str) -> None:
    """The value fits 8 digits, in the finest unit that allows it."""
    assert grpc.encode_timeout(seconds) == wire


@given(st.floats(min_value=1e-9, max_value=1e9))
def test_timeout_round_trip_never_earlier(seconds: float) -> None:
    """Encoded, a timeout is at most 8 digits and never shorter than asked (rounded up)."""
    wire = grpc.encode_timeout(seconds)
    assert 2 <= len(wire) <= 9
    assert grpc.parse_timeout(wire) >= seconds * (1 - 1e-9)


@pytest.mark.parametrize(
    ("wire", "seconds"),
    [("1H", 3600), ("2M", 120), ("3S", 3), ("4m", 0.004), ("5u", 5e-6), ("6n", 6e-9)],
)
def test_parse_timeout_units(wire: str, seconds: float) -> None:
    """Every unit of PROTOCOL-HTTP2.md parses."""
    assert grpc.parse_timeout(wire) == pytest.approx(seconds)


@pytest.mark.parametrize("wire", ["", "S", "1", "123456789S", "1.5S", "-1S", "1s", "1 S"])
def test_parse_timeout_rejects_malformed(wire: str) -> None:
    """At most 8 digits and one of the six units, nothing else."""
    with pytest.raises(ValueError, match="grpc-timeout"):
        grpc.parse_timeout(wire)


# ---------------------------------------------------------------------- metadata


def test_bin_metadata_is_sent_unpadded_and_read_padded_or_not() -> None:
    """-bin values go out as unpadded base64; both forms are accepted on receipt."""
    md = grpc.Metadata([("k-bin", b"\x00\xff\x10"), ("a", "b"), ("k2-bin", b"x")])
    headers = _metadata.metadata_to_headers(md)
    assert headers == [(b"k-bin", b"AP8Q"), (b"a", b"b"), (b"k2-bin", b"eA")]
    padded = [(b"k2-bin", base64.b64encode(b"x")), (b"k2-bin", b"eA")]
    assert list(_metadata.metadata_from_headers(padded)) == [("k2-bin", b"x"), ("k2-bin", b"x")]


def test_malformed_bin_metadata_raises() -> None:
    """A -bin value that is not base64 raises ValueError."""
    with pytest.raises(ValueError, match="base64"):
        _metadata.metadata_from_headers([(b"k-bin", b"!!!")])


@pytest.mark.parametrize("key", ["grpc-status", "grpc-timeout", "content-type", "te"])
def test_reserved_keys_cannot_be_sent(key: str) -> None:
    """The protocol's own fields are refused as application metadata."""
    with pytest.raises(ValueError, match="reserved"):
        _metadata.metadata_to_headers(grpc.Metadata([(key, "x")]))


def test_reserved_fields_are_hidden_on_receipt_but_details_bin_kept() -> None:
    """Pseudo-headers and grpc-* are left out; grpc-status-details-bin is metadata."""
    block = [
        (b":status", b"200"),
        (b"content-type", b"application/grpc"),
        (b"grpc-status", b"0"),
        (b"grpc-status-details-bin", b"AQI"),
        (b"x-user", b"v"),
    ]
    md = _metadata.metadata_from_headers(block)
    assert list(md) == [("grpc-status-details-bin", b"\x01\x02"), ("x-user", "v")]


@pytest.mark.parametrize(
    ("pairs", "error"),
    [
        ([("Upper", "v")], ValueError),
        ([("k", b"bytes")], TypeError),
        ([("k-bin", 5)], TypeError),
        ([("k", "caf\u00e9")], ValueError),
        ([("k", "line\n")], ValueError),
    ],
)
def test_metadata_validation(pairs: list[tuple[str, object]], error: type[Exception]) -> None:
    """Keys are lowercase; text values printable ASCII; binary values need -bin."""
    with pytest.raises(error):
        grpc.Metadata(pairs)  # type: ignore[arg-type]


def test_metadata_is_a_multimap() -> None:
    """Order and duplicates are kept; lookups give the first or all values."""
    md = grpc.Metadata({"a": "1"})
    md2 = grpc.Metadata([("a", "1"), ("b", "2"), ("a", "3")])
    assert md == [("a", "1")]
    assert md2["a"] == "1"
    assert md2.get_all("a") == ["1", "3"]
    assert md2.get("zz") is None
    assert "b" in md2
    assert len(md2) == 3
    with pytest.raises(KeyError):
        md2["zz"]


# ---------------------------------------------------------------------- status


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        ("plain text", "plain text"),
        ("100%", "100%25"),
        ("caf\u00e9", "caf%C3%A9"),
        ("a\nb", "a%0Ab"),
        ("\u2603", "%E2%98%83"),
    ],
)
def test_grpc_message_percent_encoding(text: str, wire: str) -> None:
    """Printable ASCII but % goes as is; everything else as %XX of its UTF-8."""
    assert grpc.encode_grpc_message(text) == wire
    assert grpc.decode_grpc_message(wire) == text


@given(st.text())
def test_grpc_message_round_trip(text: str) -> None:
    """Any text survives encoding and decoding; the wire form is printable ASCII."""
    wire = grpc.encode_grpc_message(text)
    assert all(0x20 <= ord(c) <= 0x7E for c in wire)
    assert grpc.decode_grpc_message(wire) == text.encode("utf-8", "surrogatepass").decode(
        "utf-8", "replace"
    )


@pytest.mark.parametrize("wire", ["50%", "%zz", "%4", "%%41"])
def test_malformed_percent_sequences_are_kept(wire: str) -> None:
    """A receiver never fails on grpc-message: a bad %-sequence stays literal."""
    decoded = grpc.decode_grpc_message(wire)
    assert "%" in decoded


@pytest.mark.parametrize(
    ("http", "code"),
    [
        (400, grpc.StatusCode.INTERNAL),
        (401, grpc.StatusCode.UNAUTHENTICATED),
        (403, grpc.StatusCode.PERMISSION_DENIED),
        (404, grpc.StatusCode.UNIMPLEMENTED),
        (429, grpc.StatusCode.UNAVAILABLE),
        (502, grpc.StatusCode.UNAVAILABLE),
        (503, grpc.StatusCode.UNAVAILABLE),
        (504, grpc.StatusCode.UNAVAILABLE),
        (500, grpc.StatusCode.UNKNOWN),
        (302, grpc.StatusCode.UNKNOWN),
    ],
)
def test_http_status_mapping(http: int, code: grpc.StatusCode) -> None:
    """grpc/grpc doc/http-grpc-status-mapping.md."""
    assert grpc.status_from_http(http) == code


@pytest.mark.parametrize(
    ("rst", "code"),
    [
        (0x0, grpc.StatusCode.INTERNAL),
        (0x1, grpc.StatusCode.INTERNAL),
        (0x2, grpc.StatusCode.INTERNAL),
        (0x3, grpc.StatusCode.INTERNAL),
        (0x4, grpc.StatusCode.INTERNAL),
        (0x6, grpc.StatusCode.INTERNAL),
        (0x7, grpc.StatusCode.UNAVAILABLE),
        (0x8, grpc.StatusCode.CANCELLED),
        (0x9, grpc.StatusCode.INTERNAL),
        (0xA, grpc.StatusCode.INTERNAL),
        (0xB, grpc.StatusCode.RESOURCE_EXHAUSTED),
        (0xC, grpc.StatusCode.PERMISSION_DENIED),
        (0x99, grpc.StatusCode.INTERNAL),
    ],
)
def test_rst_stream_mapping(rst: int, code: grpc.StatusCode) -> None:
    """PROTOCOL-HTTP2.md, "Errors": RST_STREAM code to gRPC status."""
    assert grpc.status_from_rst(rst) == code


def test_status_codes_and_unknown_wire_values() -> None:
    """The 17 codes have their numbers; an unknown grpc-status is UNKNOWN."""
    assert [c.value for c in grpc.StatusCode] == list(range(17))
    assert _status.code_from_wire(b"5") == grpc.StatusCode.NOT_FOUND
    assert _status.code_from_wire(b"99") == grpc.StatusCode.UNKNOWN
    assert _status.code_from_wire(b"x") == grpc.StatusCode.UNKNOWN


def test_rpc_error_fields() -> None:
    """RpcError carries code, details, metadata, and details-bin from its trailers."""
    err = grpc.RpcError(
        grpc.StatusCode.NOT_FOUND, "gone", trailing_metadata=[("grpc-status-details-bin", b"\x08")]
    )
    assert err.code == grpc.StatusCode.NOT_FOUND
    assert str(err) == "NOT_FOUND: gone"
    assert err.status_details == b"\x08"
    with pytest.raises(ValueError, match="OK"):
        grpc.RpcError(grpc.StatusCode.OK)


def test_rpc_error_pickles_with_all_its_fields() -> None:
    """A pickled RpcError keeps code, details, both metadata and status_details (also
    when status_details is not in its trailing metadata)."""
    err = grpc.RpcError(
        grpc.StatusCode.ABORTED,
        "caf\u00e9",
        trailing_metadata=[("x-t", "1"), ("x-b-bin", b"\x00")],
        initial_metadata=[("x-i", "2")],
        status_details=b"\x08\x0a",
    )
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is grpc.RpcError
    assert (copy.code, copy.details, copy.status_details) == (
        grpc.StatusCode.ABORTED,
        "caf\u00e9",
        b"\x08\x0a",
    )
    assert copy.trailing_metadata == [("x-t", "1"), ("x-b-bin", b"\x00")]
    assert copy.initial_metadata == [("x-i", "2")]
    assert str(copy) == str(err)


def _public_async_functions() -> list[tuple[str, object]]:
    import inspect

    found: list[tuple[str, object]] = []
    for name in grpc.__all__:
        obj = getattr(grpc, name)
        if inspect.iscoroutinefunction(obj):
            found.append((name, obj))
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in ("__call__", "__anext__"):
                    continue
                if inspect.iscoroutinefunction(member):
                    found.append((f"{name}.{attr}", member))
    return found


def test_public_async_docstrings_state_checkpoint_and_cancellation() -> None:
    """Every public async function of trio_h2t.grpc says "Checkpoint:" and "On cancellation:"."""
    found = _public_async_functions()
    assert len(found) >= 10
    missing = [
        name
        for name, fn in found
        if "Checkpoint:" not in (fn.__doc__ or "") or "On cancellation:" not in (fn.__doc__ or "")
    ]
    assert missing == []


@pytest.mark.parametrize(
    "cls", [grpc.Call, grpc.ServicerContext, grpc.UnaryUnaryMethod, grpc.StreamStreamMethod]
)
def test_factory_built_classes_have_no_public_constructor(cls: type) -> None:
    """Calls, contexts and method objects are built by channels and servers only."""
    with pytest.raises(TypeError, match="no public constructor"):
        cls()
