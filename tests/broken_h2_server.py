"""A deliberately broken HTTP/2 server for tests/test_check_cli.py: ``python THIS PORT``.

It answers SETTINGS and PING with their ACKs and every complete header block with a
200, and lets every error pass without a word: DATA on stream 0 or on idle streams,
bad lengths, broken HPACK. ``trio-h2t check`` must catch it.
"""

from __future__ import annotations

import contextlib
import functools
import sys

import trio

from trio_h2t.testing import PREFACE, FrameType, WireFrame, encode_header_block, parse_frames


async def broken_connection(stream: trio.SocketStream) -> None:
    """Answer SETTINGS, PING and requests; check nothing."""
    response = encode_header_block([(":status", "200")])
    await stream.send_all(WireFrame(FrameType.SETTINGS, 0, 0).to_bytes())
    buffer = b""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while data := await stream.receive_some(65_536):
            buffer += data
            if buffer.startswith(PREFACE):
                buffer = buffer[len(PREFACE) :]
            frames, buffer = parse_frames(buffer)
            out = b""
            for f in frames:
                if f.type in (FrameType.SETTINGS, FrameType.PING) and not f.flags & 0x1:
                    out += WireFrame(f.type, 0x1, 0, f.payload).to_bytes()
                elif f.type == FrameType.HEADERS and f.flags & 0x4:
                    out += WireFrame(FrameType.HEADERS, 0x5, f.stream_id, response).to_bytes()
            await stream.send_all(out)


if __name__ == "__main__":
    trio.run(
        functools.partial(trio.serve_tcp, broken_connection, int(sys.argv[1]), host="127.0.0.1")
    )
