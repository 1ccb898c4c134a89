"""An h2spec-equivalent conformance suite (RFC 9113, RFC 7541): ``trio-h2t serve``, and clients.

h2spec (the standard independent suite, a Go binary) cannot be installed here, so
this package re-implements its case list in Python, plus further MUSTs of the same
sections ("beyond h2spec" in a docstring). Every case talks raw bytes to a real
``python -m trio_h2t serve --port 0`` subprocess over 127.0.0.1.

- ``harness.py``: the raw client and h2spec's verifiers (``expect_*``);
- ``conftest.py``: one server per test module, a fresh connection per test;
- ``test_generic.py`` (h2spec ``generic``), ``test_http2_*.py`` (``http2``, by RFC 9113
  section) and ``test_hpack.py`` (``hpack``).

The client side turns the roles around: ``fake_server.py`` is a raw-socket server on
127.0.0.1 that misbehaves before its SETTINGS, during the client's handshake wait,
or mid-stream, and ``test_client.py`` runs a trio_h2t client (``open_connection`` in
process, and ``trio-h2t get``) against it, asserting the exact frames the client
sends up to EOF. Its first run found three client bugs (no GOAWAY when the
violation came with the server's SETTINGS, a malformed response ending on its
HEADERS answered with GOAWAY(STREAM_CLOSED) instead of RST_STREAM, HEADERS on an
unpushed even stream reset instead of refused as a connection error); all fixed.

Run it alone with ``.venv/bin/python -m pytest tests/conformance`` (about 10 s). Its
first run found seven server bugs (HPACK failures reported as PROTOCOL_ERROR, no
SETTINGS-first check, DATA after END_STREAM answered as a stream error, SETTINGS ACK
with payload, the WINDOW_UPDATE reserved bit, an idle connection kept open after the
client's GOAWAY, content-length unchecked without DATA); all are fixed, and every case
now passes.
"""
