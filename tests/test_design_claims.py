"""The "only X calls Y" claims of the design pages (docs/architecture.md, "The task
tree" and "Who owns what"), checked against the code by reading every call site.

Each test names the functions that may make a call; a new call site anywhere else
fails it, so the page and the code are changed together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import trio_h2t

PACKAGE = Path(trio_h2t.__file__).parent


def _call_sites(method: str) -> set[tuple[str, str]]:
    """``(module, enclosing function)`` for every call ``<expr>.method(...)`` or
    ``method(...)`` in the package (the gRPC layer and the CLI included; not
    ``trio_h2t.testing``, whose fake peers and test streams write their own bytes)."""
    sites: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if "protos" in path.parts or "testing" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        module = path.relative_to(PACKAGE).as_posix()

        def visit(node: ast.AST, func: str, module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                name = func
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = child.name
                if isinstance(child, ast.Call) and (
                    (isinstance(child.func, ast.Attribute) and child.func.attr == method)
                    or (isinstance(child.func, ast.Name) and child.func.id == method)
                ):
                    sites.add((module, func))
                visit(child, name)

        visit(tree, "<module>")
    return sites


def test_only_loopy_and_the_preface_take_bytes_out_of_h2() -> None:
    """h2's ``data_to_send()`` is called by ``send_preface`` (before loopy starts)
    alone; loopy takes the bytes with ``take_outbound()`` (the same without its copy,
    ``_h2fixes.py``) in its flushes and its GOAWAY, and nothing else does."""
    assert _call_sites("data_to_send") == {("_connection.py", "send_preface")}
    assert _call_sites("take_outbound") == {
        ("_loopy.py", "_flush"),
        ("_loopy.py", "_write_goaway"),
    }


def test_only_loopy_writes_after_the_preface() -> None:
    """The transport's ``send_all`` is called by loopy, by ``send_preface``, by the
    server's first-bytes sniff (the HTTP/1.x 505) and by the TLS handshake's alert to
    a client that does not speak TLS: the last three before loopy exists. (The stream
    view's own ``send_all`` is a method of it, not a call.) Loopy's flush also writes
    with ``sendmsg`` (``send_vectored``) on a plain TCP socket, and nothing else does."""
    assert _call_sites("send_vectored") == {("_loopy.py", "_flush")}
    assert _call_sites("send_all") == {
        ("_connection.py", "send_preface"),
        ("_loopy.py", "_flush"),
        ("_sniff.py", "_answer_and_drain"),
        ("_server.py", "_tls_ok"),
    }


def test_who_resets_streams_in_h2() -> None:
    """Calls named ``reset_stream``: h2's, by loopy (a stream's ``ResetStream`` item)
    and by the reader's refusal at admission (``ConnectionCore.refuse_stream``), and
    h2's stream-level one for an oversized header list (``_h2fixes.py``); the
    others are ``ConnectionCore.reset_stream`` (which queues an item) from a stream
    task or the server's handler runner (its ``_close_request_side``)."""
    assert _call_sites("reset_stream") == {
        ("_connection.py", "refuse_stream"),
        ("_h2fixes.py", "_header_list_too_large"),
        ("_loopy.py", "_reset"),
        ("_server.py", "_close_request_side"),
        ("_stream.py", "reset"),
    }


def _attribute_writes(attribute: str) -> set[tuple[str, str]]:
    """``(module, enclosing function)`` for every assignment ``<expr>.attribute = ...``
    in the package."""
    sites: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if "protos" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        module = path.relative_to(PACKAGE).as_posix()
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                targets = node.targets if isinstance(node, ast.Assign) else []
                if any(isinstance(t, ast.Attribute) and t.attr == attribute for t in targets):
                    sites.add((module, func.name))
    return sites


def test_only_stream_closed_closes_a_stream() -> None:
    """docs/architecture.md, "The life of a stream": an ``H2Stream``'s ``core_closed``
    is set by ``ConnectionCore.stream_closed`` alone, through the stream's
    ``core_close`` (and initialised in its ``__init__``); the stream view's own
    ``_closed`` is a field of that view."""
    assert _call_sites("core_close") == {("_connection.py", "stream_closed")}
    assert _attribute_writes("core_closed") == {
        ("_stream.py", "core_close"),
        ("_stream.py", "__init__"),
    }
    assert _attribute_writes("_closed") == {
        ("_streamview.py", "__init__"),
        ("_streamview.py", "aclose"),
    }


# ------------------------------------------------------------------ docs/wakeups.md

#: Calls that make a task wait on, or wake, one of the objects below.
_PARK = {"park", "wait", "wait_task_rescheduled"}
_WAKE = {"unpark", "unpark_all", "set", "reschedule"}


def _is_wait_object(value: ast.expr | None, annotation: ast.expr | None) -> bool:
    """``trio.Event()``, ``ParkingLot()``, or a field annotated as one (or as a waiter
    slot, ``trio.lowlevel.Task | None``)."""
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("Event", "ParkingLot"):
            return True
    text = ast.unparse(annotation) if annotation is not None else ""
    return re.search(r"\btrio\.Event\b|\bParkingLot\b|\blowlevel\.Task\b", text) is not None


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module-level functions and methods, each with its qualified name (nested
    functions belong to the function around them)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            found += [
                (f"{node.name}.{item.name}", item)
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
    return found


def _wait_primitives() -> tuple[set[str], set[str]]:
    """The objects tasks wait on (``Class.field``) and the functions that wait on or
    wake one (``Class.method`` or ``function``), in the whole package but
    ``trio_h2t.testing``."""
    trees = [
        (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "protos" not in path.parts and "testing" not in path.parts
    ]
    objects: set[str] = set()
    fields: set[str] = set()
    for _, tree in trees:
        for qualname, func in _functions(tree):
            owner = qualname.rpartition(".")[0]
            for node in ast.walk(func):
                value: ast.expr | None
                annotation: ast.expr | None
                if isinstance(node, ast.Assign):
                    targets, value, annotation = node.targets, node.value, None
                elif isinstance(node, ast.AnnAssign):
                    targets, value, annotation = [node.target], node.value, node.annotation
                else:
                    continue
                if not _is_wait_object(value, annotation):
                    continue
                for target in targets:
                    if isinstance(target, ast.Attribute):
                        fields.add(target.attr)
                        if isinstance(target.value, ast.Name) and target.value.id == "self":
                            objects.add(f"{owner}.{target.attr}")
    users: set[str] = set()
    for _, tree in trees:
        for qualname, func in _functions(tree):
            # Local names bound to one of those objects (``ack = self.drain_ack = ...``).
            local: set[str] = set()
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and any(
                    isinstance(n, ast.Attribute) and n.attr in fields
                    for part in [*node.targets, node.value]
                    for n in ast.walk(part)
                ):
                    local |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                callee = node.func
                name = (
                    callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                )
                if name in ("wait_task_rescheduled", "reschedule"):
                    users.add(qualname)
                elif name in _PARK | _WAKE and isinstance(callee, ast.Attribute):
                    on = callee.value
                    if (isinstance(on, ast.Attribute) and on.attr in fields) or (
                        isinstance(on, ast.Name) and on.id in local
                    ):
                        users.add(qualname)
    return objects, users


def test_the_wakeups_page_names_every_wait_primitive() -> None:
    """docs/wakeups.md names every parking lot, ``trio.Event`` and waiter slot of the
    package (as ``Class.field``) and every function that waits on or wakes one, so a
    new one cannot go undocumented."""
    page = (PACKAGE.parent / "docs" / "wakeups.md").read_text(encoding="utf-8")
    objects, users = _wait_primitives()
    # The detector itself still sees what the page was written from.
    assert {"ControlBuffer._consumer", "H2Stream._recv_waiter"} <= objects
    assert {"ConnectionCore.fail", "H2Stream.receive_some", "ControlBuffer.put"} <= users
    missing = sorted(name for name in objects | users if f"`{name}`" not in page)
    assert not missing, f"not on docs/wakeups.md: {missing}"


# ------------------------------------------------------------------ docs/h2-contract.md


def test_the_h2_contract_page_names_every_pinned_internal_and_event() -> None:
    """docs/h2-contract.md names every private h2/hpack name ``tests/test_h2_guard.py``
    pins, and says what happens to every event class h2 defines (and our two)."""
    import h2.events
    import test_h2_guard

    page = (PACKAGE.parent / "docs" / "h2-contract.md").read_text(encoding="utf-8")
    pinned = {name for _, name, _ in test_h2_guard.METHODS} | test_h2_guard.ATTRIBUTES
    events = {
        name
        for name, value in vars(h2.events).items()
        if isinstance(value, type) and issubclass(value, h2.events.Event) and name != "Event"
    } | {"GoAwayReceived", "PriorityFrameReceived"}
    assert "DataReceived" in events
    # A name may be written bare or qualified (`FrameBuffer._data`).
    missing = sorted(
        name
        for name in pinned | events
        if not re.search(rf"`(?:[\w.]+\.)?{re.escape(name)}`", page)
    )
    assert not missing, f"not on docs/h2-contract.md: {missing}"


def test_only_loopy_consumes_the_control_buffer() -> None:
    """docs/controlbuf.md I5: "Only loopy calls ``get``, ``get_nowait`` and
    ``discard_batch``" (and ``poll``, its non-blocking take): loopy's loop (``_serve``)
    and final write, and ``run_loopy`` (loopy's task in the connection), each only; the buffer's
    own methods call one another. (``timer.poll`` in ``_keepalive.py`` is the ping
    timer's, another object.)"""
    own = {"get", "get_nowait", "poll", "close_consumer"}
    assert {s for s in _call_sites("get_nowait") if s[0] != "_controlbuf.py"} == set()
    assert {s for s in _call_sites("discard_batch") if s[0] != "_controlbuf.py"} == {
        ("_connection.py", "run_loopy"),
        ("_loopy.py", "_final_write"),
    }
    assert {s for s in _call_sites("poll") if s[0] not in ("_controlbuf.py", "_keepalive.py")} == {
        ("_loopy.py", "_serve")
    }
    inside = {s[1] for s in _call_sites("discard_batch") | _call_sites("get_nowait")}
    assert {f for f in inside if f not in ("run_loopy", "_final_write")} <= own
    awaited_gets = _awaited_calls("get")
    assert awaited_gets == {("_loopy.py", "_serve")}, awaited_gets


def _awaited_calls(method: str) -> set[tuple[str, str]]:
    """``(module, enclosing function)`` for every ``await <expr>.method()``."""
    sites: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if "protos" in path.parts or "testing" in path.parts:
            continue
        module = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.Await)
                    and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute)
                    and node.value.func.attr == method
                    and not node.value.args
                ):
                    sites.add((module, func.name))
    return sites


def test_only_the_consumer_touches_the_batch() -> None:
    """docs/controlbuf.md I6: "only it [the consumer] touches the batch": no module but
    ``_controlbuf.py`` names the buffer's ``_batch``."""
    outside = [
        path.relative_to(PACKAGE).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_controlbuf.py" and "._batch" in path.read_text(encoding="utf-8")
    ]
    assert outside == []


def test_only_what_may_block_is_async_in_the_control_buffer() -> None:
    """docs/controlbuf.md §5: "only what may block is ``async``": the control buffer's
    async methods are ``get`` (the consumer parks) and ``wait_unthrottled`` (the
    reader parks at the limit), and nothing else."""
    import inspect

    from trio_h2t._controlbuf import ControlBuffer

    asyncs = {
        name for name, value in vars(ControlBuffer).items() if inspect.iscoroutinefunction(value)
    }
    assert asyncs == {"get", "wait_unthrottled"}
