"""The write path allocates nothing it can avoid (grpc-go #8668).

Control items carry data and flags only: no closure, cell or bound method is built
per write (``Data.release`` calls the stream's own methods). And the synchronous part
of a write that is trio_h2t's own, from the ``Data`` item to the framed DATA (the
item, the control buffer, loopy's dispatch, the framing), stays under a pinned count
of allocations (``benchmarks/allochook.py``: every block CPython's allocators are
asked for, freed again or not). It is counted in one synchronous step, so trio's
scheduling (which ``benchmarks/send_allocs.py`` counts too) does not enter it and the
figure does not move with trio's version. Before the count was pinned, each write
also allocated a set and a list (loopy's ``match``), an exception and its traceback
(the drain's ``WouldBlock``), two empty lists (h2's no-op SEND_DATA transitions), an
object per enum member read, and a new h2 buffer per frame.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import trio
import trio.testing
from helpers import connected_pair

from trio_h2t import H2Stream
from trio_h2t._connection import ConnectionCore
from trio_h2t._controlbuf import ControlBuffer
from trio_h2t._items import ControlItem, Data

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks.allochook import alloc_counter  # noqa: E402

REQUEST = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"x"), (b":path", b"/")]


def _fields(item: ControlItem) -> dict[str, object]:
    if dataclasses.is_dataclass(item):
        return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    slots: tuple[str, ...] = type(item).__slots__  # Data: a plain class
    return {name: getattr(item, name) for name in slots}


async def test_items_queued_by_a_stream_carry_no_callables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every item both sides queue (headers, data of each kind, trailers, a graceful
    close's END_STREAM, window updates, ...) holds no function, closure or bound
    method."""
    seen: list[ControlItem] = []
    put = ControlBuffer.put

    def recording(self: ControlBuffer, item: ControlItem) -> None:
        seen.append(item)
        put(self, item)

    monkeypatch.setattr(ControlBuffer, "put", recording)

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")])
        await stream.send_data(b"x" * 100)
        await stream.send_data(memoryview(bytearray(200)))
        await stream.send_trailers([("x-done", "1")])

    with trio.fail_after(30):
        async with connected_pair(handler) as (conn, _core):
            response = await conn.request("POST", "/", body=b"hi")
            assert len(response.body) == 300
            async with conn.open_stream(REQUEST) as stream:
                await stream.send_data(b"body")
                stream.view_close_after_output()  # the graceful close's END_STREAM item
                while not stream.closed:  # written, then reset: its release ran
                    await trio.lowlevel.checkpoint()
    data = [i for i in seen if isinstance(i, Data)]
    assert len(data) == 5
    assert [i for i in data if i.cancel_after]  # the graceful close's item is among them
    for item in seen:
        for name, value in _fields(item).items():
            assert not callable(value), f"{type(item).__name__}.{name} holds {value!r}"


#: Allocations per write from item to framed DATA, at most (measured on CPython 3.11
#: with h2 4.4: 10.6, 11.7, 12.9; before the work that pinned them 19.6, 21.7, 22.9).
WRITE_ALLOCATIONS: dict[type, float] = {bytes: 12.0, memoryview: 13.0, bytearray: 14.0}


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
async def test_a_write_from_item_to_frame_allocates_no_more_than_pinned(kind: type) -> None:
    """Data item, control buffer, loopy's dispatch and DATA framing, 400 times in one
    synchronous step on a warm stream: what is left is the item, the frame header
    (and a bytearray's or memoryview's view), Python ints above 256 (windows, quota,
    byte counts: each result is a new object) and the amortised growth of the deques
    and loopy's list of pieces; no closure, bound method, exception, empty list or
    buffer per write (``WRITE_ALLOCATIONS``)."""
    counter = alloc_counter()
    assert counter.available, counter.why_unavailable  # the dev setup has a C compiler
    writes = 400
    per_write: list[float] = []

    async def handler(stream: H2Stream) -> None:
        await stream.send_headers([(":status", "200")])
        payload = kind(b"y" * 100)
        for _ in range(5):  # warm: the stream's output queue exists
            await stream.send_data(payload)
        core = stream._core
        assert isinstance(core, ConnectionCore)
        cbuf, loopy = core.cbuf, core.loopy
        assert loopy is not None
        items = [Data(stream, payload, False, quota=100) for _ in range(writes)]
        # Loopy has flushed and waits in cbuf.get(): it owns what it frames into, and
        # must not be inside a write while this task frames for it.
        await trio.testing.wait_all_tasks_blocked()
        counter.start()
        for item in items:
            # What send_data does between its checkpoints, then what loopy does
            # with the item; loopy's own task wakes later to an empty buffer.
            stream._write_quota -= 100
            stream._put_output(item)
            taken = cbuf.get_nowait()
            assert taken is item
            loopy._handle(taken)
            loopy._process_data()
        counted = counter.stop()
        assert counted is not None
        # Items made before counting: add one allocation per write for the item.
        per_write.append(counted[0] / writes + 1)
        await stream.end()  # loopy flushes the framed DATA, in order, then END_STREAM

    with trio.fail_after(30):
        async with connected_pair(handler) as (conn, _core):
            response = await conn.request("POST", "/")
            assert len(response.body) == 100 * (5 + writes)
    [allocs] = per_write
    limit = WRITE_ALLOCATIONS[kind]
    assert allocs <= limit, f"{allocs:.2f} allocations per {kind.__name__} write (limit {limit})"
