"""No module but ``_stream.py`` touches an underscore member of an ``H2Stream``.

``H2Stream`` is the users' face of a stream; the transport's own tasks reach it
through methods named for the task that calls them (``reader_*``, ``loopy_*``,
``core_*``, ``server_*``, ``client_*``, ``view_*``: docs/architecture.md, "Who owns
what"), and loopy keeps the stream's output state in its own table
(``_outstream.py``). This test parses every module of the package with ``ast`` and
reports an attribute access ``X._name`` (``X`` not ``self`` or ``cls``) outside
``_stream.py`` when either

- ``_name`` is one of H2Stream's private members (its ``__slots__`` and methods)
  and no other class of the package has a member of that name, so it can only be a
  stream's; or
- ``_name`` is one of those members and ``X`` is named as a stream (``stream``,
  ``s``, ``st``, ``found``, ``target``, or any name ending in ``stream``, e.g.
  ``self._stream``, ``item.stream``); or
- ``X`` is the class ``H2Stream`` itself, and ``_name`` is any underscore name but
  ``_create`` (the factory of ``NoPublicConstructor``).

It also reports a *write* outside ``_stream.py`` to one of the stream's fields that
the tasks read directly (``core_closed``, ``core_peer_ended``, ``core_output_over``...:
its ``__slots__`` named with a ``TASK_INTERFACE_PREFIXES`` prefix): those change only
through the stream's methods.

(h2's own stream objects, which ``_h2fast.py`` reaches into, have other names.)

And it keeps the reader's own state off the stream: every field of ``H2Stream`` the
reader's methods (``reader_*``, and the private helpers only they call) touch must
also be touched by another task's (``test_no_reader_only_state_on_the_stream``).
What the reader writes on a stream is a hand-off to the stream task (the received
headers, the data queue, the trailers, the end); state only the reader uses (its
buffer's view holders, its flood and credit counters) lives in the reader.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import trio_h2t
from trio_h2t._stream import TASK_INTERFACE_PREFIXES

PACKAGE = Path(trio_h2t.__file__).parent
STREAM_MODULE = PACKAGE / "_stream.py"

#: Receivers taken to be streams: the last name of the receiver expression.
STREAM_NAMES = re.compile(r"^(s|st|found|target|.*stream)$", re.IGNORECASE)
#: Underscore names a module may use on the class itself.
ALLOWED_ON_CLASS = {"_create"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _class_members(cls: ast.ClassDef) -> set[str]:
    """The names a class defines: its methods, ``__slots__`` and ``self.x`` fields."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__slots__" and isinstance(node.value, ast.Tuple | ast.List):
                        names.update(
                            e.value
                            for e in node.value.elts
                            if isinstance(e, ast.Constant) and isinstance(e.value, str)
                        )
    for sub in ast.walk(cls):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.ctx, ast.Store)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "self"
        ):
            names.add(sub.attr)
    return names


def _stream_fields() -> set[str]:
    """H2Stream's fields the transport's tasks read directly (and never write)."""
    return {
        name for name in trio_h2t.H2Stream.__slots__ if name.startswith(TASK_INTERFACE_PREFIXES)
    }


def _stream_private_names() -> tuple[set[str], set[str]]:
    """H2Stream's private names, and those of them another package class also has."""
    tree = ast.parse(STREAM_MODULE.read_text(), str(STREAM_MODULE))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "H2Stream")
    private = {name for name in _class_members(cls) if _is_private(name)}
    elsewhere: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node is not cls and node.name != "H2Stream":
                elsewhere |= _class_members(node)
    return private, private & elsewhere


def _receiver_name(node: ast.expr) -> str | None:
    """The last name of a receiver expression: ``stream`` for ``item.stream``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations(
    source: str, filename: str, private: set[str], shared: set[str], fields: set[str]
) -> list[str]:
    """Each access to an H2Stream underscore member in ``source``, and each write to
    one of its ``fields``, as ``file:line: expression``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Attribute):
            continue
        receiver = _receiver_name(node.value)
        if receiver in ("self", "cls"):
            continue
        where = f"{filename}:{node.lineno}: {ast.unparse(node)}"
        if node.attr in fields and isinstance(node.ctx, ast.Store | ast.Del):
            found.append(where)
            continue
        if not _is_private(node.attr):
            continue
        if receiver == "H2Stream":
            if node.attr not in ALLOWED_ON_CLASS:
                found.append(where)
        elif node.attr in private and (
            node.attr not in shared or (receiver is not None and STREAM_NAMES.match(receiver))
        ):
            found.append(where)
    return found


def test_no_module_touches_a_streams_underscore_members() -> None:
    """Outside _stream.py no module reads or writes an underscore member of a stream."""
    private, shared = _stream_private_names()
    fields = _stream_fields()
    assert len(private) > 20, sorted(private)  # the scan found H2Stream's members
    assert "core_closed" in fields
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == STREAM_MODULE:
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        found += violations(path.read_text(), rel, private, shared, fields)
    assert not found, "underscore members of H2Stream used outside _stream.py:\n" + "\n".join(found)


def test_a_planted_violation_is_caught() -> None:
    """Each pattern the test forbids is reported when planted in a module's source."""
    private, shared = _stream_private_names()
    assert "_chunks" in private
    assert "_trailers" in private
    assert "_core" in shared
    planted = """
def f(stream, item, found, other, conn):
    stream._chunks.append(b"x")         # a stream's private field
    item.stream._core                   # a name other classes have too, on a stream
    self._stream._trailers              # a stream held in a private field
    found._write_quota -= 1             # a name only H2Stream has, on any receiver
    H2Stream._return_quota               # on the class
    H2Stream._create(conn, stream_id=1, headers=None)  # the factory: allowed
    conn._core                           # another class's member of a shared name
    stream.closed                        # public: allowed
    stream._expected_content_length      # not H2Stream's (h2's stream): allowed
    out.stream.core_closed = True        # a write to a field the tasks only read
    stream.core_end_queued |= True       # the same, augmented
    if stream.core_closed: pass          # reading it: allowed
"""
    found = violations(planted, "planted.py", private, shared, _stream_fields())
    lines = sorted(int(v.split(":")[1]) for v in found)
    assert lines == [3, 4, 5, 6, 7, 12, 13], found


# ------------------------------------------------- the reader's state stays off H2Stream


def _method_tasks(cls: ast.ClassDef) -> dict[str, set[str]]:
    """For each method of ``cls``, the tasks' prefixes it runs for: its own
    (``reader_`` ...), or, for a private helper, those of every method that calls it
    (to a fixed point); a public method's task is ``"user"``."""
    methods = {
        node.name: node
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    callers: dict[str, set[str]] = {name: set() for name in methods}
    for name, node in methods.items():
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
                and sub.attr in methods
                and sub.attr != name
            ):
                callers[sub.attr].add(name)
    tasks: dict[str, set[str]] = {}
    for name in methods:
        own = next((p for p in TASK_INTERFACE_PREFIXES if name.startswith(p)), None)
        if own is not None:
            tasks[name] = {own}
        elif not _is_private(name):
            tasks[name] = {"user"}
        else:
            tasks[name] = set()
    changed = True
    while changed:
        changed = False
        for name in methods:
            if not _is_private(name):
                continue
            found = set().union(*(tasks[c] for c in callers[name])) if callers[name] else set()
            if found - tasks[name]:
                tasks[name] |= found
                changed = True
    return tasks


def reader_only_fields(source: str, filename: str) -> set[str]:
    """The ``__slots__`` of ``H2Stream`` in ``source`` that only the reader's methods
    touch (besides ``__init__``): state that belongs in the reader's own table, not
    on the stream. A field the reader writes and another task reads is a hand-off
    (headers, chunks, trailers, the end) and is not reported."""
    tree = ast.parse(source, filename)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "H2Stream")
    slots = {
        e.value
        for node in cls.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
        and isinstance(node.value, ast.Tuple | ast.List)
        for e in node.value.elts
        if isinstance(e, ast.Constant) and isinstance(e.value, str)
    }
    tasks = _method_tasks(cls)
    touched_by: dict[str, set[str]] = {name: set() for name in slots}
    for node in cls.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if node.name == "__init__":
            continue
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
                and sub.attr in touched_by
            ):
                touched_by[sub.attr] |= tasks[node.name] or {"?"}
    return {name for name, by in touched_by.items() if by == {"reader_"}}


def test_no_reader_only_state_on_the_stream() -> None:
    """Every H2Stream field the reader touches is also read by another task (a
    hand-off): state only the reader uses lives in the reader, not on the stream."""
    source = STREAM_MODULE.read_text()
    assert reader_only_fields(source, str(STREAM_MODULE)) == set()
    tasks = _method_tasks(
        next(
            n
            for n in ast.parse(source).body
            if isinstance(n, ast.ClassDef) and n.name == "H2Stream"
        )
    )
    assert tasks["reader_deliver_data"] == {"reader_"}
    assert "reader_" in tasks["_consumed"]  # padding, from reader_deliver_data
    assert "user" in tasks["_consumed"]  # and the application's reads


def test_a_planted_reader_only_field_is_caught() -> None:
    """A field only reader_* methods (or helpers only they call) touch is reported; a
    hand-off the stream task reads, or a field another task writes, is not."""
    planted = """
class H2Stream:
    __slots__ = ("_frames_seen", "_credit", "_trailers", "_shared", "stream_id")

    def __init__(self):
        self._frames_seen = 0
        self._credit = 0
        self._trailers = None
        self._shared = 0
        self.stream_id = 1

    @property
    def trailers(self):
        return self._trailers           # the stream task reads the hand-off

    def receive_some(self):
        self._shared -= 1                # the stream task writes it too

    def reader_deliver_data(self, n):
        self._frames_seen += 1           # only the reader: caught
        self._count(n)
        self._shared += n

    def reader_deliver_trailers(self, headers):
        self._trailers = headers

    def _count(self, n):                 # called only by the reader
        self._credit -= n                # so only the reader: caught
"""
    assert reader_only_fields(planted, "planted.py") == {"_frames_seen", "_credit"}
