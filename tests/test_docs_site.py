"""The documentation site builds with warnings as errors, and every internal link in it
resolves.

The build is the README's command (``python -m sphinx -W -n -b html docs OUT``): MyST
pages, autodoc of the public API, nitpicky cross-references, Graphviz diagrams. Then
every ``href`` of every page that points inside the site (a page, or a page and an
anchor) is followed: the page must exist and the anchor must be an ``id`` on it.
"""

from __future__ import annotations

import dataclasses
import html.parser
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import trio_h2t
import trio_h2t.grpc
import trio_h2t.testing

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


class _Page(html.parser.HTMLParser):
    """The ids (anchors) a page defines and the hrefs and srcs it uses."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name"):
                self.ids.add(value)
            elif (name == "href" and tag == "a") or (name == "src" and tag == "img"):
                self.links.append(value)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "-n", "-b", "html", str(DOCS), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, f"sphinx failed:\n{result.stdout}\n{result.stderr}"
    return out


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_every_internal_link_and_anchor_resolves(site: Path) -> None:
    """Every link between pages (and to an anchor) of the built site lands on something."""
    pages = {p: _parse(p) for p in site.glob("**/*.html")}
    assert len(pages) > 10
    broken = []
    checked = 0
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("mailto:"):
                continue  # the theme's footer credits; the pages themselves have none
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {link} (no such file)")
                continue
            checked += 1
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(site)}: {link} (no such anchor)")
    assert checked > 100
    assert not broken, "\n".join(broken)


def test_the_pages_link_nothing_outside_the_site(site: Path) -> None:
    """The pages' own text points nowhere outside the repository (the theme's footer
    credits aside)."""
    outside = []
    for path in site.glob("*.html"):
        article = path.read_text(encoding="utf-8").partition('<article role="main"')[2]
        article = article.partition("</article>")[0]
        page = _Page()
        page.feed(article)
        outside += [f"{path.name}: {link}" for link in page.links if urlsplit(link).scheme]
    assert not outside, "\n".join(outside)


@pytest.mark.parametrize(
    ("module", "page"),
    [
        (trio_h2t, "api.md"),
        (trio_h2t.grpc, "api-grpc.md"),
        (trio_h2t.testing, "api-testing.md"),
    ],
)
def test_the_api_reference_covers_all_exports(module: object, page: str) -> None:
    """Each name in ``__all__`` has an autodoc entry on its API page."""
    text = (DOCS / page).read_text(encoding="utf-8")
    name = getattr(module, "__name__", "")
    missing = [n for n in getattr(module, "__all__", []) if f":: {name}.{n}\n" not in text]
    assert not missing


def test_the_configuration_page_lists_every_field_with_its_default() -> None:
    """docs/configuration.md has a table row for each ``TransportConfig`` field that
    gives the field's actual default, and no row for a field that does not exist."""
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    rows = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")}
    fields = dataclasses.fields(trio_h2t.TransportConfig)
    wrong = [
        f.name for f in fields if f"| `{f.name}` | `{f.default!r}` |" not in rows.get(f.name, "")
    ]
    assert not wrong, f"missing, or with a stale default: {wrong}"
    assert sorted(rows) == sorted(f.name for f in fields)


def test_design_pages_draw_their_diagrams(site: Path) -> None:
    """The architecture page carries its Graphviz diagrams, and "Who wakes whom" its
    sequence of one request, rendered at build time."""
    text = (site / "architecture.html").read_text(encoding="utf-8")
    assert text.count('class="graphviz') >= 2
    assert 'class="graphviz' in (site / "wakeups.html").read_text(encoding="utf-8")


#: The public modules and their API pages (the reference's coverage, below).
REFERENCE_MODULES = {
    "trio_h2t": "api.html",
    "trio_h2t.grpc": "api-grpc.html",
    "trio_h2t.grpc.health": "api-grpc.html",
    "trio_h2t.grpc.reflection": "api-grpc.html",
    "trio_h2t.testing": "api-testing.html",
}


def reference_names(modules: dict[str, str] = REFERENCE_MODULES) -> dict[str, str]:
    """``{dotted name: page}`` the reference must define: every name in each module's
    ``__all__``, the public methods (inherited from trio_h2t's own bases too) of its
    classes, and the members of its enums."""
    import enum
    import importlib
    import inspect

    from trio_h2t._stream import TASK_INTERFACE_PREFIXES

    names: dict[str, str] = {}
    for module_name, page in modules.items():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name.startswith("__"):
                continue
            full = f"{module_name}.{name}"
            names[full] = page
            obj = getattr(module, name)
            if not inspect.isclass(obj) or not obj.__module__.startswith("trio_h2t"):
                continue
            if issubclass(obj, enum.Enum):
                names.update({f"{full}.{member.name}": page for member in obj})
                continue
            for klass in obj.__mro__:
                if not klass.__module__.startswith("trio_h2t"):
                    continue
                for attr, value in vars(klass).items():
                    if attr.startswith("_") or not inspect.isfunction(value):
                        continue
                    if klass.__name__ == "H2Stream" and attr.startswith(TASK_INTERFACE_PREFIXES):
                        continue  # the tasks' interface, kept out of the reference
                    if value.__doc__ is None or issubclass(obj, BaseException):
                        continue  # autodoc lists documented methods (and errors' own docs)
                    if any(a.startswith("hypothesis_stateful") for a in vars(value)):
                        continue  # a state machine's rules: Hypothesis calls them, not you
                    names[f"{full}.{attr}"] = page
    return names


def missing_from_reference(site: Path, names: dict[str, str]) -> list[str]:
    """The names without an entry (an ``id``) on their page of the built site."""
    ids: dict[str, set[str]] = {}
    for page in set(names.values()):
        ids[page] = _parse(site / page).ids
    return sorted(name for name, page in names.items() if name not in ids[page])


def test_every_public_name_is_in_the_reference(site: Path) -> None:
    """Each public name, method (``.open()`` of the gRPC methods included), enum member
    (``StatusCode.NOT_FOUND``...) and the health and reflection modules' names has an
    entry on its API page."""
    names = reference_names()
    for name in (
        "trio_h2t.grpc.UnaryUnaryMethod.open",
        "trio_h2t.grpc.StatusCode.NOT_FOUND",
        "trio_h2t.grpc.health.HealthServicer",
        "trio_h2t.H2Stream.receive_into",
    ):
        assert name in names, name
    missing = missing_from_reference(site, names)
    assert not missing, f"public names with no entry in the API reference: {missing}"
