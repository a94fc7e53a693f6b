"""The docs name exactly the routes a host with every bundled plugin registers.

The convention (stated in docs/http.md, "How the docs name routes"): a route is named by its
method and its full path, either as a route-table row ``| GET | `/full/path` | ...`` (several
methods as ``GET/PUT`` or ``GET / PUT``) or in running text and code as ``GET /full/path``.
Path parameters are written ``{name}`` (``:name``, ``<name>`` and ``$VAR`` segments are read as
parameters too); a query string after ``?`` is ignored. Paths are matched by shape: parameter
names do not have to agree with the handler's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from innkeeper_core.app import CONTAINER, create_app
from innkeeper_core.config import HostConfig
from innkeeper_core.testing import SavedPluginModules

DOCS = Path(__file__).resolve().parents[2] / "docs"
_METHOD = r"(?:GET|HEAD|POST|PUT|PATCH|DELETE)"
_METHODS = rf"{_METHOD}(?:\s*/\s*{_METHOD})*"
# | GET | `/path` |    or    | GET / PUT | `/path?x=` |
_TABLE_ROW = re.compile(rf"^\s*\|\s*(?P<methods>{_METHODS})\s*\|\s*`(?P<path>/[^`\s]*)`")
# `GET /path` inline, or GET /path at the start of a code line or after "curl ... -X"
_INLINE = re.compile(rf"(?<![\w/])(?P<methods>{_METHOD})\s+(?P<path>/[A-Za-z0-9_\-{{}}:<>$./]*)")


@dataclass(frozen=True, slots=True)
class Mention:
    method: str
    shape: str
    written: str
    doc: str
    line: int


def _segment_shape(segment: str) -> str:
    if (
        (segment.startswith("{") and segment.endswith("}"))
        or (segment.startswith("<") and segment.endswith(">"))
        or segment.startswith((":", "$"))
    ):
        return "{}"
    return segment


def shape_of(path: str) -> str:
    """The path with every parameter segment replaced by ``{}`` and the query dropped."""
    path = path.split("?", 1)[0].rstrip(".")
    if len(path) > 1:
        path = path.rstrip("/")
    return "/".join(_segment_shape(s) for s in path.split("/"))


def doc_mentions() -> list[Mention]:
    mentions: list[Mention] = []
    for doc in sorted(DOCS.rglob("*.md")):
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            row = _TABLE_ROW.match(line)
            found = (
                [(row["methods"], row["path"])]
                if row
                else [(m["methods"], m["path"]) for m in _INLINE.finditer(line)]
            )
            for methods, path in found:
                for method in re.split(r"\s*/\s*", methods):
                    page = doc.relative_to(DOCS).as_posix()
                    mentions.append(Mention(method, shape_of(path), path, page, number))
    return mentions


@pytest.fixture
async def live_routes(tmp_path: Path) -> AsyncIterator[set[tuple[str, str, str]]]:
    saved = SavedPluginModules()
    app = create_app(HostConfig(data_dir=str(tmp_path / "data"), port=0))
    server = TestServer(app)
    await server.start_server()
    try:
        table = app[CONTAINER].registries().routes
        yield {
            (e.method, shape_of(e.template), e.template + f"  ({e.owner})") for e in table.entries
        }
    finally:
        await server.close()
        saved.restore()


def test_the_convention_reads_tables_and_text() -> None:
    assert shape_of("/a/:id/b?x=") == "/a/{}/b"
    assert shape_of("/host/api/sessions/$S/fork") == "/host/api/sessions/{}/fork"
    row = _TABLE_ROW.match("| GET / PUT | `/x/{id}?q=` | answer |")
    assert row and row["methods"] == "GET / PUT" and row["path"] == "/x/{id}?q="
    inline = [m["path"] for m in _INLINE.finditer("then `GET /v/<id>` and POST /w.")]
    assert inline == ["/v/<id>", "/w."]


async def test_every_route_a_doc_names_is_registered(
    live_routes: set[tuple[str, str, str]],
) -> None:
    registered = {(method, shape) for method, shape, _ in live_routes}
    missing = [
        f"docs/{m.doc}:{m.line}: {m.method} {m.written} is not a registered route"
        for m in doc_mentions()
        if (m.method, m.shape) not in registered
    ]
    assert not missing, "docs name routes that do not exist:\n" + "\n".join(missing)


async def test_every_registered_route_is_documented(
    live_routes: set[tuple[str, str, str]],
) -> None:
    mentions = doc_mentions()
    documented = {(m.method, m.shape) for m in mentions}
    undocumented = []
    for method, shape, described in sorted(live_routes, key=lambda r: (r[1], r[0])):
        if (method, shape) in documented:
            continue
        # Point at the page that documents this route's nearest relatives.
        undocumented.append(
            f"{method} {described} is documented nowhere; add it to {_page_for(shape, mentions)}"
        )
    assert not undocumented, "registered routes missing from docs/:\n" + "\n".join(undocumented)


def _page_for(shape: str, mentions: list[Mention]) -> str:
    """The page documenting most routes that share the longest path prefix with ``shape``."""
    segments = shape.split("/")
    for length in range(len(segments) - 1, 1, -1):
        prefix = "/".join(segments[:length]) + "/"
        pages = Counter(m.doc for m in mentions if m.shape.startswith(prefix))
        if pages:
            return f"docs/{pages.most_common(1)[0][0]}"
    return "the docs/ page of its area (docs/writing-plugins.md for an example plugin)"
