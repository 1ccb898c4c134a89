"""The public surface is exactly what ``trio_h2t/__init__.py`` exports."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import trio_h2t
import trio_h2t.grpc
import trio_h2t.testing

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
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == module.__name__, name  # type: ignore[attr-defined]


def test_private_modules_declare_all() -> None:
    """Every private module that defines public names declares ``__all__``."""
    for info in pkgutil.walk_packages(trio_h2t.__path__, "trio_h2t."):
        if info.name.rsplit(".", 1)[-1] in {"__main__"}:
            continue
        mod = importlib.import_module(info.name)
        assert hasattr(mod, "__all__") or info.name.endswith("_version"), info.name


def test_exceptions_follow_trio_vocabulary() -> None:
    """Errors we cause subclass ClosedResourceError; errors from outside, Broken."""
    import trio

    assert issubclass(trio_h2t.ConnectionClosingError, trio.ClosedResourceError)
    for cls in (
        trio_h2t.ConnectionLostError,
        trio_h2t.H2ProtocolError,
        trio_h2t.StreamResetError,
        trio_h2t.StreamRefusedError,
    ):
        assert issubclass(cls, trio.BrokenResourceError), cls
    assert trio_h2t.StreamRefusedError.retryable
    assert not trio_h2t.StreamResetError.retryable
