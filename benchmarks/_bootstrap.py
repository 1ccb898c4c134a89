"""Run as a script (``python benchmarks/X.py``), a benchmark imports its siblings as
``benchmarks.*``: importing this module (the script's folder is first on
``sys.path``) registers that folder's package as ``benchmarks`` first. Written once
here for every script (issue 28); a script imported as ``benchmarks.X`` skips it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if "benchmarks" not in sys.modules:
    _init = Path(__file__).resolve().with_name("__init__.py")
    _spec = importlib.util.spec_from_file_location(
        "benchmarks", _init, submodule_search_locations=[str(_init.parent)]
    )
    assert _spec is not None
    assert _spec.loader is not None
    sys.modules["benchmarks"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["benchmarks"])
