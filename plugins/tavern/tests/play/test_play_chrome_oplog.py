"""Chrome mode (routes, SSE, the tavern.chrome service) and the operation-log journal."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from play_harness import V2, Play

from innkeeper_tavern.face.routes.play_chrome import TAVERN_CHROME


async def read_event(resp: Any) -> dict[str, Any]:
    event = None
    while True:
        line = (await resp.content.readline()).decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            assert event == "chrome/change"
            data: dict[str, Any] = json.loads(line[6:])
            return data


async def test_chrome_routes_and_events(play: Play) -> None:
    first = await play.v2("GET", "/chrome")
    assert first == {"ok": True, "mode": "native", "revision": "initial"}
    status, body = await play.raw("POST", "/chrome", {"mode": "play"})
    assert (status, body["code"]) == (405, "PLAY_METHOD_NOT_ALLOWED")
    status, body = await play.raw("PUT", "/chrome", {"mode": "red"})
    assert (status, body["code"]) == (400, "PLAY_CHROME_INVALID")
    service = play.host.get(TAVERN_CHROME)
    async with play.host.client.get(V2 + "/chrome/events") as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert (await read_event(resp))["mode"] == "native"  # the snapshot on connect
        assert service.listener_count == 1
        same = await play.v2("PUT", "/chrome", {"mode": "native"})
        assert same["revision"] == "initial"  # same mode: no change, no event
        changed = await play.v2("PUT", "/chrome", {"mode": "play"})
        assert changed["revision"] != "initial"
        event = await asyncio.wait_for(read_event(resp), 5)
        assert event == {"mode": "play", "revision": changed["revision"]}
    for _ in range(50):
        if service.listener_count == 0:
            break
        await asyncio.sleep(0.02)
    assert service.listener_count == 0  # subscribers cleaned on close


async def test_chrome_get_is_conditional(play: Play) -> None:
    """A poll with the last ``ETag`` gets an empty 304 until the mode really changes."""
    url = V2 + "/chrome"
    async with play.host.client.get(url) as resp:
        assert resp.status == 200 and resp.headers["Cache-Control"] == "no-cache"
        etag = resp.headers["ETag"]
        assert (await resp.json())["mode"] == "native"
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        async with play.host.client.get(url, headers={"If-None-Match": header}) as resp:
            assert (resp.status, await resp.read(), resp.headers["ETag"]) == (304, b"", etag)
    await play.v2("PUT", "/chrome", {"mode": "native"})  # the same mode: still unchanged
    async with play.host.client.get(url, headers={"If-None-Match": etag}) as resp:
        assert resp.status == 304
    changed = await play.v2("PUT", "/chrome", {"mode": "play"})
    async with play.host.client.get(url, headers={"If-None-Match": etag}) as resp:
        assert resp.status == 200 and resp.headers["ETag"] != etag
        assert await resp.json() == {"ok": True, "mode": "play", "revision": changed["revision"]}
    async with play.host.client.get(url, headers={"If-None-Match": '"stale"'}) as resp:
        assert resp.status == 200


async def test_chrome_service_when_effects(play: Play) -> None:
    service = play.host.get(TAVERN_CHROME)
    log: list[str] = []

    async def setup() -> Any:
        log.append("enter")
        return lambda: log.append("leave")

    dispose = await service.when("play", setup)
    assert log == []
    seen: list[str] = []
    undo = service.subscribe(lambda snap: seen.append(snap.mode))
    await service.set_mode("play")
    assert log == ["enter"]
    await service.switch_mode()
    assert log == ["enter", "leave"] and service.get_mode() == "native"
    await service.set_mode("play")
    await dispose()
    assert log == ["enter", "leave", "enter", "leave"]
    undo()
    undo()  # idempotent
    assert seen == ["native", "play", "native", "play"]
    await service.when("play", setup)
    await play.host.unload("tavern")  # unloading clears the effect
    assert log[-1] == "leave"


async def test_mutations_log_operations_without_bodies(
    play: Play, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    marker = "MARKER-7f3a9c-BODY"
    await play.bind()
    await play.v2("POST", "/workspace/dirs", {"path": "ada"}, 201)
    await play.write("ada/notes.txt", f"secret {marker} text")
    await play.write(
        "catalog.json",
        json.dumps({"playthroughs": [], "ext": {"x": marker}}),
        expectedRevision=None,
    )
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": f"hello {marker}"}, 202)
    await play.idle(sid)
    status, _ = await play.raw(
        "PUT", "/workspace/files?path=catalog.json", {"content": marker, "expectedRevision": None}
    )
    assert status == 409
    logs = await play.v2("GET", "/operation-logs?limit=1000")
    text = json.dumps(logs)
    assert marker not in text
    assert marker not in caplog.text
    records = logs["records"]
    operations = {r["operation"] for r in records}
    assert {
        "workspace.bind",
        "workspace.dirs.create",
        "workspace.files.write",
        "session.create",
        "session.user-message",
    } <= operations
    # One operationId per request: start, stages and exactly one terminal record.
    by_id: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_id.setdefault(record["operationId"], []).append(record)
    for items in by_id.values():
        stages = [r["stage"] for r in reversed(items)]
        assert stages[0] == "start" and stages[-1] in ("success", "failure")
        assert sum(s in ("success", "failure") for s in stages) == 1
    failures = [r for r in records if r["stage"] == "failure"]
    assert [(r["errorCode"], r["status"]) for r in failures] == [
        ("PLAY_FILE_REVISION_CONFLICT", 409)
    ]
    # GETs stay quiet.
    before = len(records)
    await play.v2("GET", "/workspace")
    await play.v2("GET", f"/sessions/{sid}/messages")
    again = await play.v2("GET", "/operation-logs?limit=1000")
    assert len(again["records"]) == before


async def test_operation_log_filters_cursor_and_export(play: Play) -> None:
    await play.bind()
    for i in range(5):
        await play.write(f"f{i}.txt", "x")
    page = await play.v2(
        "GET", "/operation-logs?operation=workspace.files.write&status=success&limit=2"
    )
    assert len(page["records"]) == 2 and page["nextCursor"]
    rest = await play.v2(
        "GET",
        f"/operation-logs?operation=workspace.files.write&status=success&limit=10&cursor={page['nextCursor']}",
    )
    paths = [r["path"] for r in page["records"] + rest["records"]]
    assert paths == [f"f{i}.txt" for i in reversed(range(5))]
    one = page["records"][0]["operationId"]
    only = await play.v2("GET", f"/operation-logs?operationId={one}")
    assert {r["operationId"] for r in only["records"]} == {one}
    resp = await play.host.client.get(V2 + "/operation-logs?format=jsonl&status=success")
    assert resp.content_type == "application/x-ndjson"
    lines = (await resp.text()).splitlines()
    assert len(lines) == 6 and all(json.loads(line)["stage"] == "success" for line in lines)
    future = await play.v2("GET", "/operation-logs?from=2999-01-01T00:00:00.000Z")
    assert future["records"] == []
    for bad in ("limit=0", "status=maybe", "from=yesterday", "cursor=x", "bogus=1"):
        status, body = await play.raw("GET", f"/operation-logs?{bad}")
        assert (status, body["code"]) == (400, "PLAY_OPERATION_LOG_QUERY_INVALID"), bad


def test_journal_rotates_and_stays_bounded(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from innkeeper_tavern.features.play import oplog

    monkeypatch.setattr(oplog, "MAX_JOURNAL_FILE_BYTES", 2000)
    journal = oplog.Journal(tmp_path, logger=logging.getLogger("t"), clock_ms=lambda: 0)
    journal.open()
    for i in range(500):
        journal.append({"operationId": f"op-{i}", "operation": "x", "stage": "start"})
    journal.close()
    files = sorted(p.name for p in (tmp_path / oplog.JOURNAL_DIR).iterdir())
    assert files == [f"operations.{i}.jsonl" for i in range(1, 5)] + ["operations.jsonl"]
    assert sum(p.stat().st_size for p in (tmp_path / oplog.JOURNAL_DIR).iterdir()) <= 5 * 2000
    seqs = [r["seq"] for r in journal.records()]
    assert seqs == sorted(seqs, reverse=True) and seqs[0] == 500
    reopened = oplog.Journal(tmp_path, logger=logging.getLogger("t"), clock_ms=lambda: 0)
    reopened.open()
    assert reopened.append({"operation": "y", "stage": "start"})["seq"] == 501
    reopened.close()
