"""Importing trio_h2t has no process-wide side effects, and its modules are layered.

The layering tests parse each module's imports with ``ast`` and hold them to an
explicit map: which package modules each may import, with the sans-IO modules at
the bottom importing none of the task layer (not even for annotations), and no
import cycle, counting every import: run time, function-local and ``if
TYPE_CHECKING:`` ones (a cycle is named module by module).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import trio_h2t


def test_import_leaves_hpack_logger_level_unchanged() -> None:
    """A fresh interpreter's hpack loggers keep their level across ``import trio_h2t``."""
    code = (
        "import logging\n"
        "before = [logging.getLogger(n).level for n in ('hpack', 'hpack.hpack')]\n"
        "import trio_h2t, trio_h2t._connection\n"
        "after = [logging.getLogger(n).level for n in ('hpack', 'hpack.hpack')]\n"
        "assert before == after == [logging.NOTSET, logging.NOTSET], (before, after)\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "ok"


# -- import layering ---------------------------------------------------------------

_PACKAGE = Path(trio_h2t.__file__).parent

#: The sans-IO layer: no tasks, no transport; the task layer builds on it, never
#: the other way round (``_controlbuf`` uses trio only for its one blocking ``get``).
SANS_IO = frozenset(
    {
        "_config",
        "_controlbuf",
        "_exceptions",
        "_flow",
        "_h2.__init__",
        "_h2.frames",
        "_h2.hpack",
        "_h2.streamstates",
        "_h2.windows",
        "_h2fast",
        "_h2fixes",
        "_h2state",
        "_headers",
        "_items",
        "_pings",
        "_ratelimit",
        "_shared",
        "_statistics",
        "_util",
        "_version",
    }
)

#: Every module of the package and the package modules it may import at run time
#: (function-level imports included). A module missing here fails the test: place
#: it in the map when you add it.
ALLOWED: dict[str, frozenset[str]] = {
    "_version": frozenset(),
    # Plain helpers shared with the gRPC layer and the commands (stdlib only).
    "_shared": frozenset(),
    "_util": frozenset({"_shared"}),
    "_flow": frozenset(),
    "_ratelimit": frozenset(),
    "_headers": frozenset(),
    "_exceptions": frozenset(),
    # The HTTP/2 protocol layer (docs/h2-contract.md): imports none of the rest.
    "_h2.__init__": frozenset(),
    "_h2.frames": frozenset(),
    "_h2.hpack": frozenset(),
    "_h2.streamstates": frozenset(),
    "_h2.windows": frozenset(),
    "_h2fixes": frozenset({"_h2.frames", "_h2.hpack"}),
    "_h2fast": frozenset(
        {"_h2fixes", "_headers", "_h2.frames", "_h2.hpack", "_h2.streamstates", "_h2.windows"}
    ),
    "_h2state": frozenset({"_h2fast", "_h2fixes", "_h2.hpack"}),
    "_items": frozenset(),
    "_outstream": frozenset(),
    # Keepalive decisions (timer, ping policy, age jitter): pure functions of time.
    "_pings": frozenset(),
    "_statistics": frozenset(),
    # Socket options a connection sets on its TCP socket (TCP_USER_TIMEOUT).
    "_sockopts": frozenset(),
    "_controlbuf": frozenset({"_exceptions", "_items"}),
    "_config": frozenset({"_controlbuf"}),
    "_messages": frozenset({"_exceptions"}),
    # What a lower module reaches of a higher one (a stream its core, a view its
    # stream), as protocols; on the sans-IO modules and _messages only.
    "_protocols": frozenset({"_config", "_controlbuf", "_exceptions", "_flow", "_messages"}),
    "_stream": frozenset(
        {
            "_exceptions",
            "_flow",
            "_headers",
            "_items",
            "_messages",
            "_protocols",
            "_util",
            "_streamview",
        }
    ),
    "_streamview": frozenset({"_exceptions", "_protocols", "_util"}),
    # A server's first look at a connection (HTTP/1.x or HTTP/2?), before any core.
    "_sniff": frozenset(),
    # Worker processes sharing a port: SO_REUSEPORT listeners and the supervisor.
    "_workers": frozenset(),
    "_linger": frozenset({"_connection"}),
    "_workerpool": frozenset({"_config", "_server", "_stopping", "_util", "_workers"}),
    # How a serving process stops (trio-h2t serve and serve_worker).
    "_stopping": frozenset({"_server"}),
    # Loopy knows the rest of its connection only through its LoopyCore protocol.
    "_loopy": frozenset(
        {
            "_config",
            "_controlbuf",
            "_exceptions",
            "_h2state",
            "_items",
            "_outstream",
            "_statistics",
            "_sockopts",  # stdlib_socket and trio's wrapper semantics (stream_error, wait_*)
            "_stream",
        }
    ),
    # ConnectionCore's layers, by owner (_lifecycle.py): how it ends, then its streams.
    "_lifecycle": frozenset({"_exceptions", "_h2state", "_pings"}),
    "_streamtable": frozenset({"_items", "_lifecycle", "_stream"}),
    "_connection": frozenset(
        {
            "_config",
            "_controlbuf",
            "_exceptions",
            "_flow",
            "_h2state",
            "_items",
            "_loopy",
            "_messages",
            "_pings",  # the drain PING (sans-IO constants)
            "_sockopts",  # TCP_USER_TIMEOUT with keepalive
            "_statistics",
            "_stream",
            "_streamtable",
        }
    ),
    "_reader": frozenset(
        {
            "_connection",
            "_exceptions",
            "_flow",
            "_h2state",
            "_items",
            "_pings",
            "_ratelimit",
            "_sockopts",  # stdlib_socket and trio's wrapper semantics (stream_error, wait_*)
            "_stream",
        }
    ),
    # The keepalive task: sleeps and acts on a core; the decisions are _pings'.
    "_keepalive": frozenset({"_config", "_connection", "_exceptions", "_items", "_pings"}),
    # One connection's tasks, started and ended the same way on both sides.
    "_runtime": frozenset({"_connection", "_exceptions", "_keepalive", "_loopy", "_reader"}),
    "_client": frozenset(
        {
            "_config",
            "_connection",
            "_exceptions",
            "_headers",
            "_items",
            "_linger",
            "_messages",
            "_runtime",
            "_statistics",
            "_stream",
            "_util",
        }
    ),
    "_server": frozenset(
        {
            "_config",
            "_connection",
            "_exceptions",
            "_items",
            "_linger",
            "_messages",
            "_reader",
            "_shared",
            "_runtime",
            "_sniff",
            "_statistics",
            "_stream",
            "_util",
            "_workers",
        }
    ),
    # ``check`` imports trio_h2t.testing's runner (and Hypothesis) only when it runs.
    "_cli": frozenset(
        {
            "_client",
            "_config",
            "_headers",
            "_server",
            "_stopping",
            "_shared",
            "_stream",
            "_workers",
            "testing._check",
        }
    ),
    "__init__": frozenset(
        {
            "_client",
            "_config",
            "_exceptions",
            "_messages",
            "_server",
            "_statistics",
            "_stream",
            "_streamview",
            "_util",
            "_version",
            "_workerpool",
        }
    ),
    "__main__": frozenset({"_cli"}),
    "testing.__init__": frozenset(
        {
            "_shared",
            "_util",
            "testing._check",
            "testing._client_machine",
            "testing._frames",
            "testing._machine",
            "testing._pairs",
            "testing._run",
            "testing._strategies",
        }
    ),
    # trio_h2t.testing (docs/testing.md): on top of the public API's modules.
    "testing._pairs": frozenset({"_client", "_config", "_server"}),
    "testing._strategies": frozenset({"_config", "_controlbuf", "testing._pairs"}),
    "testing._run": frozenset(),
    "testing._machine": frozenset(
        {"_client", "_exceptions", "_stream", "testing._pairs", "testing._strategies"}
    ),
    "testing._client_machine": frozenset(
        {
            "_client",
            "_exceptions",
            "_stream",
            "testing._machine",
            "testing._pairs",
            "testing._strategies",
        }
    ),
    "testing._frames": frozenset({"_h2.frames", "testing._strategies"}),
    # the in-memory target serves with trio_h2t's own server
    "testing._check": frozenset({"_config", "_server", "_stream", "testing._frames"}),
}

#: Imports made only for annotations (under ``if TYPE_CHECKING:``) beyond ALLOWED.
#: They count for the cycle check all the same, so none may point upwards: a lower
#: module that needs a higher one's type names a narrow protocol instead
#: (``_protocols.py``, ``_items.ItemStream``).
TYPE_ONLY_ALLOWED: dict[str, frozenset[str]] = {
    # an entry holds its stream; only loopy (above both) makes entries
    "_outstream": frozenset({"_items", "_stream"}),
    "_reader": frozenset({"_stream"}),  # the streams whose views hold its buffer
}


def _module_name(path: Path, root: Path = _PACKAGE) -> str:
    rel = path.relative_to(root).with_suffix("")
    return ".".join(rel.parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _from_names(module: list[str], node: ast.ImportFrom, root: Path) -> list[str]:
    """What ``from <module> import a, b`` imports: the submodules ``a`` and ``b`` of a
    subpackage (``from ._h2 import frames`` is ``_h2.frames``), else the module."""
    subs = [
        alias.name for alias in node.names if (root.joinpath(*module, alias.name + ".py")).is_file()
    ]
    if subs and (root.joinpath(*module, "__init__.py")).is_file():
        return [".".join([*module, sub]) for sub in subs]
    return [".".join(module)]


def _package_imports(path: Path, root: Path = _PACKAGE) -> tuple[set[str], set[str]]:
    """(run-time, annotation-only) package modules ``path`` (under ``root``) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    runtime: set[str] = set()
    type_only: set[str] = set()
    base = _module_name(path, root).split(".")[:-1]  # the importing module's package

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        target = runtime if not typing_only else type_only
        if isinstance(node, ast.ImportFrom):
            if node.level:
                package = base[: len(base) - (node.level - 1)]
                if node.module is None:
                    names = [".".join([*package, alias.name]) for alias in node.names]
                else:
                    names = _from_names([*package, *node.module.split(".")], node, root)
                target.update(names)
            elif node.module and node.module.startswith("trio_h2t."):
                target.add(node.module.removeprefix("trio_h2t."))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("trio_h2t."):
                    target.add(alias.name.removeprefix("trio_h2t."))
        for sub in ast.iter_child_nodes(node):
            visit(sub, typing_only)

    visit(tree, False)
    return runtime, type_only - runtime


def _graph(root: Path = _PACKAGE) -> dict[str, tuple[set[str], set[str]]]:
    # The transport's own modules; the gRPC layer (``trio_h2t.grpc``) and the interop
    # service on it (``trio_h2t.interop``) import only public names, which
    # tests/grpc_layer and tests/interop/test_interop_service.py check.
    return {
        _module_name(path, root): _package_imports(path, root)
        for path in sorted(root.rglob("*.py"))
        if not {"grpc", "interop"} & set(path.relative_to(root).parts)
    }


def test_every_module_has_a_place_in_the_layering() -> None:
    """Each module of the package is listed in ALLOWED, and nothing listed is gone."""
    assert set(_graph()) == set(ALLOWED)


def test_modules_import_only_what_their_layer_allows() -> None:
    """Each module's package imports (parsed with ast) are within its allowed set."""
    for module, (runtime, type_only) in _graph().items():
        extra = runtime - ALLOWED[module]
        assert not extra, f"{module} imports {sorted(extra)} at run time"
        extra = type_only - ALLOWED[module] - TYPE_ONLY_ALLOWED.get(module, frozenset())
        assert not extra, f"{module} imports {sorted(extra)} for annotations"


def test_sans_io_modules_never_import_the_task_layer() -> None:
    """The sans-IO modules import only each other, at run time and for annotations."""
    graph = _graph()
    for module in SANS_IO:
        runtime, type_only = graph[module]
        assert runtime <= SANS_IO, f"{module} imports {sorted(runtime - SANS_IO)}"
        assert type_only <= SANS_IO, (
            f"{module} imports {sorted(type_only - SANS_IO)} for annotations"
        )
    for module, allowed in ALLOWED.items():
        if module in SANS_IO:
            assert allowed <= SANS_IO, f"the map lets {module} import the task layer"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """The first import cycle of ``graph`` (module -> the modules it imports), as
    ``[a, b, ..., a]``, or None. Depth first, in sorted order (the same cycle each run)."""
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for dep in sorted(graph.get(module, ())):
            cycle = walk(dep, [*path, module])
            if cycle is not None:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = walk(module, [])
        if cycle is not None:
            return cycle
    return None


def _every_import(root: Path = _PACKAGE) -> dict[str, set[str]]:
    """Each module's package imports of every kind: run time, function-local and
    ``if TYPE_CHECKING:`` ones alike."""
    return {module: runtime | type_only for module, (runtime, type_only) in _graph(root).items()}


def test_no_import_cycles() -> None:
    """The package's import graph has no cycle, even counting the imports made only
    for annotations (under ``if TYPE_CHECKING:``) and the function-local ones: each
    arrow goes down a floor or along one (docs/architecture.md, "The module map")."""
    cycle = find_cycle(_every_import())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_check_names_a_planted_cycle(tmp_path: Path) -> None:
    """A cycle closed only by a TYPE_CHECKING import and a function-local import is
    found, and named module by module (the check is not vacuous)."""
    root = tmp_path / "trio_h2t"
    root.mkdir()
    (root / "__init__.py").write_text("", encoding="utf-8")
    (root / "_low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._high import H\n",
        encoding="utf-8",
    )
    (root / "_mid.py").write_text("from ._low import x\n", encoding="utf-8")
    (root / "_high.py").write_text("def f():\n    from ._mid import y\n", encoding="utf-8")
    cycle = find_cycle(_every_import(root))
    assert cycle == ["_high", "_mid", "_low", "_high"]
    # Without the annotation-only import there is none.
    (root / "_low.py").write_text("x = 1\n", encoding="utf-8")
    assert find_cycle(_every_import(root)) is None


def test_layering_checker_sees_each_kind_of_import(tmp_path: Path) -> None:
    """The ast walk finds relative, absolute, function-level and TYPE_CHECKING imports."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from ._a import x\n"
        "from . import _b\n"
        "import trio_h2t._c\n"
        "if TYPE_CHECKING:\n"
        "    from ._d import y\n"
        "def f():\n"
        "    from ._e import z\n"
    )
    root = tmp_path / "trio_h2t"
    root.mkdir()
    probe = root / "_probe.py"
    probe.write_text(source, encoding="utf-8")
    runtime, type_only = _package_imports(probe, root)
    assert runtime == {"_a", "_b", "_c", "_e"}
    assert type_only == {"_d"}
