"""Concurrency, crash safety and plugin lifecycle of the resource stores behind the v1 routes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

Tavern = Any


def snapshot_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".writer.lock"
    }


async def test_concurrent_creates_never_lose_one(tavern: Tavern) -> None:
    results = await asyncio.gather(
        *(tavern.call("POST", "/users", json={"name": f"u{i:02d}"}, status=201) for i in range(40))
    )
    ids = {r["user"]["id"] for r in results}
    assert len(ids) == 40
    listing = (await tavern.get("/users"))["users"]
    assert {u["id"] for u in listing} == ids
    index = json.loads((tavern.root / "users" / ".index.json").read_text())
    assert {e["id"] for e in index["entries"]} == ids
    for path in (tavern.root / "users").glob("*.json"):
        json.loads(path.read_text())  # every file is whole


async def test_concurrent_relation_writes_all_land(tavern: Tavern) -> None:
    book = (await tavern.call("POST", "/world-books", json={"name": "B"}, status=201))["worldBook"]
    cards = [
        (await tavern.call("POST", "/characters", json={"name": f"c{i}"}, status=201))["character"][
            "id"
        ]
        for i in range(30)
    ]
    await asyncio.gather(
        *(
            tavern.call(
                "PUT",
                f"/characters/{c}/world-books",
                json={"worldBookIds": [book["id"]]},
                status=200,
            )
            for c in cards
        )
    )
    stored = json.loads((tavern.root / "resource-world-book-bindings.json").read_text())
    assert stored["character"] == {c: [book["id"]] for c in cards}


async def test_concurrent_edits_of_one_card_keep_every_change(tavern: Tavern) -> None:
    cid = (await tavern.call("POST", "/characters", json={"name": "Busy"}, status=201))[
        "character"
    ]["id"]
    script = {"scriptName": "s", "findRegex": "/a/g", "replaceString": "b"}
    book = {"entries": [{"keys": ["k"], "content": "c", "id": 1, "enabled": True}]}
    edits = [
        tavern.call("PATCH", f"/characters/{cid}", json={"description": "d"}, status=200),
        tavern.call("PATCH", f"/characters/{cid}", json={"firstMessage": "hi"}, status=200),
        tavern.call("PATCH", f"/characters/{cid}", json={"scenario": "s"}, status=200),
        tavern.call("PATCH", f"/characters/{cid}", json={"tags": ["t"]}, status=200),
        tavern.call(
            "PUT", f"/characters/{cid}/regex-scripts", json={"regexScripts": [script]}, status=200
        ),
        tavern.call(
            "PATCH", f"/characters/{cid}/world-book", json={"characterBook": book}, status=200
        ),
    ]
    await asyncio.gather(*edits)
    data = (await tavern.get(f"/characters/{cid}"))["character"]["data"]
    assert (data["description"], data["firstMessage"], data["scenario"], data["tags"]) == (
        "d",
        "hi",
        "s",
        ["t"],
    )
    assert data["characterBook"] == book
    assert (await tavern.get(f"/characters/{cid}/regex-scripts"))["regexScripts"] == [script]


async def test_concurrent_order_and_imports(tavern: Tavern) -> None:
    await tavern.call("PUT", "/characters/order", json={"mode": "custom"}, status=200)
    created = await asyncio.gather(
        *(tavern.call("POST", "/characters", json={"name": f"n{i}"}, status=201) for i in range(25))
    )
    ids = [c["character"]["id"] for c in created]
    state = json.loads((tavern.root / "character-state.json").read_text())
    assert sorted(state["characterOrder"]) == sorted(ids)


@pytest.fixture
def failing_rename(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make the publishing rename fail, as a crash between temp write and rename would."""

    def arm() -> None:
        atomic = sys.modules["innkeeper_tavern.state.resources.atomic"]

        def boom(source: Path, target: Path) -> None:
            assert source.exists()  # the temp file was fully written
            raise OSError("simulated crash before rename")

        monkeypatch.setattr(atomic, "_replace", boom)

    return arm


async def test_a_failed_rename_changes_nothing(tavern: Tavern, failing_rename: Any) -> None:
    preset = (await tavern.call("POST", "/presets", json={"name": "Safe"}, status=201))["preset"]
    card = (await tavern.call("POST", "/characters", json={"name": "Kept"}, status=201))[
        "character"
    ]
    book = (await tavern.call("POST", "/world-books", json={"name": "B"}, status=201))["worldBook"]
    await tavern.call(
        "PUT",
        f"/presets/{preset['id']}/world-books",
        json={"worldBookIds": [book["id"]]},
        status=200,
    )
    before_files = snapshot_files(tavern.root)
    before_presets = await tavern.get("/presets")
    before_chars = await tavern.get("/characters")
    failing_rename()
    attempts: list[tuple[str, str, Any]] = [
        ("PUT", f"/presets/{preset['id']}", {"name": "Changed"}),
        ("POST", "/presets", {"name": "New"}),
        ("DELETE", f"/presets/{preset['id']}", None),
        ("PATCH", f"/characters/{card['id']}", {"description": "x"}),
        ("DELETE", f"/characters/{card['id']}", None),
        ("PUT", f"/presets/{preset['id']}/world-books", {"worldBookIds": []}),
        ("DELETE", f"/world-books/{book['id']}", None),
        ("PUT", "/characters/order", {"mode": "name"}),
        ("POST", "/users", {"name": "u"}),
    ]
    for method, path, body in attempts:
        answer = await tavern.call(method, path, json=body, status=500)
        assert answer["code"] == "RESOURCE_WRITE_FAILED", (method, path)
        assert snapshot_files(tavern.root) == before_files, (method, path)
    assert await tavern.get("/presets") == before_presets
    assert await tavern.get("/characters") == before_chars
    assert (await tavern.get(f"/presets/{preset['id']}/world-books"))["binding"][
        "worldBookIds"
    ] == [book["id"]]
    assert not list(tavern.root.rglob("*.tmp"))


async def test_unload_leaves_no_trace_and_reload_keeps_data(
    innkeeper_host: Any, leak_check: Any, tmp_path: Path
) -> None:
    root = tmp_path / "innkeeper-data" / "plugins" / "tavern"
    origin = {"Origin": innkeeper_host.origin}
    v1 = "/pmp-dsh-tavern/api/v1"
    async with leak_check():
        await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
        resp = await innkeeper_host.client.post(f"{v1}/presets", json={"name": "A"}, headers=origin)
        pid = (await resp.json())["preset"]["id"]
        resp = await innkeeper_host.client.post(f"{v1}/presets", json={"name": "B"}, headers=origin)
        gone = (await resp.json())["preset"]["id"]
        await innkeeper_host.unload("tavern")
    resp = await innkeeper_host.client.get(f"{v1}/presets")
    assert resp.status == 404
    # Edit one document and delete another behind the (unloaded) plugin's back: the index
    # notices the changed fingerprints when the plugin comes back.
    path = root / "presets" / f"{pid}.json"
    doc = json.loads(path.read_text())
    doc["name"] = "Edited outside"
    path.write_text(json.dumps(doc))
    (root / "presets" / f"{gone}.json").unlink()
    async with leak_check():
        await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
        resp = await innkeeper_host.client.get(f"{v1}/presets")
        presets = (await resp.json())["presets"]
        assert [(p["id"], p["name"]) for p in presets] == [(pid, "Edited outside")]
        status = await innkeeper_host.reload("tavern")
        assert status["state"] == "active"
        resp = await innkeeper_host.client.get(f"{v1}/presets/{pid}")
        assert (await resp.json())["preset"]["name"] == "Edited outside"
        await innkeeper_host.unload("tavern")


async def test_setup_waits_for_an_offline_writer(
    innkeeper_host: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from innkeeper_tavern.state.resources.lock import DataDirLock

    root = tmp_path / "innkeeper-data" / "plugins" / "tavern"
    offline = DataDirLock(root)
    offline.acquire()
    loading = asyncio.ensure_future(innkeeper_host.load("tavern", "innkeeper_tavern.plugin"))
    await asyncio.sleep(0.6)
    assert not loading.done()  # still waiting for the lock
    offline.release()
    status = await asyncio.wait_for(loading, 60)  # generous: a loaded CI machine is slow
    assert status["state"] == "active"
    await innkeeper_host.unload("tavern")
