"""A like-for-like static server on ``trio_h2t.serve_tcp`` (diagnostic peer).

It answers every request as ``hypercorn_app.py`` does (the file read from disk on
every request with plain blocking I/O, ``content-type`` and ``content-length``),
so that comparing it with hypercorn compares the transports alone. ``trio-h2t serve``
(the CLI) does more per request: it resolves the path and opens and reads the file in
worker threads (``trio.to_thread``, ``trio.wrap_file``).

Usage: ``python trio_h2t_static.py FILE [--port 0]``; prints ``serving on
http://127.0.0.1:PORT``; stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import functools
import mimetypes
import signal

import trio

import trio_h2t


async def main(path: str, port: int) -> None:
    content_type = (mimetypes.guess_type(path)[0] or "application/octet-stream").encode()

    async def handler(stream: trio_h2t.H2Stream) -> None:
        with open(path, "rb") as file:  # noqa: ASYNC230 - what the ASGI peer does
            body = file.read()
        await stream.send_headers(
            [
                (b":status", b"200"),
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ]
        )
        await stream.send_data(body, end_stream=True)

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                functools.partial(trio_h2t.serve_tcp, handler, port, host="127.0.0.1")
            )
            print(f"serving on http://127.0.0.1:{server.port}", flush=True)
            async for _ in signals:
                break
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    trio.run(main, args.file, args.port)
