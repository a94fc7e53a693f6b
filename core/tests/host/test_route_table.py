"""The route table's matching, precedence, reverse routing and copy-on-write behaviour."""

from __future__ import annotations

import pytest
from aiohttp import web

from innkeeper_core.http.routes import Match, MethodNotAllowed, RouteTable, TemplateError


async def handler(request: web.Request) -> web.StreamResponse:
    return web.Response()


def table(*routes: tuple[str, str, str | None]) -> RouteTable:
    t = RouteTable()
    for method, template, name in routes:
        t.add(method, template, handler, owner="t", name=name, max_body=0, accepts=())
    return t


def test_static_beats_parameter_and_params_are_decoded() -> None:
    t = table(("GET", "/items/{id}", "item"), ("GET", "/items/new", "new"))
    hit = t.resolve("GET", "/items/new")
    assert isinstance(hit, Match) and hit.entry.name == "new"
    hit = t.resolve("GET", "/items/a%2Fb%20c")
    assert isinstance(hit, Match)
    assert hit.params == {"id": "a/b c"}


def test_regex_parameters_and_backtracking() -> None:
    t = table(("GET", "/n/{id:\\d+}/x", "num"), ("GET", "/n/{slug}/y", "slug"))
    hit = t.resolve("GET", "/n/42/x")
    assert isinstance(hit, Match) and hit.entry.name == "num"
    hit = t.resolve("GET", "/n/42/y")
    assert isinstance(hit, Match) and hit.entry.name == "slug"
    assert t.resolve("GET", "/n/abc/x") is None


def test_method_not_allowed_lists_methods() -> None:
    t = table(("GET", "/a", None), ("POST", "/a", None))
    result = t.resolve("DELETE", "/a")
    assert result == MethodNotAllowed(("GET", "HEAD", "POST"))
    assert isinstance(t.resolve("HEAD", "/a"), Match)


def test_empty_segment_never_matches_a_parameter() -> None:
    t = table(("GET", "/a/{id}", None))
    assert t.resolve("GET", "/a/") is None


def test_url_for_quotes_and_validates() -> None:
    t = table(("GET", "/u/{name}/{n:\\d+}", "u"))
    assert t.url_for("u", name="a b/c", n="7") == "/u/a%20b%2Fc/7"
    with pytest.raises(ValueError, match="does not match"):
        t.url_for("u", name="x", n="seven")
    with pytest.raises(KeyError):
        t.url_for("u", name="x")
    with pytest.raises(KeyError):
        t.url_for("missing")


@pytest.mark.parametrize("template", ["no-slash", "/a/{id}x", "/a/{id}/{id}", "/a/{id:(}"])
def test_bad_templates_are_rejected(template: str) -> None:
    with pytest.raises(TemplateError):
        table(("GET", template, None))


def test_removal_is_by_identity_and_old_snapshot_stays_consistent() -> None:
    t = RouteTable()
    entry = t.add("GET", "/x", handler, owner="a", max_body=0, accepts=())
    before = t.entries
    assert t.remove(entry) is True
    assert t.remove(entry) is False
    assert before == (entry,)
    assert t.resolve("GET", "/x") is None
    again = t.add("GET", "/x", handler, owner="b", max_body=0, accepts=())
    assert t.remove(entry) is False
    assert t.entries == (again,)
