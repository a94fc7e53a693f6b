"""Standalone world-book relations of presets, characters and users
(`docs/contract/world-info.md#relations`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

Tavern = Any
OWNERS = [
    ("presets", "presetId", "preset"),
    ("characters", "characterCardId", "character"),
    ("users", "userId", "user"),
]


def _plugin_dir(tavern: Tavern) -> Path:
    root: Path = tavern.root
    return root


async def make_owner(tavern: Tavern, kind: str) -> str:
    if kind == "presets":
        body = await tavern.call("POST", "/presets", json={"name": "P"}, status=201)
        return str(body["preset"]["id"])
    if kind == "characters":
        body = await tavern.call("POST", "/characters", json={"name": "C"}, status=201)
        return str(body["character"]["id"])
    body = await tavern.call("POST", "/users", json={"name": "U"}, status=201)
    return str(body["user"]["id"])


async def make_books(tavern: Tavern, count: int) -> list[str]:
    ids = []
    for i in range(count):
        body = await tavern.call("POST", "/world-books", json={"name": f"B{i}"}, status=201)
        ids.append(body["worldBook"]["id"])
    return ids


@pytest.mark.parametrize(("kind", "key", "_"), OWNERS)
async def test_put_replaces_the_ordered_list_and_dedupes_stably(
    tavern: Tavern, kind: str, key: str, _: str
) -> None:
    owner = await make_owner(tavern, kind)
    a, b, c = await make_books(tavern, 3)
    empty = await tavern.get(f"/{kind}/{owner}/world-books")
    assert empty == {"ok": True, "binding": {key: owner, "worldBookIds": []}}
    body = await tavern.call(
        "PUT", f"/{kind}/{owner}/world-books", json={"worldBookIds": [c, a, c, b, a]}, status=200
    )
    assert body["binding"] == {key: owner, "worldBookIds": [c, a, b]}
    assert (await tavern.get(f"/{kind}/{owner}/world-books"))["binding"]["worldBookIds"] == [
        c,
        a,
        b,
    ]
    body = await tavern.call(
        "PUT", f"/{kind}/{owner}/world-books", json={"worldBookIds": [b]}, status=200
    )
    assert (await tavern.get(f"/{kind}/{owner}/world-books"))["binding"]["worldBookIds"] == [b]


@pytest.mark.parametrize(("kind", "key", "_"), OWNERS)
async def test_bad_writes_are_rejected_and_change_nothing(
    tavern: Tavern, kind: str, key: str, _: str
) -> None:
    owner = await make_owner(tavern, kind)
    (a,) = await make_books(tavern, 1)
    await tavern.call("PUT", f"/{kind}/{owner}/world-books", json={"worldBookIds": [a]}, status=200)
    cases: list[tuple[Any, int, str]] = [
        ({"worldBookIds": [a, "world-book-missing"]}, 400, "WORLD_BOOK_BINDING_INVALID"),
        ({"worldBookIds": ["../etc"]}, 400, "WORLD_BOOK_BINDING_INVALID"),
        ({"worldBookIds": [1]}, 400, "WORLD_BOOK_BINDING_INVALID"),
        ({"worldBookIds": "x"}, 400, "WORLD_BOOK_BINDING_INVALID"),
        ({"worldBookIds": [f"wb-{i}" for i in range(101)]}, 400, "WORLD_BOOK_BINDING_LIMIT"),
        ({"ids": [a]}, 400, "WORLD_BOOK_BINDING_INVALID"),
    ]
    for body, status, code in cases:
        answer = await tavern.call("PUT", f"/{kind}/{owner}/world-books", json=body, status=status)
        assert answer["code"] == code, body
        assert (await tavern.get(f"/{kind}/{owner}/world-books"))["binding"]["worldBookIds"] == [a]
    missing = await tavern.call(
        "PUT", f"/{kind}/{kind[:-1]}-nope/world-books", json={"worldBookIds": [a]}, status=404
    )
    assert missing["code"].endswith("_NOT_FOUND")
    await tavern.get(f"/{kind}/{kind[:-1]}-nope/world-books", status=404)


async def test_a_hundred_books_fit(tavern: Tavern) -> None:
    owner = await make_owner(tavern, "presets")
    books = await make_books(tavern, 100)
    body = await tavern.call(
        "PUT", f"/presets/{owner}/world-books", json={"worldBookIds": books + books}, status=200
    )
    assert body["binding"]["worldBookIds"] == books


async def test_deleting_a_world_book_clears_every_relation(tavern: Tavern) -> None:
    owners = {kind: await make_owner(tavern, kind) for kind, _, _ in OWNERS}
    a, b = await make_books(tavern, 2)
    for kind, owner in owners.items():
        await tavern.call(
            "PUT", f"/{kind}/{owner}/world-books", json={"worldBookIds": [a, b]}, status=200
        )
    await tavern.call("DELETE", f"/world-books/{a}", status=200)
    for kind, owner in owners.items():
        assert (await tavern.get(f"/{kind}/{owner}/world-books"))["binding"]["worldBookIds"] == [b]
    await tavern.get(f"/world-books/{a}", status=404)
    root = _plugin_dir(tavern)
    resource = json.loads((root / "resource-world-book-bindings.json").read_text())
    users = json.loads((root / "user-world-book-bindings.json").read_text())
    assert resource["preset"] == {owners["presets"]: [b]}
    assert resource["character"] == {owners["characters"]: [b]}
    assert users["user"] == {owners["users"]: [b]}


async def test_deleting_an_owner_clears_only_its_relation(tavern: Tavern) -> None:
    p1 = await make_owner(tavern, "presets")
    p2 = await make_owner(tavern, "presets")
    card = await make_owner(tavern, "characters")
    user = await make_owner(tavern, "users")
    (a,) = await make_books(tavern, 1)
    for path in (f"/presets/{p1}", f"/presets/{p2}", f"/characters/{card}", f"/users/{user}"):
        await tavern.call("PUT", f"{path}/world-books", json={"worldBookIds": [a]}, status=200)
    await tavern.call("DELETE", f"/presets/{p1}", status=200)
    await tavern.call("DELETE", f"/characters/{card}", status=200)
    await tavern.call("DELETE", f"/users/{user}", status=200)
    root = _plugin_dir(tavern)
    resource = json.loads((root / "resource-world-book-bindings.json").read_text())
    assert resource["preset"] == {p2: [a]}
    assert resource["character"] == {}
    assert json.loads((root / "user-world-book-bindings.json").read_text())["user"] == {}
    # The book itself is untouched.
    await tavern.get(f"/world-books/{a}")


async def test_relations_never_touch_the_st_originals(tavern: Tavern) -> None:
    owner = await make_owner(tavern, "presets")
    card = await make_owner(tavern, "characters")
    (a,) = await make_books(tavern, 1)
    await tavern.call(
        "PUT", f"/presets/{owner}/world-books", json={"worldBookIds": [a]}, status=200
    )
    await tavern.call(
        "PUT", f"/characters/{card}/world-books", json={"worldBookIds": [a]}, status=200
    )
    preset_export = (await tavern.raw(f"/presets/{owner}/export"))[1]
    card_export = (await tavern.raw(f"/characters/{card}/json"))[1]
    assert a.encode() not in preset_export
    assert a.encode() not in card_export
