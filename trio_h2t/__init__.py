"""trio_h2t: a Trio-native, structured-concurrency HTTP/2 transport.

General layout: every public name lives in a private ``_module`` and is re-exported
here with ``from ._x import Y as Y``; tracebacks say ``trio_h2t.Y``. Nothing else is
public. ``tests/test_exports.py`` checks it.
"""

from ._exceptions import (
    ConnectionClosingError as ConnectionClosingError,
    ConnectionLostError as ConnectionLostError,
    H2ProtocolError as H2ProtocolError,
    LocalProtocolError as LocalProtocolError,
    RemoteProtocolError as RemoteProtocolError,
    StreamRefusedError as StreamRefusedError,
    StreamResetError as StreamResetError,
)
from ._util import fixup_module_metadata as _fixup_module_metadata
from ._version import __version__ as __version__

__all__ = [
    "ConnectionClosingError",
    "ConnectionLostError",
    "H2ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "StreamRefusedError",
    "StreamResetError",
    "__version__",
]

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
