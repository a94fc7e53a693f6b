"""Preset, user and standalone world-book routes: CRUD, import/export and error codes."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.pure.formats.guards import MAX_BOOK_ENTRIES
from innkeeper_tavern.state.resources.service import MAX_WORLD_BOOK_IMPORT_BYTES

Tavern = Any
LONG_RECLAMATION = (
    Path(__file__).resolve().parents[5]
    / "shared/sillytavern-corpus/prolix-oc-st-presets/worldbooks/The Long Reclamation.json"
)
PNG_AVATAR = (
    "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
)


async def test_preset_crud(tavern: Tavern) -> None:
    created = (await tavern.call("POST", "/presets", json={"name": "Mine"}, status=201))["preset"]
    pid = created["id"]
    assert created["name"] == "Mine" and created["sampling"]["temperature"] == 1
    assert "raw" not in created["source"]
    got = (await tavern.get(f"/presets/{pid}"))["preset"]
    assert got == created
    put = await tavern.call(
        "PUT",
        f"/presets/{pid}",
        json={"name": "Renamed", "sampling": {"temperature": 0.7, "reasoningEffort": "xhigh"}},
        status=200,
    )
    assert put["preset"]["name"] == "Renamed"
    assert put["preset"]["sampling"]["temperature"] == 0.7
    exported = json.loads((await tavern.raw(f"/presets/{pid}/export"))[1])
    assert exported["temperature"] == 0.7 and exported["reasoning_effort"] == "xhigh"
    assert "systemPromptMode" not in exported
    listing = (await tavern.get("/presets"))["presets"]
    assert [(p["id"], p["name"]) for p in listing] == [(pid, "Renamed")]
    assert listing[0]["promptCount"] == len(put["preset"]["prompts"])
    await tavern.call("DELETE", f"/presets/{pid}", status=200)
    assert (await tavern.get(f"/presets/{pid}", status=404))["code"] == "PRESET_NOT_FOUND"
    assert (await tavern.get("/presets"))["presets"] == []


@pytest.mark.parametrize(
    ("method", "path", "body", "code"),
    [
        ("POST", "/presets", {"name": ""}, "PRESET_INVALID"),
        ("POST", "/presets", {"name": "x", "id": "y"}, "PRESET_INVALID"),
        ("POST", "/import", {"content": "{"}, "INVALID_JSON"),
        ("POST", "/import", {"content": "{}"}, "PRESET_INVALID"),
        ("POST", "/import", {"content": "{}", "id": "x"}, "INVALID_BODY"),
        ("POST", "/import", {"name": "x"}, "INVALID_BODY"),
        ("POST", "/import", {"content": 5}, "INVALID_BODY"),
        ("POST", "/import", [1], "INVALID_BODY"),
    ],
)
async def test_preset_rejections(
    tavern: Tavern, method: str, path: str, body: Any, code: str
) -> None:
    answer = await tavern.call(method, path, json=body, status=400)
    assert answer == {"ok": False, "error": answer["error"], "code": code}
    assert (await tavern.get("/presets"))["presets"] == []


async def test_preset_edit_rejections_keep_the_stored_preset(tavern: Tavern) -> None:
    pid = (await tavern.call("POST", "/presets", json={"name": "Keep"}, status=201))["preset"]["id"]
    before = (await tavern.get(f"/presets/{pid}"))["preset"]
    for body in (
        {"sampling": {"temperature": "hot"}},
        {"unknown": 1},
        {"prompts": [{"identifier": "a"}]},
    ):
        await tavern.call("PUT", f"/presets/{pid}", json=body, status=400)
    await tavern.call(
        "PUT", f"/presets/{pid}/regex-scripts", json={"regexScripts": [1]}, status=400
    )
    await tavern.call("PUT", f"/presets/{pid}/regex-scripts", json={"scripts": []}, status=400)
    assert (await tavern.get(f"/presets/{pid}"))["preset"] == before
    answer = await tavern.call(
        "PUT", f"/presets/{pid}", data=b"name=x", content_type="text/plain", status=415
    )
    assert answer["code"] == "UNSUPPORTED_MEDIA_TYPE"
    answer = await tavern.call(
        "PUT",
        f"/presets/{pid}",
        data=b'{"name": "' + b"x" * (2 << 20) + b'"}',
        content_type="application/json",
        status=413,
    )
    assert answer["code"] == "BODY_TOO_LARGE"


async def test_mutations_need_a_same_origin_header(tavern: Tavern) -> None:
    resp = await tavern.client.post("/pmp-dsh-tavern/api/v1/presets", json={"name": "x"})
    assert resp.status == 403
    assert (await resp.json())["code"] == "ORIGIN_REQUIRED"
    resp = await tavern.client.post(
        "/pmp-dsh-tavern/api/v1/presets", json={"name": "x"}, headers={"Origin": "http://evil"}
    )
    assert resp.status == 403
    assert (await tavern.get("/presets"))["presets"] == []


async def test_user_crud_import_export(tavern: Tavern) -> None:
    created = await tavern.call(
        "POST", "/users", json={"name": "  Reader ", "description": "curious"}, status=201
    )
    uid = created["user"]["id"]
    assert created["user"] == {"id": uid, "name": "Reader", "description": "curious"}
    patched = await tavern.call("PATCH", f"/users/{uid}", json={"avatar": PNG_AVATAR}, status=200)
    assert patched["user"]["avatar"] == PNG_AVATAR
    status, exported, headers = await tavern.raw(f"/users/{uid}/export")
    assert status == 200 and headers["Content-Disposition"].startswith("attachment")
    doc = json.loads(exported)
    assert doc == {
        "format": "pmp-dsh-tavern",
        "version": 1,
        "resourceType": "user",
        "data": {"name": "Reader", "description": "curious", "avatar": PNG_AVATAR},
    }
    imported = await tavern.call(
        "POST", "/users/import", data=exported, content_type="application/json", status=201
    )
    assert imported["user"]["id"] != uid
    assert imported["user"]["name"] == "Reader" and imported["user"]["avatar"] == PNG_AVATAR
    # Imports never bind world books.
    assert (await tavern.get(f"/users/{imported['user']['id']}/world-books"))["binding"][
        "worldBookIds"
    ] == []
    listing = (await tavern.get("/users"))["users"]
    assert [u["name"] for u in listing] == ["Reader", "Reader"]
    assert all(u["hasAvatar"] and u["descriptionPreview"] == "curious" for u in listing)
    long = await tavern.call(
        "POST", "/users", json={"name": "Long", "description": "y" * 100_000}, status=201
    )
    assert len(long["user"]["description"]) == 100_000
    row = next(u for u in (await tavern.get("/users"))["users"] if u["name"] == "Long")
    assert row["descriptionPreview"] == "y" * 280
    cleared = await tavern.call("PATCH", f"/users/{uid}", json={"avatar": None}, status=200)
    assert "avatar" not in cleared["user"]
    await tavern.call("DELETE", f"/users/{uid}", status=200)
    await tavern.get(f"/users/{uid}", status=404)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"personas": {}, "persona_descriptions": {}}, 400, "USER_IMPORT_UNSUPPORTED"),
        (
            {"format": "pmp-dsh-tavern", "version": 2, "resourceType": "user", "data": {}},
            400,
            "USER_IMPORT_UNSUPPORTED",
        ),
        (
            {
                "format": "pmp-dsh-tavern",
                "version": 1,
                "resourceType": "user",
                "data": {"name": "x", "id": "user-1"},
            },
            400,
            "USER_INVALID",
        ),
        (
            {
                "format": "pmp-dsh-tavern",
                "version": 1,
                "resourceType": "user",
                "data": {"name": "x" * 201},
            },
            400,
            "USER_INVALID",
        ),
        (
            {
                "format": "pmp-dsh-tavern",
                "version": 1,
                "resourceType": "user",
                "data": {"name": "x", "avatar": "data:text/html;base64,AAAA"},
            },
            400,
            "USER_AVATAR_INVALID",
        ),
    ],
)
async def test_user_import_rejections(tavern: Tavern, body: Any, status: int, code: str) -> None:
    answer = await tavern.call(
        "POST",
        "/users/import",
        data=json.dumps(body).encode(),
        content_type="application/json",
        status=status,
    )
    assert answer["code"] == code
    assert (await tavern.get("/users"))["users"] == []


async def test_user_import_over_1_mib_is_413(tavern: Tavern) -> None:
    answer = await tavern.call(
        "POST",
        "/users/import",
        data=b" " * ((1 << 20) + 1),
        content_type="application/json",
        status=413,
    )
    assert answer["code"] == "BODY_TOO_LARGE"


async def test_world_book_crud_and_patch(tavern: Tavern) -> None:
    created = await tavern.call("POST", "/world-books", json={"name": "Atlas"}, status=201)
    book = created["worldBook"]
    bid = book["id"]
    assert book["name"] == "Atlas" and book["book"]["entries"] == []
    entry = {"uid": 7, "keys": ["harbor"], "content": "The harbor is busy.", "order": 50}
    new_book = {**book["book"], "entries": [entry]}
    patched = await tavern.call(
        "PATCH", f"/world-books/{bid}", json={"name": "Atlas 2", "book": new_book}, status=200
    )
    got = patched["worldBook"]
    assert got["name"] == "Atlas 2"
    assert got["book"]["entries"][0]["keys"] == ["harbor"]
    assert got["book"]["entries"][0]["order"] == 50
    assert got["book"]["entries"][0]["probability"] == 100  # defaults filled
    exported = json.loads((await tavern.raw(f"/world-books/{bid}/json"))[1])
    assert exported["entries"]["7"]["content"] == "The harbor is busy."
    listing = (await tavern.get("/world-books"))["worldBooks"]
    assert [(b["name"], b["entryCount"]) for b in listing] == [("Atlas 2", 1)]
    # Rejections keep the stored book.
    for body in (
        {"book": {"entries": [{"uid": 1, "bogus": True}]}},
        {"book": {"entries": "x"}},
        {"book": {"nope": 1}},
        {"title": "x"},
        {"name": ""},
    ):
        answer = await tavern.call("PATCH", f"/world-books/{bid}", json=body, status=400)
        assert answer["code"] == "WORLD_BOOK_INVALID", body
    assert (await tavern.get(f"/world-books/{bid}"))["worldBook"] == got


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"{oops", "INVALID_JSON"),
        (b"[]", "WORLD_BOOK_ROOT_INVALID"),
        (b'{"entries": 5}', "WORLD_BOOK_ENTRIES_INVALID"),
        (b"\xff\xfe{}", "INVALID_JSON"),
    ],
)
async def test_world_book_import_rejections(tavern: Tavern, data: bytes, code: str) -> None:
    answer = await tavern.call(
        "POST", "/world-books/import", data=data, content_type="application/json", status=400
    )
    assert answer["code"] == code
    assert (await tavern.get("/world-books"))["worldBooks"] == []


async def test_world_book_structure_limits(tavern: Tavern) -> None:
    entries = {str(i): {"uid": i, "key": ["k"], "content": ""} for i in range(10_001)}
    data = json.dumps({"entries": entries}).encode()
    answer = await tavern.call(
        "POST", "/world-books/import", data=data, content_type="application/json", status=413
    )
    assert answer["code"] == "WORLD_BOOK_TOO_MANY_ENTRIES"
    answer = await tavern.call(
        "POST",
        "/world-books/import",
        data=b" " * (MAX_WORLD_BOOK_IMPORT_BYTES + 1),
        content_type="application/json",
        status=413,
    )
    assert answer["code"] == "BODY_TOO_LARGE"
    named = await tavern.call(
        "POST",
        "/world-books/import?filename=My%20Lore.json",
        data=b'{"entries": {}}',
        content_type="application/json",
        status=201,
    )
    assert named["worldBook"]["name"] == "My Lore"
    assert named["worldBook"]["source"]["fileName"] == "My Lore.json"
    # A book's node budget follows its entry count: 3 entries do not get 10,000 entries' room.
    nodes = {"0": {"uid": 0, "key": ["k"] * 200_000, "content": ""}}
    answer = await tavern.call(
        "POST",
        "/world-books/import",
        data=json.dumps({"entries": nodes}).encode(),
        content_type="application/json",
        status=413,
    )
    assert answer["code"] == "STRUCTURE_TOO_MANY_NODES"


@pytest.mark.slow
async def test_a_real_export_at_the_entry_cap_imports_and_edits(tavern: Tavern) -> None:
    """A SillyTavern export of 10,000 entries (every field ST writes) imports over HTTP."""
    source = json.loads(LONG_RECLAMATION.read_bytes())
    originals = list(source["entries"].values())
    entries = {}
    for i in range(MAX_BOOK_ENTRIES):
        entry = dict(originals[i % len(originals)], uid=i, displayIndex=i)
        entry["key"] = [*entry["key"], f"k{i}"]
        entries[str(i)] = entry
    data = json.dumps({**source, "entries": entries}).encode()
    assert len(data) > 16 << 20  # well past the old 4 MiB body and 100,000-node guards
    created = await tavern.call(
        "POST",
        "/world-books/import?filename=big.json",
        data=data,
        content_type="application/json",
        status=201,
    )
    book_id = created["worldBook"]["id"]
    got = await tavern.call("GET", f"/world-books/{book_id}")
    book = got["worldBook"]["book"]
    assert len(book["entries"]) == MAX_BOOK_ENTRIES
    assert book["entries"][9_999]["keys"][-1] == "k9999"
    # The normalized model goes back through PATCH (the editor's save) at the same size.
    book["entries"][5]["content"] = "edited"
    patched = await tavern.call(
        "PATCH",
        f"/world-books/{book_id}",
        data=json.dumps({"book": book}).encode(),
        content_type="application/json",
    )
    assert patched["worldBook"]["book"]["entries"][5]["content"] == "edited"
