"""The public surface is exactly what ``trio_h2t/__init__.py`` exports."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import typing

import pytest
from h2.errors import ErrorCodes

import trio_h2t
import trio_h2t.grpc
import trio_h2t.testing
from trio_h2t._connection import ConnectionCore
from trio_h2t._stream import TASK_INTERFACE_PREFIXES
from trio_h2t._util import NoPublicConstructor

PUBLIC_MODULES = [trio_h2t, trio_h2t.testing, trio_h2t.grpc]


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_all_names_exist_and_are_public(module: object) -> None:
    """Every name in ``__all__`` exists, and no private name is listed."""
    names = module.__all__  # type: ignore[attr-defined]
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(module, name), name
        assert not name.startswith("_") or name == "__version__", name


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_public_namespace_is_exactly_all(module: object) -> None:
    """Nothing public leaks into the namespace besides ``__all__`` and subpackages."""
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(module.__all__) - {"__version__"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_reexported_names_report_public_module(module: object) -> None:
    """Tracebacks say ``trio_h2t.X``, not ``trio_h2t._private.X``."""
    for name in module.__all__:  # type: ignore[attr-defined]
        value = getattr(module, name)
        if value is ErrorCodes:  # h2's enum, re-exported unchanged (h2's class untouched)
            assert value.__module__ == "h2.errors"
            continue
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == module.__name__, name  # type: ignore[attr-defined]


def test_private_modules_declare_all() -> None:
    """Every private module that defines public names declares ``__all__``."""
    for info in pkgutil.walk_packages(trio_h2t.__path__, "trio_h2t."):
        if info.name.rsplit(".", 1)[-1] in {"__main__"}:
            continue
        if info.name.endswith("_pb2"):
            continue  # protoc's output (scripts/gen_health.py, scripts/gen_interop_protos.py)
        mod = importlib.import_module(info.name)
        assert hasattr(mod, "__all__") or info.name.endswith("_version"), info.name


def test_exceptions_follow_trio_vocabulary() -> None:
    """Errors we cause subclass ClosedResourceError; errors from outside, Broken; every
    exported error class says whether its work may be retried."""
    import trio

    assert issubclass(trio_h2t.ConnectionClosingError, trio.ClosedResourceError)
    for cls in (
        trio_h2t.ConnectionLostError,
        trio_h2t.GoAwayError,
        trio_h2t.RemoteProtocolError,
        trio_h2t.StreamResetError,
        trio_h2t.StreamRefusedError,
    ):
        assert issubclass(cls, trio.BrokenResourceError), cls
    # Our own framing failure is neither: nothing outside broke it, nor did we close it.
    assert issubclass(trio_h2t.LocalProtocolError, trio_h2t.H2ProtocolError)
    assert not issubclass(
        trio_h2t.LocalProtocolError, trio.BrokenResourceError | trio.ClosedResourceError
    )
    # A GOAWAY is the peer ending the connection: a ConnectionLostError, yet what it
    # refused was never processed.
    assert issubclass(trio_h2t.GoAwayError, trio_h2t.ConnectionLostError)
    goaway = trio_h2t.GoAwayError(ErrorCodes.ENHANCE_YOUR_CALM, 7, b"slow down")
    assert (goaway.error_code, goaway.last_stream_id, goaway.debug_data) == (
        ErrorCodes.ENHANCE_YOUR_CALM,
        7,
        b"slow down",
    )
    assert goaway.retryable
    errors = [
        value
        for name in trio_h2t.__all__
        if inspect.isclass(value := getattr(trio_h2t, name)) and issubclass(value, Exception)
    ]
    assert trio_h2t.GoAwayError in errors
    for error in errors:
        assert isinstance(getattr(error, "retryable", None), bool), error
    assert trio_h2t.StreamRefusedError.retryable
    assert trio_h2t.ConnectionClosingError.retryable
    assert not trio_h2t.StreamResetError.retryable
    assert not trio_h2t.ConnectionLostError.retryable
    assert not trio_h2t.H2ProtocolError.retryable


# -- every annotation of a public name names only public types ----------------------

#: Top-level packages whose types a public annotation may name besides trio_h2t's own
#: exports: the standard library (``typing``, ``collections.abc``, ``ssl``...) and trio;
#: and for ``trio_h2t.testing``, Hypothesis (its strategies and machines) and hyperframe
#: (the frames ``WireFrame.from_frame`` takes).
_ALLOWED_PACKAGES = frozenset(sys.stdlib_module_names) | {
    "trio",
    "outcome",
    "hypothesis",
    "hyperframe",
}


def _exported() -> set[int]:
    return {id(getattr(m, name)) for m in PUBLIC_MODULES for name in m.__all__}


def _leaf_problems(tp: object, where: str, exported: set[int]) -> list[str]:
    """Every type named in annotation ``tp`` that is not public, as messages."""
    if tp is None or tp is type(None) or tp is Ellipsis or tp is typing.Any:
        return []
    if isinstance(tp, typing.TypeVar):
        bounds = [tp.__bound__] if tp.__bound__ is not None else list(tp.__constraints__)
        return [p for b in bounds for p in _leaf_problems(b, where, exported)]
    if isinstance(tp, typing.ParamSpec | typing.TypeVarTuple):
        return []
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return []
    if origin is not None:
        problems = _leaf_problems(origin, where, exported)
        for arg in typing.get_args(tp):
            if isinstance(arg, list):  # Callable[[A, B], R]
                for a in arg:
                    problems += _leaf_problems(a, where, exported)
            else:
                problems += _leaf_problems(arg, where, exported)
        return problems
    if isinstance(tp, typing.ForwardRef | str):
        return [f"{where}: unresolved annotation {tp!r}"]
    if typing.get_origin(tp) is not None:
        return []
    module = getattr(tp, "__module__", None)
    if not isinstance(module, str):
        return [f"{where}: {tp!r} has no module"]
    if id(tp) in exported:  # trio_h2t's own, or h2's ErrorCodes re-exported as is
        return []
    if module.split(".")[0] == "trio_h2t":
        return [f"{where}: {tp!r} is not exported"]
    if module.split(".")[0] in _ALLOWED_PACKAGES:
        return []
    return [f"{where}: {tp!r} (from {module}) is not a public type"]


def _private_modules() -> list[object]:
    return [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(trio_h2t.__path__, "trio_h2t.")
        if not info.name.endswith("__main__")
    ]


def _defining_globals(obj: object) -> dict[str, object]:
    """The namespace of the module that defines ``obj`` (``__module__`` says
    ``trio_h2t`` after the re-export fix-up, so it is found through the code)."""
    if inspect.isfunction(obj):
        found = inspect.unwrap(obj).__globals__
        if str(found.get("__name__", "")).startswith("trio_h2t"):
            return dict(found)
        # A wrapper made elsewhere (Hypothesis's @composite): found by export below.
    for member in vars(obj).values():
        fn = getattr(member, "__func__", member)
        fn = getattr(fn, "fget", fn)
        if (
            inspect.isfunction(fn)
            and fn.__qualname__.startswith(obj.__qualname__ + ".")  # type: ignore[attr-defined]
            and fn.__code__.co_filename != "<string>"  # not made by dataclasses
        ):
            return dict(inspect.unwrap(fn).__globals__)
    for module in _private_modules():
        if not module.__name__.rsplit(".", 1)[-1].startswith("_"):  # type: ignore[attr-defined]
            continue  # a package re-exporting it, not where it is defined
        if any(getattr(module, n, None) is obj for n in getattr(module, "__all__", ())):
            return dict(vars(module))
    raise AssertionError(f"cannot find where {obj!r} is defined")


def _hints(obj: object, home: dict[str, object]) -> dict[str, object]:
    """``typing.get_type_hints`` of ``obj``, with names from its defining module
    ``home``; a name it imports only under TYPE_CHECKING (a cycle) is taken from the
    ``__all__`` of the private module that exports it."""
    namespace: dict[str, object] = {}
    for module in _private_modules():
        namespace.update({n: getattr(module, n) for n in getattr(module, "__all__", ())})
    namespace.update(home)
    return typing.get_type_hints(obj, globalns=namespace)


def _public_annotations() -> list[tuple[str, object]]:
    """(where, annotation) for every annotation a user of the public API can see."""
    found: list[tuple[str, object]] = []

    def add_callable(fn: object, where: str) -> None:
        for arg, tp in _hints(fn, _defining_globals(fn)).items():
            found.append((f"{where}({arg})", tp))

    for module in PUBLIC_MODULES:
        for name in module.__all__:
            value = getattr(module, name)
            where = f"{module.__name__}.{name}"
            if inspect.isfunction(value):
                add_callable(value, where)
            elif inspect.isclass(value):
                # Class-level annotations: dataclass fields and declared attributes.
                # Only the class's own (a base from another package, such as
                # Hypothesis's RuleBasedStateMachine, has its own private names).
                own = type(
                    "_Own",
                    (),
                    {"__annotations__": vars(value).get("__annotations__", {})},
                )
                for attr, tp in _hints(own, _defining_globals(value)).items():
                    if not attr.startswith("_"):
                        found.append((f"{where}.{attr}", tp))
                private_init = isinstance(value, NoPublicConstructor)
                for attr, member in vars(value).items():
                    if attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__")):
                        continue
                    if value is trio_h2t.H2Stream and attr.startswith(TASK_INTERFACE_PREFIXES):
                        continue  # the tasks' interface, not the public API
                    if attr == "__init__" and private_init:
                        continue
                    if isinstance(member, property):
                        if member.fget is not None:
                            add_callable(member.fget, f"{where}.{attr}")
                    elif isinstance(member, staticmethod | classmethod):
                        add_callable(member.__func__, f"{where}.{attr}")
                    elif inspect.isfunction(member):
                        if not str(member.__module__).startswith("trio_h2t"):
                            continue  # dataclasses' __getstate__ of a slotted class
                        add_callable(member, f"{where}.{attr}")
            elif typing.get_origin(value) is not None:  # an alias such as Handler
                found.append((where, value))
    return found


def test_annotation_walk_sees_the_api() -> None:
    """The walk below finds signatures, properties and dataclass fields (no silent pass)."""
    wheres = {where for where, _ in _public_annotations()}
    assert "trio_h2t.open_connection(ssl_context)" in wheres
    assert "trio_h2t.H2Server.port(return)" in wheres
    assert "trio_h2t.Response.headers" in wheres
    assert "trio_h2t.Handler" in wheres
    problems = _leaf_problems(ConnectionCore, "probe", _exported())
    assert problems == [f"probe: {ConnectionCore!r} is not exported"]


def test_public_annotations_name_only_public_types() -> None:
    """Every annotation of a public name (function and method signatures, properties,
    dataclass fields) names only builtins, stdlib, trio, or trio_h2t's exports."""
    exported = _exported()
    problems = [
        p for where, tp in _public_annotations() for p in _leaf_problems(tp, where, exported)
    ]
    assert problems == []


def test_error_codes_is_h2s_enum() -> None:
    """``trio_h2t.ErrorCodes`` is h2's enum, and ``error_code`` attributes hold its members."""
    assert trio_h2t.ErrorCodes is ErrorCodes
    exc = trio_h2t.StreamResetError(1, 8)
    assert exc.error_code is trio_h2t.ErrorCodes.CANCEL
    assert trio_h2t.StreamResetError(1, 0xBEEF).error_code == 0xBEEF  # unknown: a plain int
