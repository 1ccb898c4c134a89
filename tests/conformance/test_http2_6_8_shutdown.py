"""RFC 9113 §6.8 from the server's side: its GOAWAY when ``trio-h2t serve`` stops.

This module's server is stopped by its only test (SIGTERM), so it does not use the
``server``/``conn`` fixtures, which require the server to outlive each test.
"""

from __future__ import annotations

import signal
import subprocess

from hyperframe.frame import DataFrame, GoAwayFrame, PingFrame, RstStreamFrame

from .conftest import STOP_TIMEOUT, Server
from .harness import Closed, ErrorCode, H2Client, request_headers


def test_6_8_graceful_shutdown(h2_server: Server) -> None:
    """RFC 9113 §6.8, drained in two phases (docs/keepalive-and-shutdown.md, "The
    drain"): on shutdown the server sends GOAWAY(NO_ERROR, 2^31-1) and a PING; a
    stream sent before that PING is answered is still processed; then GOAWAY(NO_ERROR)
    names exactly the last stream processed; the server completes those streams, does
    not process a newer one, never raises the last stream id in a later GOAWAY, then
    closes."""
    conn = H2Client(h2_server.port)
    try:
        conn.handshake()
        conn.send(conn.open_post())
        conn.ping()  # stream 1 has been processed
        h2_server.proc.send_signal(signal.SIGTERM)
        heads_up = conn.expect_frame(GoAwayFrame)
        assert heads_up.error_code == ErrorCode.NO_ERROR
        assert heads_up.last_stream_id == 2**31 - 1
        ping = conn.expect_frame(PingFrame)
        assert "ACK" not in ping.flags
        # Stream 3 crossed the first GOAWAY: sent before the PING is answered.
        conn.send(conn.headers_frame(3, request_headers()))
        conn.send(PingFrame(0, ping.opaque_data, flags=["ACK"]))
        goaway = conn.expect_frame(GoAwayFrame)
        assert goaway.error_code == ErrorCode.NO_ERROR
        assert goaway.last_stream_id == 3
        conn.send(
            conn.headers_frame(5, request_headers()), DataFrame(1, b"bye", flags=["END_STREAM"])
        )
        responses = conn.read_responses([1, 3])
        assert responses[1].status == 200
        assert responses[1].body == b"bye"
        assert responses[3].status >= 200  # served (whatever the file system says)
        conn.expect_close()
        for event in conn.received:
            if isinstance(event, GoAwayFrame) and event is not heads_up:
                assert event.last_stream_id <= goaway.last_stream_id, "last stream id grew"
            if isinstance(event, RstStreamFrame) and event.stream_id == 5:
                assert event.error_code == ErrorCode.REFUSED_STREAM
            assert getattr(event, "stream_id", 0) != 5 or isinstance(
                event, (RstStreamFrame, Closed)
            )
    finally:
        conn.close()
    try:
        assert h2_server.proc.wait(timeout=STOP_TIMEOUT) == 0
    except subprocess.TimeoutExpired:
        raise AssertionError("the server did not exit after SIGTERM") from None
