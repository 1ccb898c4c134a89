"""The "only X calls Y" claims of the design pages (docs/architecture.md, "The task
tree" and "Who owns what"), checked against the code by reading every call site.

Each test names the functions that may make a call; a new call site anywhere else
fails it, so the page and the code are changed together.
"""

from __future__ import annotations

import ast
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
    task or the server's handler runner."""
    assert _call_sites("reset_stream") == {
        ("_connection.py", "refuse_stream"),
        ("_h2fixes.py", "_header_list_too_large"),
        ("_loopy.py", "_reset"),
        ("_server.py", "run_handler"),
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
    """docs/architecture.md, "The life of a stream": an ``H2Stream``'s ``_closed`` is
    set by ``ConnectionCore.stream_closed`` alone (and initialised in its
    ``__init__``); the stream view's own ``_closed`` is a field of that view."""
    assert _attribute_writes("_closed") == {
        ("_connection.py", "stream_closed"),
        ("_stream.py", "__init__"),
        ("_streamview.py", "__init__"),
        ("_streamview.py", "aclose"),
    }
