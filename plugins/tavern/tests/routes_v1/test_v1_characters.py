"""Character routes: CRUD, sidebar order, tombstones and relink, embedded book, uploads
(`docs/contract/resources.md#character-order` and `docs/contract/resources.md#missing-cards`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

Tavern = Any
CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
SENSEI = CORPUS / "sillytavern-content" / "default_CodingSensei.png"


async def create(tavern: Tavern, name: str, **fields: Any) -> str:
    body = await tavern.call("POST", "/characters", json={"name": name, **fields}, status=201)
    return str(body["character"]["id"])


async def names(tavern: Tavern) -> list[str]:
    return [c["name"] for c in (await tavern.get("/characters"))["characters"]]


def state_file(tavern: Tavern) -> dict[str, Any]:
    path: Path = tavern.root / "character-state.json"
    return json.loads(path.read_text()) if path.exists() else {}  # type: ignore[no-any-return]


async def test_create_get_patch_and_export(tavern: Tavern) -> None:
    cid = await create(tavern, "Lyra", description="A bard", tags=["music"])
    card = (await tavern.get(f"/characters/{cid}"))["character"]
    assert card["name"] == "Lyra" and card["data"]["description"] == "A bard"
    assert card["data"]["tags"] == ["music"] and card["hasCover"] is False
    patched = await tavern.call(
        "PATCH", f"/characters/{cid}", json={"firstMessage": "Hello!"}, status=200
    )
    assert patched["character"]["data"]["firstMessage"] == "Hello!"
    assert patched["character"]["updatedAt"] >= card["updatedAt"]
    exported = json.loads((await tavern.raw(f"/characters/{cid}/json"))[1])
    assert exported["spec"] == "chara_card_v2"
    assert exported["data"]["first_mes"] == "Hello!"
    assert exported["data"]["description"] == "A bard"
    bad = await tavern.call("PATCH", f"/characters/{cid}", json={"avatar": "x"}, status=400)
    assert bad["code"] == "CHARACTER_CARD_INVALID"
    bad = await tavern.call("POST", "/characters", json={"name": "  "}, status=400)
    assert bad["code"] == "CHARACTER_CARD_INVALID"
    assert await names(tavern) == ["Lyra"]


async def test_unknown_and_malformed_ids_are_404(tavern: Tavern) -> None:
    for path in ("/characters/character-nope", "/characters/..%2Fx", "/characters/a.b/json"):
        body = await tavern.get(path, status=404)
        assert body["code"] == "CHARACTER_NOT_FOUND"
    body = await tavern.call("DELETE", "/characters/character-nope", status=404)
    assert body["code"] == "CHARACTER_NOT_FOUND"


async def test_sort_modes_and_custom_order(tavern: Tavern) -> None:
    ids = {n: await create(tavern, n) for n in ("beta", "Alpha", "gamma 10", "gamma 9")}
    listing = await tavern.get("/characters")
    assert listing["sorting"] == {"mode": "updated"}
    # Most recently updated first.
    await tavern.call("PATCH", f"/characters/{ids['beta']}", json={"scenario": "x"}, status=200)
    assert (await names(tavern))[0] == "beta"
    body = await tavern.call("PUT", "/characters/order", json={"mode": "name"}, status=200)
    assert body["sorting"] == {"mode": "name"}
    assert [c["name"] for c in body["characters"]] == ["Alpha", "beta", "gamma 9", "gamma 10"]
    # custom without a saved order initializes it from the order shown.
    body = await tavern.call("PUT", "/characters/order", json={"mode": "custom"}, status=200)
    assert [c["name"] for c in body["characters"]] == ["Alpha", "beta", "gamma 9", "gamma 10"]
    wanted = [ids["gamma 10"], ids["Alpha"], ids["gamma 9"], ids["beta"]]
    body = await tavern.call(
        "PUT", "/characters/order", json={"mode": "custom", "characterIds": wanted}, status=200
    )
    assert [c["id"] for c in body["characters"]] == wanted
    assert state_file(tavern)["characterOrder"] == wanted
    # Switching away keeps the saved order; coming back restores it.
    await tavern.call("PUT", "/characters/order", json={"mode": "updated"}, status=200)
    assert state_file(tavern)["characterOrder"] == wanted
    body = await tavern.call("PUT", "/characters/order", json={"mode": "custom"}, status=200)
    assert [c["id"] for c in body["characters"]] == wanted
    # New cards append in custom mode; deleting removes the order entry.
    new = await create(tavern, "delta")
    assert [c["id"] for c in (await tavern.get("/characters"))["characters"]] == [*wanted, new]
    await tavern.call("DELETE", f"/characters/{ids['Alpha']}", status=200)
    assert ids["Alpha"] not in state_file(tavern)["characterOrder"]
    # Dragging does not change the card's updatedAt.
    before = (await tavern.get(f"/characters/{new}"))["character"]["updatedAt"]
    live = [c["id"] for c in (await tavern.get("/characters"))["characters"]]
    await tavern.call(
        "PUT", "/characters/order", json={"mode": "custom", "characterIds": live[::-1]}, status=200
    )
    assert (await tavern.get(f"/characters/{new}"))["character"]["updatedAt"] == before


async def test_order_errors_leave_state_unchanged(tavern: Tavern) -> None:
    a = await create(tavern, "a")
    b = await create(tavern, "b")
    await tavern.call(
        "PUT", "/characters/order", json={"mode": "custom", "characterIds": [b, a]}, status=200
    )
    before = state_file(tavern)
    cases: list[tuple[Any, str]] = [
        ({"mode": "custom", "characterIds": [a]}, "CHARACTER_ORDER_INVALID"),  # missing
        ({"mode": "custom", "characterIds": [a, b, a]}, "CHARACTER_ORDER_INVALID"),  # duplicate
        ({"mode": "custom", "characterIds": [a, b, "character-x"]}, "CHARACTER_ORDER_INVALID"),
        ({"mode": "custom", "characterIds": [a, 1]}, "CHARACTER_ORDER_INVALID"),
        ({"mode": "custom", "characterIds": ["x"] * 4097}, "CHARACTER_ORDER_INVALID"),
        ({"mode": "name", "characterIds": [a, b]}, "CHARACTER_ORDER_INVALID"),
        ({"mode": "random"}, "CHARACTER_SORT_MODE_INVALID"),
        ({}, "CHARACTER_SORT_MODE_INVALID"),
        ({"mode": "name", "extra": 1}, "CHARACTER_ORDER_INVALID"),
    ]
    for body, code in cases:
        answer = await tavern.call("PUT", "/characters/order", json=body, status=400)
        assert answer["code"] == code, body
        assert state_file(tavern) == before
    assert (await tavern.get("/characters"))["sorting"] == {"mode": "custom"}


async def test_delete_keeps_a_tombstone_and_relink_clears_it(tavern: Tavern) -> None:
    data = SENSEI.read_bytes()
    imported = await tavern.call(
        "POST",
        "/characters/import?filename=sensei.png",
        data=data,
        content_type="image/png",
        status=201,
    )
    cid = imported["character"]["id"]
    sha = imported["character"]["source"]["sha256"]
    assert (tavern.root / "character-artifacts" / f"{cid}.png").exists()
    deleted = await tavern.call("DELETE", f"/characters/{cid}", status=200)
    assert deleted["missingCharacter"] == {"id": cid, "name": "Coding Sensei", "sha256": sha}
    assert not (tavern.root / "characters" / f"{cid}.json").exists()
    assert not (tavern.root / "character-artifacts" / f"{cid}.png").exists()
    listing = await tavern.get("/characters")
    assert listing["characters"] == []
    assert [(m["id"], m["name"], m["sha256"]) for m in listing["missingCharacters"]] == [
        (cid, "Coding Sensei", sha)
    ]
    # Re-import: the unique SHA-256 matches the tombstone; relink is deferred (no workspace).
    again = await tavern.call(
        "POST",
        "/characters/import?filename=sensei.png",
        data=data,
        content_type="image/png",
        status=201,
    )
    match = again["missingCharacterMatch"]
    assert match == {
        "previousCharacterId": cid,
        "name": "Coding Sensei",
        "matchedBy": "sha256",
        "relinked": False,
    }
    assert len((await tavern.get("/characters"))["missingCharacters"]) == 1
    new_id = again["character"]["id"]
    # Errors: unknown previous id, missing target, bad body; nothing changes.
    for body in (
        {"previousCharacterId": "character-nope", "characterId": new_id},
        {"previousCharacterId": cid, "characterId": "character-nope"},
        {"previousCharacterId": cid, "characterId": 5},
    ):
        answer = await tavern.call("POST", "/characters/relink", json=body, status=400)
        assert answer["code"] == "CHARACTER_RELINK_INVALID"
    assert len((await tavern.get("/characters"))["missingCharacters"]) == 1
    # Without a play workspace the relink is deferred and the tombstone stays.
    deferred = await tavern.call(
        "POST",
        "/characters/relink",
        json={"previousCharacterId": cid, "characterId": new_id},
        status=409,
    )
    assert deferred["code"] == "CHARACTER_RELINK_DEFERRED"
    assert len((await tavern.get("/characters"))["missingCharacters"]) == 1
    workspace = tavern.root.parent.parent.parent / "workspace"
    workspace.mkdir()
    await tavern.client.put(
        "/pmp-dsh-tavern/api/v2/workspace", json={"path": str(workspace)}, headers=tavern.origin
    )
    body = await tavern.call(
        "POST",
        "/characters/relink",
        json={"previousCharacterId": cid, "characterId": new_id},
        status=200,
    )
    assert body == {"ok": True, "relinkedPlaythroughCount": 0, "relinkedSessionCount": 0}
    assert (await tavern.get("/characters"))["missingCharacters"] == []


async def test_same_name_match_needs_unique_names(tavern: Tavern) -> None:
    a = await create(tavern, "Twin")
    await tavern.call("DELETE", f"/characters/{a}", status=200)
    body = await tavern.call("POST", "/characters", json={"name": " twin "}, status=201)
    assert body["missingCharacterMatch"]["matchedBy"] == "name"
    # A second live "Twin": no longer unique, so no guess.
    body = await tavern.call("POST", "/characters", json={"name": "Twin"}, status=201)
    assert "missingCharacterMatch" not in body


async def test_embedded_world_book_edit(tavern: Tavern) -> None:
    cid = await create(tavern, "Booked")
    book = {
        "name": "Lore",
        "entries": [{"keys": ["sword"], "content": "A sword.", "enabled": True, "id": 1}],
        "extensions": {"custom": 1},
    }
    body = await tavern.call(
        "PATCH", f"/characters/{cid}/world-book", json={"characterBook": book}, status=200
    )
    assert body["character"]["data"]["characterBook"] == book
    exported = json.loads((await tavern.raw(f"/characters/{cid}/json"))[1])
    assert exported["data"]["character_book"] == book
    # The standalone relation is separate and stays empty.
    assert (await tavern.get(f"/characters/{cid}/world-books"))["binding"]["worldBookIds"] == []
    for bad in ({"characterBook": {"entries": "x"}}, {"characterBook": 3}, {"book": {}}):
        answer = await tavern.call("PATCH", f"/characters/{cid}/world-book", json=bad, status=400)
        assert answer["code"] in ("EMBEDDED_WORLD_BOOK_INVALID", "CHARACTER_CARD_INVALID")
    deep: Any = {"entries": []}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    answer = await tavern.call(
        "PATCH", f"/characters/{cid}/world-book", json={"characterBook": deep}, status=400
    )
    assert answer["code"] == "EMBEDDED_WORLD_BOOK_INVALID"
    assert (await tavern.get(f"/characters/{cid}"))["character"]["data"]["characterBook"] == book
    cleared = await tavern.call(
        "PATCH", f"/characters/{cid}/world-book", json={"characterBook": None}, status=200
    )
    assert cleared["character"]["data"]["characterBook"] is None


async def test_multipart_upload_and_media_types(tavern: Tavern) -> None:
    form = aiohttp.FormData()
    form.add_field(
        "file", SENSEI.read_bytes(), filename="Sensei card.png", content_type="image/png"
    )
    resp = await tavern.client.post(
        "/pmp-dsh-tavern/api/v1/characters/import", data=form, headers=tavern.origin
    )
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    assert body["character"]["name"] == "Coding Sensei"
    assert body["character"]["source"]["container"] == "png"
    answer = await tavern.call(
        "POST", "/characters/import", data=b"hello", content_type="text/plain", status=415
    )
    assert answer["code"] == "UNSUPPORTED_MEDIA_TYPE"


async def test_bad_card_files_are_clean_4xx_and_write_nothing(tavern: Tavern) -> None:
    png = SENSEI.read_bytes()
    broken = png[:100] + bytes([png[100] ^ 0xFF]) + png[101:]
    cases: list[tuple[bytes, str, int, str]] = [
        (b"{not json", "application/json", 400, "INVALID_JSON"),
        (b"[1, 2]", "application/json", 400, "CHARACTER_CARD_INVALID"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, "image/png", 400, "CHARACTER_PNG_INVALID"),
        (broken, "image/png", 400, "CHARACTER_PNG_INVALID"),
        (b'{"name": 5, "first_mes": "x"}', "application/json", 400, "CHARACTER_CARD_INVALID"),
    ]
    for data, ctype, status, code in cases:
        answer = await tavern.call(
            "POST", "/characters/import", data=data, content_type=ctype, status=status
        )
        assert answer["code"] == code
    assert (await tavern.get("/characters"))["characters"] == []
    assert list((tavern.root / "characters").glob("character-*.json")) == []
    assert (
        not any((tavern.root / "character-artifacts").glob("*"))
        if (tavern.root / "character-artifacts").exists()
        else True
    )


async def test_a_card_whose_spec_is_not_a_string_is_400_naming_the_field(tavern: Tavern) -> None:
    """Issue 33: ``spec`` as an array/object was a 500 (the recognizer hashed it)."""
    for spec in ([], {}, {"__proto__": 1}, 2, True):
        doc = {"spec": spec, "spec_version": "2.0", "data": {"name": "Fz", "first_mes": "hi"}}
        answer = await tavern.call(
            "POST",
            "/characters/import",
            data=json.dumps(doc).encode(),
            content_type="application/json",
            status=400,
        )
        assert answer["code"] == "CHARACTER_CARD_INVALID", answer
        assert answer["error"]["details"]["path"] == "$.spec", answer
        assert answer["error"]["message"].endswith("at $.spec"), answer
    assert (await tavern.get("/characters"))["characters"] == []


async def test_oversized_card_is_413(tavern: Tavern) -> None:
    data = b" " * (32 * 1024 * 1024 + 70 * 1024)
    answer = await tavern.call(
        "POST", "/characters/import", data=data, content_type="application/json", status=413
    )
    assert answer["code"] == "BODY_TOO_LARGE"
    # Exactly over the file limit inside the route's envelope allowance.
    data = b" " * (32 * 1024 * 1024 + 1)
    answer = await tavern.call(
        "POST", "/characters/import", data=data, content_type="application/json", status=413
    )
    assert answer["code"] == "ARTIFACT_TOO_LARGE"
