"""``tavernScopeCatalog``: paging over 4,096 characters with concurrent creates and deletes,
cursor binding and the ``resolve_scope_context`` lease."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from catalog_harness import FakeSessions, open_stores, seed_characters

from innkeeper_hostapi import HttpProblem
from innkeeper_tavern.features.catalogs.scope import ScopeCatalog
from innkeeper_tavern.state.session_bindings.model import Selection

COUNT = 4_096


def describe(text: str) -> Any:
    """A card edit that changes the description only (not the name)."""
    return lambda card: msgspec.structs.replace(
        card, data=msgspec.structs.replace(card.data, description=text)
    )


async def chain(catalog: ScopeCatalog, **kwargs: Any) -> tuple[list[str], list[str | None]]:
    """Every page of one cursor chain: the ids and the cursors used."""
    ids: list[str] = []
    cursors: list[str | None] = [None]
    while True:
        page = await catalog.search_scopes(cursor=cursors[-1], **kwargs)
        ids.extend(item["id"] for item in page["items"])
        if page["nextCursor"] is None:
            return ids, cursors
        cursors.append(page["nextCursor"])
        await asyncio.sleep(0)  # let concurrent writers run between pages


async def test_paging_4096_characters_under_concurrent_creates_and_deletes(tmp_path: Path) -> None:
    seeded = seed_characters(tmp_path, COUNT)
    resources, selections = await open_stores(tmp_path)
    catalog = ScopeCatalog(resources, selections, lambda: None)

    # A chain without changes: every id once, in id order.
    ids, cursors = await chain(catalog, field="characterId", limit=50)
    assert ids == sorted(seeded) and len(set(ids)) == COUNT
    assert len(cursors) == -(-COUNT // 50)
    assert all("Hero" not in (c or "") for c in cursors)  # opaque, no names inside

    # A query narrows by substring of id or name (normalized: case and width folded).
    page = await catalog.search_scopes(field="characterId", query="  hero 0409", limit=50)
    assert [i["name"] for i in page["items"]] == [f"Hero {n:05d}" for n in range(4090, 4096)]

    # Creates and deletes race the paging: every refused cursor restarts the chain; the chain
    # that completes saw no change and neither repeats nor skips an id.
    async def churn() -> None:
        for n in range(6):
            await resources.delete_character(seeded[n * 100])
            await asyncio.sleep(0)
            await resources.create_character({"name": f"Late {n}"})
            await asyncio.sleep(0)

    task = asyncio.create_task(churn())
    restarts = 0
    codes: list[str] = []
    while True:
        try:
            ids, _ = await chain(catalog, field="characterId", limit=50)
        except HttpProblem as exc:
            codes.append(exc.code)
            restarts += 1
            await asyncio.sleep(0)
            continue
        if task.done():
            break
    await task
    expected = sorted(e.id for e in resources.characters.entries())
    assert ids == expected and len(set(ids)) == len(ids) == COUNT
    assert restarts >= 1 and set(codes) == {"SCOPE_CATALOG_CURSOR_STALE"}


async def test_cursor_refused_after_a_create_a_changed_query_or_field(tmp_path: Path) -> None:
    seed_characters(tmp_path, 120)
    resources, selections = await open_stores(tmp_path)
    catalog = ScopeCatalog(resources, selections, lambda: None)
    first = await catalog.search_scopes(field="characterId", query="hero", limit=10)
    cursor = first["nextCursor"]
    assert isinstance(cursor, str)
    for kwargs in ({"query": "hero 0"}, {"query": None}):
        with pytest.raises(HttpProblem) as info:
            await catalog.search_scopes(field="characterId", cursor=cursor, limit=10, **kwargs)
        assert info.value.code == "SCOPE_CATALOG_CURSOR_INVALID"
    with pytest.raises(HttpProblem) as info:
        await catalog.search_scopes(field="presetId", query="hero", cursor=cursor)
    assert info.value.code == "SCOPE_CATALOG_CURSOR_INVALID"
    # A tampered cursor fails its signature.
    payload, _, mac = cursor.partition(".")
    with pytest.raises(HttpProblem) as info:
        await catalog.search_scopes(
            field="characterId", query="hero", cursor=f"{payload}.{mac[::-1]}"
        )
    assert info.value.code == "SCOPE_CATALOG_CURSOR_INVALID"
    # The same query in another case and with outer spaces is the same normalized query.
    again = await catalog.search_scopes(
        field="characterId", query=" HERO ", cursor=cursor, limit=10
    )
    assert again["items"][0]["id"] == "character-00010"
    await resources.create_character({"name": "Newcomer"})
    with pytest.raises(HttpProblem) as info:
        await catalog.search_scopes(field="characterId", query="hero", cursor=cursor, limit=10)
    assert info.value.code == "SCOPE_CATALOG_CURSOR_STALE"
    # A body edit that keeps the name changes neither generation nor visibility.
    fresh = (await catalog.search_scopes(field="characterId", query="hero", limit=10))["nextCursor"]
    await resources.update_character("character-00003", describe("edited"))
    page = await catalog.search_scopes(field="characterId", query="hero", cursor=fresh, limit=10)
    assert page["items"][0]["id"] == "character-00010"


async def test_bounds_and_no_bodies(tmp_path: Path) -> None:
    seed_characters(tmp_path, 3)
    resources, selections = await open_stores(tmp_path)
    catalog = ScopeCatalog(resources, selections, lambda: None)
    for kwargs in (
        {"field": "worldBookId"},
        {"field": "characterId", "limit": 0},
        {"field": "characterId", "limit": 51},
        {"field": "characterId", "limit": True},
        {"field": "characterId", "query": "x" * 201},
    ):
        with pytest.raises(HttpProblem) as info:
            await catalog.search_scopes(**kwargs)
        assert info.value.status == 400 and info.value.code == "SCOPE_CATALOG_INVALID"
    page = await catalog.search_scopes(field="characterId", query="y" * 200)
    assert page == {"items": [], "nextCursor": None}
    page = await catalog.search_scopes(field="characterId")
    assert all(set(item) == {"id", "name"} for item in page["items"])
    with pytest.raises(HttpProblem) as info:
        await catalog.search_scopes(field="characterId", scope={"sessionId": "s1"})
    assert info.value.code == "SCOPE_CATALOG_UNAVAILABLE"  # no sessions service


async def test_direct_external_edit_is_stale_until_reload(tmp_path: Path) -> None:
    seed_characters(tmp_path, 5)
    resources, selections = await open_stores(tmp_path)
    catalog = ScopeCatalog(resources, selections, lambda: None)
    assert len((await catalog.search_scopes(field="characterId"))["items"]) == 5
    path = resources.characters.path("character-00002")
    doc = msgspec.json.decode(path.read_bytes())
    doc["name"] = "Edited Outside"
    path.write_bytes(msgspec.json.encode(doc))
    os.utime(path, ns=(1, 1))
    with pytest.raises(HttpProblem) as info:
        await catalog.search_scopes(field="characterId")
    assert info.value.code == "SCOPE_CATALOG_STALE"
    # Other sources are unaffected; the native store keeps working.
    assert (await catalog.search_scopes(field="userId"))["items"] == []
    await catalog.sources["characterId"].reload()
    names = [i["name"] for i in (await catalog.search_scopes(field="characterId"))["items"]]
    assert "Edited Outside" in names


async def test_scope_lease_revocations(tmp_path: Path) -> None:
    seed_characters(tmp_path, 3)
    resources, selections = await open_stores(tmp_path)
    sessions = FakeSessions({"s1": "2026-01-01T00:00:00.000Z", "s2": "2026-01-01T00:00:01.000Z"})
    catalog = ScopeCatalog(resources, selections, lambda: sessions)  # type: ignore[arg-type, return-value]
    user = await resources.create_user({"name": "Me"})
    await selections.set(
        "s1", Selection(character_card_id="character-00001", user_id=user.id, preset_id="gone")
    )

    async def lease() -> Any:
        context = await catalog.resolve_scope_context(session_id="s1")
        assert context["scope"] == {
            "sessionId": "s1",
            "characterId": "character-00001",
            "presetId": None,  # missing resources resolve to null
            "userId": user.id,
        }
        assert context["checkCurrent"]()
        return context["checkCurrent"]

    # Unrelated changes leave the lease current.
    check = await lease()
    await selections.set("s2", Selection(character_card_id="character-00002"))
    await resources.update_character("character-00002", describe("other card"))
    catalog.agent_created("s2")
    assert check()

    # Each revoking change: selection, bound source edit, catalog write, session instance,
    # direct external edit of the bound file, unload.
    revokers: list[Any] = [
        lambda: selections.set(
            "s1", Selection(character_card_id="character-00001", user_id=user.id)
        ),
        lambda: resources.update_character("character-00001", describe("bound edit")),
        lambda: resources.create_preset({"name": "New preset"}),
        lambda: resources.delete_character("character-00000"),
    ]
    for revoke in revokers:
        check = await lease()
        await revoke()
        assert not check()
    check = await lease()
    catalog.agent_created("s1")
    assert not check()
    check = await lease()
    os.utime(resources.characters.path("character-00001"), ns=(5, 5))
    assert not check()
    await catalog.sources["characterId"].reload()
    check = await lease()
    catalog.close()
    assert not check()
    with pytest.raises(HttpProblem) as info:
        await catalog.resolve_scope_context(session_id="s1")
    assert info.value.code == "SCOPE_CATALOG_UNAVAILABLE"


async def test_resolve_needs_an_existing_session(tmp_path: Path) -> None:
    resources, selections = await open_stores(tmp_path)
    catalog = ScopeCatalog(resources, selections, lambda: FakeSessions({}))  # type: ignore[arg-type, return-value]
    with pytest.raises(HttpProblem) as info:
        await catalog.resolve_scope_context(session_id="nope")
    assert info.value.status == 404 and info.value.code == "SCOPE_SESSION_NOT_FOUND"
    with pytest.raises(HttpProblem) as info:
        await catalog.search_scopes(field="userId", scope={"sessionId": "nope"})
    assert info.value.code == "SCOPE_SESSION_NOT_FOUND"
