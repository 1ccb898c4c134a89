"""trio_h2t's HTTP/2 protocol layer, sans-IO: bytes in, records and events out; calls in, bytes out.

One noun per module, in the manner of h11 and h2 (docs/h2-contract.md, "Which
protocol core"):

- ``frames``: the frame codec of RFC 9113 §4 and §6: the 9-byte header, each frame
  type's payload parsed in place into immutable records (DATA as a view, not a
  copy), the framing rules as connection errors carrying their code, and the
  serializers of every frame we send. (exists)
- ``hpack``: hpack's encoder and decoder, remembering whole header blocks, and
  reading an oversized header list to its end. (exists)
- ``streamstates``: the stream state machine of §5.1 as a table of
  ``(state, input) -> (state, action)``, as data; ``_h2fast``'s streams run it. (exists)
- ``connection``: settings, the stream registry and GOAWAY bookkeeping; takes
  frames, returns events and frames to send. (planned)
- ``windows``: the flow-control windows of §6.9, a stream's and the connection's:
  the outbound (send) window and its WINDOW_UPDATE and SETTINGS_INITIAL_WINDOW_SIZE
  arithmetic, and the inbound (receive) window with h2's rule for handing processed
  bytes back. ``_h2fast``'s streams and connection keep their inbound windows in it;
  the outbound windows are still h2's integers until ``connection`` lands. (exists)

Until ``connection`` lands, h2 (patched by ``_h2fixes`` and ``_h2fast``) is the
connection and stream core, and the modules here replace its pieces one at a time.

Rules of the package: nothing here imports trio or the task layer (not even for
annotations; ``tests/test_import.py`` enforces it), nothing rewrites h2's,
hpack's or hyperframe's classes or tables, and stock h2 (with hpack and hyperframe)
is the oracle: differential tests (``tests/test_h2_frames.py`` for the frames,
``tests/test_h2_streamstates.py`` for the stream states, ``tests/test_h2_windows.py``
for the windows, ``tests/test_hpack.py``, ``tests/test_inbound.py`` for the DATA path
and ``tests/test_h2_connection.py`` for whole connections, where each deliberate
difference is an entry of its ``PATCHES``) feed the same input to both and compare
what comes out.

This ``__init__`` imports nothing: import the modules themselves.
"""

__all__: list[str] = []
