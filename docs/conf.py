"""Sphinx configuration: `python -m sphinx -W -n -b html docs docs/_build/html`.

Nothing here reaches the network: no intersphinx inventories, no CDN; diagrams are
drawn at build time by Graphviz's ``dot`` (Debian's ``graphviz``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trio_h2t  # noqa: E402

project = "trio_h2t"
author = "the trio_h2t authors"
copyright = "the trio_h2t authors"
release = trio_h2t.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.graphviz",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
graphviz_output_format = "svg"
html_theme = "furo"
# Local CSS only (nothing fetched): phone widths, diagrams (_static/custom.css says why).
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_title = f"trio_h2t {release}"
autodoc_member_order = "bysource"
autodoc_typehints = "description"

# No intersphinx (the build may not reach the network): names from the standard
# library, trio and h2 stay plain text. Everything of trio_h2t must resolve.
nitpick_ignore_regex = [
    ("py:.*", r"(collections\.abc|typing|ssl|os|pathlib|contextlib|trio|h2)(\..*)?"),
    # trio_h2t.testing's signatures name Hypothesis's and hyperframe's types.
    ("py:.*", r"(hypothesis|hyperframe|st)\..*"),
    # trio_h2t.grpc.health's and .reflection's signatures name protobuf's types.
    ("py:.*", r"(google\.protobuf|grpc\.health|grpc\.reflection|descriptor_pool)\..*"),
    ("py:.*", r"(bytes|bytearray|memoryview|str|int|float|bool|object|None)"),
    ("py:exc", r"[A-Z][A-Za-z]*(Error|Exception|Interrupt)"),  # builtin exceptions
]


def _skip_task_interface(
    app: object, what: str, name: str, obj: object, skip: bool, options: object
) -> bool | None:
    # H2Stream's tasks' interface (reader_*, loopy_*, ...) is not the public API.
    from trio_h2t._stream import TASK_INTERFACE_PREFIXES

    if (
        what == "class"
        and name.startswith(TASK_INTERFACE_PREFIXES)
        and name in vars(trio_h2t.H2Stream)
    ):
        return True
    return None


def setup(app: object) -> None:
    app.connect("autodoc-skip-member", _skip_task_interface)  # type: ignore[attr-defined]


napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Type variables and private aliases in signatures, which have no page of their own.
nitpick_ignore_regex += [
    ("py:class", r"trio_h2t\.(grpc\.)?_\w+\.(T|Req|Resp)"),
    ("py:class", r"(CancelKind|HandlerFn|Serializer|Deserializer|HeaderBlock|ExpectKind)"),
]
