"""The ASGI app hypercorn serves in ``hypercorn_vs_trio_h2t.py``: one static file.

``GET`` of any path answers the file named by ``BENCH_STATIC_FILE``, read from disk
on every request with plain blocking I/O (a small file in the page cache takes a few
microseconds), with the headers ``trio-h2t serve`` sends: ``content-type`` (by
extension) and ``content-length``. Run by hypercorn, never imported by trio_h2t.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PATH = os.environ.get("BENCH_STATIC_FILE", "")
CONTENT_TYPE = (mimetypes.guess_type(PATH)[0] or "application/octet-stream").encode()


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            event = await receive()
            if event["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    with open(PATH, "rb") as file:  # noqa: ASYNC230 - a small file in the page cache
        body = file.read()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", CONTENT_TYPE),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
