"""``tavernScopeCatalog.search_scopes``: paging without repeats or gaps, query matching, bounds,
and cursors refused after a change of query, field, session or catalog generation."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from innkeeper_tavern.catalogs import ScopeCatalogError, TavernScopeCatalog
from innkeeper_tavern.resources import TavernResources

USERS = 230


@pytest.fixture
async def catalog(tmp_path: Path) -> tuple[TavernResources, TavernScopeCatalog]:
    resources = TavernResources(tmp_path / "data", logger=logging.getLogger("test"))
    await resources.open()
    for i in range(USERS):
        await resources.create_user({"name": f"{'Mira' if i % 3 == 0 else 'Tob'} {i:04d}"})
    return resources, TavernScopeCatalog(resources, secret=b"k" * 32)


def chain(catalog: TavernScopeCatalog, **kwargs: object) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = catalog.search_scopes("userId", cursor=cursor, **kwargs)  # type: ignore[arg-type]
        ids.extend(item["id"] for item in page.items)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


async def test_a_chain_without_changes_neither_repeats_nor_skips(
    catalog: tuple[TavernResources, TavernScopeCatalog],
) -> None:
    resources, scopes = catalog
    every = sorted(e.id for e in resources.users.entries())
    assert chain(scopes, limit=7) == every  # stable id order, each id once
    assert chain(scopes) == every  # default limit 50
    miras = chain(scopes, query="  MIRA ", limit=9)  # trimmed, case-insensitive substring
    names = {e.id: e.name for e in resources.users.entries()}
    assert miras == sorted(i for i, n in names.items() if n.startswith("Mira"))
    assert len(miras) == (USERS + 2) // 3
    by_id = scopes.search_scopes("userId", query=every[5][:12], limit=50)
    assert every[5] in [i["id"] for i in by_id.items]
    first = scopes.search_scopes("userId", limit=3).wire()
    assert set(first) == {"items", "nextCursor"}
    assert all(set(item) == {"id", "name"} for item in first["items"])  # no bodies or avatars


async def test_a_create_or_delete_refuses_older_cursors(
    catalog: tuple[TavernResources, TavernScopeCatalog],
) -> None:
    resources, scopes = catalog
    page = scopes.search_scopes("userId", limit=10)
    assert page.next_cursor is not None
    await resources.create_user({"name": "Newcomer"})
    with pytest.raises(ScopeCatalogError) as info:
        scopes.search_scopes("userId", cursor=page.next_cursor, limit=10)
    assert info.value.code == "SCOPE_CATALOG_CURSOR_STALE"
    page = scopes.search_scopes("userId", limit=10)
    await resources.delete_user(page.items[0]["id"])
    with pytest.raises(ScopeCatalogError) as info:
        scopes.search_scopes("userId", cursor=page.next_cursor, limit=10)
    assert info.value.code == "SCOPE_CATALOG_CURSOR_STALE"
    # Restarting from page one gives the new catalog, complete.
    assert chain(scopes, limit=10) == sorted(e.id for e in resources.users.entries())


async def test_a_cursor_is_bound_to_field_query_and_session(
    catalog: tuple[TavernResources, TavernScopeCatalog],
) -> None:
    _, scopes = catalog
    page = scopes.search_scopes("userId", query="mira", limit=5, scope={"sessionId": "s1"})
    cursor = page.next_cursor
    assert cursor is not None
    refused = [
        {"field": "userId", "query": "tob", "scope": {"sessionId": "s1"}},
        {"field": "userId", "query": "mira", "scope": {"sessionId": "s2"}},
        {"field": "userId", "query": "mira"},
        {"field": "presetId", "query": "mira", "scope": {"sessionId": "s1"}},
    ]
    for args in refused:
        with pytest.raises(ScopeCatalogError) as info:
            scopes.search_scopes(cursor=cursor, limit=5, **args)  # type: ignore[arg-type]
        assert info.value.code == "SCOPE_CATALOG_CURSOR_INVALID"
    ok = scopes.search_scopes(
        "userId", query="MIRA", cursor=cursor, limit=5, scope={"sessionId": "s1"}
    )
    assert ok.items and ok.items[0]["id"] > page.items[-1]["id"]
    text, signature = cursor.split(".")
    for forged in (text + "." + "0" * len(signature), "garbage", text[:-2] + "." + signature):
        with pytest.raises(ScopeCatalogError) as info:
            scopes.search_scopes("userId", query="mira", cursor=forged, scope={"sessionId": "s1"})
        assert info.value.code == "SCOPE_CATALOG_CURSOR_INVALID"
    other = TavernScopeCatalog(catalog[0], secret=b"z" * 32)  # another source's secret
    with pytest.raises(ScopeCatalogError):
        other.search_scopes("userId", query="mira", cursor=cursor, scope={"sessionId": "s1"})


@pytest.mark.parametrize(
    "args",
    [
        {"field": "worldBookId"},
        {"field": "userId", "limit": 0},
        {"field": "userId", "limit": 51},
        {"field": "userId", "limit": True},
        {"field": "userId", "query": "x" * 201},
        {"field": "userId", "query": 5},
        {"field": "userId", "scope": {"sessionId": 3}},
    ],
)
async def test_bounds(catalog: tuple[TavernResources, TavernScopeCatalog], args: dict) -> None:  # type: ignore[type-arg]
    _, scopes = catalog
    with pytest.raises(ScopeCatalogError) as info:
        scopes.search_scopes(**args)
    assert info.value.code == "SCOPE_CATALOG_INVALID"
    assert len(scopes.search_scopes("userId", query="x" * 200).items) == 0
    assert len(scopes.search_scopes("userId", limit=50).items) == 50
    assert len(scopes.search_scopes("userId", limit=1).items) == 1
