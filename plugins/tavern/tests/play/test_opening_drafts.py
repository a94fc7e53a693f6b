"""Opening drafts (`docs/contract/openings.md#opening-drafts`): a new playthrough's opening is
edited without any host session; materialize reserves exactly one session for the first send."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

from opening_harness import card
from play_harness import Play


async def session_count(play: Play) -> int:
    listed = await play.call("GET", "/host/api/sessions?limit=200")
    return len(listed["sessions"])


async def new_draft(play: Play, **body: Any) -> dict[str, Any]:
    await play.bind()
    cid = await card(play)
    created: dict[str, Any] = await play.v2("POST", "/drafts", {"characterId": cid, **body}, 201)
    return created


def stat(answer: dict[str, Any], index: int) -> dict[str, Any]:
    """The selected opening's ``stat_data`` of a draft answer (checking the index)."""
    assert answer["opening"]["greetingIndex"] == index
    data: dict[str, Any] = answer["opening"]["variables"]["stat_data"]
    return data


async def test_create_makes_a_catalog_row_without_a_session(play: Play) -> None:
    before = await session_count(play)
    created = await new_draft(play, source="character-sidebar")
    draft, row = created["draft"], created["playthrough"]
    assert draft["revision"] == 1 and draft["status"] == "open"
    assert draft["selection"]["greetingIndex"] == 0
    assert row["id"] == draft["playthroughId"]
    assert row["ext"]["pmpDshTavern"]["draftId"] == draft["id"]
    assert "rootSessionId" not in row["ext"]["pmpDshTavern"]
    catalog = json.loads((play.root / "catalog.json").read_text())
    assert [r["id"] for r in catalog["playthroughs"]] == [row["id"]]
    # The selected greeting's envelope was applied once to [initvar], without a turn.
    assert stat(created, 0)["hp"] == 90 and stat(created, 0)["place"] == "home"
    assert draft["openings"] == {}  # generated openings are never stored, only edits
    assert await session_count(play) == before
    # A healthy unstarted draft: an empty timeline, availability "empty" (never archived).
    availability = await play.v2("GET", f"/playthroughs/{row['id']}/availability")
    assert availability["status"] == "empty" and availability["sessionIds"] == []
    got = await play.v2("GET", f"/drafts/{draft['id']}")
    assert got == created


async def test_bad_inputs_change_nothing(play: Play) -> None:
    created = await new_draft(play)
    did = created["draft"]["id"]
    url = f"/drafts/{did}"
    cases: list[tuple[str, str, Any, int, str]] = [
        ("PUT", url, {"selection": {"greetingIndex": 1}}, 400, "DRAFT_REVISION_REQUIRED"),
        ("PUT", url, {"expectedRevision": 7, "selection": {}}, 409, "DRAFT_REVISION_CONFLICT"),
        ("PUT", url, {"expectedRevision": 1, "characterId": "x"}, 400, "DRAFT_CHARACTER_IMMUTABLE"),
        ("PUT", url, {"expectedRevision": 1, "bogus": 1}, 400, "DRAFT_INVALID"),
        (
            "PUT",
            url,
            {"expectedRevision": 1, "selection": {"greetingIndex": 3}},
            400,
            "DRAFT_GREETING_INVALID",
        ),
        ("PUT", url, {"expectedRevision": 1, "variables": [1]}, 400, "DRAFT_INVALID"),
        ("PUT", url, {"expectedRevision": 1, "importContextRef": "../x"}, 400, "DRAFT_INVALID"),
        ("POST", url + "/preview", {"expectedRevision": 2}, 409, "DRAFT_REVISION_CONFLICT"),
        ("POST", url + "/preview", {"expectedRevision": 1, "x": 1}, 400, "DRAFT_INVALID"),
        ("POST", url + "/materialize", {"expectedRevision": 1, "text": "hi"}, 400, "DRAFT_INVALID"),
        (
            "POST",
            url + "/materialize",
            {"expectedRevision": 1, "operationId": "o", "text": " "},
            400,
            "DRAFT_INVALID",
        ),
        ("POST", url + "/cancel", {"why": 1}, 400, "DRAFT_INVALID"),
        ("GET", "/drafts/not-a-draft", None, 400, "DRAFT_INVALID"),
        ("GET", "/drafts/draft-" + "0" * 32, None, 404, "DRAFT_NOT_FOUND"),
        ("POST", "/drafts", {"characterId": "missing"}, 404, "PLAY_CHARACTER_NOT_FOUND"),
        (
            "POST",
            "/drafts",
            {"characterId": created["draft"]["characterId"], "x": 1},
            400,
            "DRAFT_INVALID",
        ),
    ]
    catalog = (play.root / "catalog.json").read_bytes()
    for method, path, body, status, code in cases:
        got, answer = await play.raw(method, path, body)
        assert (got, answer.get("code")) == (status, code), (method, path, body, answer)
    assert (play.root / "catalog.json").read_bytes() == catalog
    assert await play.v2("GET", url) == created


async def test_greeting_switch_keeps_each_greetings_variables_and_edits(play: Play) -> None:
    created = await new_draft(play)
    did = created["draft"]["id"]
    edited_a = json.loads(json.dumps(created["opening"]["variables"]))
    edited_a["stat_data"]["place"] = "garden"
    r2 = await play.v2("PUT", f"/drafts/{did}", {"expectedRevision": 1, "variables": edited_a})
    assert stat(r2, 0)["place"] == "garden"
    r3 = await play.v2(
        "PUT", f"/drafts/{did}", {"expectedRevision": 2, "selection": {"greetingIndex": 1}}
    )
    # Greeting B's opening starts from [initvar], never from A's updates or edits.
    assert stat(r3, 1) == {"hp": 40, "place": "home"}
    r4 = await play.v2(
        "PUT", f"/drafts/{did}", {"expectedRevision": 3, "selection": {"greetingIndex": 0}}
    )
    assert r4["draft"]["openings"]["0"]["edited"] is True and r4["opening"]["edited"] is True
    assert "variables" not in r4["draft"]["openings"]["0"]  # the record names its edit file
    assert stat(r4, 0) == {"hp": 90, "place": "garden"}
    preview = (await play.v2("POST", f"/drafts/{did}/preview", {"expectedRevision": 4}))["preview"]
    assert preview["scope"] == "opening-draft" and preview["pendingInputsIncluded"] is False
    assert preview["draftId"] == did and preview["draftRevision"] == 4
    assert preview["greetingIndex"] == 0 and preview["greeting"].startswith("Morning.")
    assert preview["variables"]["stat_data"] == {"hp": 90, "place": "garden"}
    # resetVariables regenerates the selected greeting's opening.
    r5 = await play.v2("PUT", f"/drafts/{did}", {"expectedRevision": 4, "resetVariables": True})
    assert stat(r5, 0) == {"hp": 90, "place": "home"}
    assert r5["opening"]["edited"] is False and r5["draft"]["openings"] == {}


async def test_materialize_is_idempotent_and_reserves_one_session(play: Play) -> None:
    created = await new_draft(play, selection={"greetingIndex": 1})
    did = created["draft"]["id"]
    before = await session_count(play)
    body = {"expectedRevision": 1, "operationId": "op-1", "text": "Hello"}
    first = await play.v2("POST", f"/drafts/{did}/materialize", body)
    assert first["accepted"] is False and first["requestId"]
    assert await play.v2("POST", f"/drafts/{did}/materialize", body) == first
    assert await session_count(play) == before + 1
    got, conflict = await play.raw("POST", f"/drafts/{did}/materialize", {**body, "text": "Other"})
    assert (got, conflict["code"]) == (409, "DRAFT_OPERATION_CONFLICT")
    got, other = await play.raw("POST", f"/drafts/{did}/materialize", {**body, "operationId": "2"})
    assert (got, other["code"]) == (409, "DRAFT_MATERIALIZED")
    sid = first["sessionId"]
    view = await play.v2("GET", f"/drafts/{did}")
    assert view["playthrough"]["ext"]["pmpDshTavern"]["rootSessionId"] == sid
    assert view["draft"]["status"] == "materialized"
    selection = await play.v1("GET", f"/character-selection?sessionId={sid}")
    assert selection["selection"]["characterCardId"] == created["draft"]["characterId"]
    assert selection["selection"]["character"]["greetingIndex"] == 1
    # The existing user-message, with the same text and requestId, then a replay of both.
    play.provider.enqueue("Hi there.")
    message = {"text": "Hello", "requestId": first["requestId"]}
    sent = await play.v2("POST", f"/sessions/{sid}/user-message", message, 202)
    assert sent["replayed"] is False
    again = await play.v2("POST", f"/sessions/{sid}/user-message", message, 202)
    assert again["replayed"] is True
    await play.idle(sid)
    assert (await play.v2("POST", f"/drafts/{did}/materialize", body))["accepted"] is True
    # Cancelling an admitted session stops it but keeps its history and binding.
    cancelled = await play.v2("POST", f"/drafts/{did}/cancel", {})
    assert cancelled["released"] is False
    assert cancelled["playthrough"]["ext"]["pmpDshTavern"]["rootSessionId"] == sid


async def test_cancel_releases_a_blank_reservation(play: Play) -> None:
    created = await new_draft(play)
    did = created["draft"]["id"]
    body = {"expectedRevision": 1, "operationId": "op-1", "text": "Hello"}
    first = await play.v2("POST", f"/drafts/{did}/materialize", body)
    cancelled = await play.v2("POST", f"/drafts/{did}/cancel", {})
    assert cancelled["released"] is True
    draft = cancelled["draft"]
    assert draft["status"] == "open" and draft["lastInput"] == "Hello"
    assert draft["materialize"] is None and draft["revision"] == 2
    assert draft["releasedSessionIds"] == [first["sessionId"]]
    assert "rootSessionId" not in cancelled["playthrough"]["ext"]["pmpDshTavern"]
    # The draft is editable again and a new send reserves a new session.
    again = await play.v2(
        "POST", f"/drafts/{did}/materialize", {**body, "expectedRevision": 2, "operationId": "op-2"}
    )
    assert again["sessionId"] != first["sessionId"]


async def mvu_history(play: Play, session_id: str) -> list[dict[str, Any]]:
    scope = urllib.parse.quote(json.dumps({"authority": "local", "sessionId": session_id}))
    listed = await play.v1("GET", f"/mvu/resources?scope={scope}")
    rid = urllib.parse.quote(listed["resources"][0]["id"])
    rows: list[dict[str, Any]] = (
        await play.v1("GET", f"/mvu/history?id={rid}&scope={scope}&includeBefore=1")
    )["history"]
    return rows


async def test_first_send_transfers_only_the_selected_opening(play: Play) -> None:
    created = await new_draft(play)
    did = created["draft"]["id"]
    edited = json.loads(json.dumps(created["opening"]["variables"]))
    edited["stat_data"]["place"] = "garden"
    await play.v2("PUT", f"/drafts/{did}", {"expectedRevision": 1, "variables": edited})
    # Visit greeting B (its own opening), then come back to A and send.
    await play.v2(
        "PUT", f"/drafts/{did}", {"expectedRevision": 2, "selection": {"greetingIndex": 1}}
    )
    await play.v2(
        "PUT", f"/drafts/{did}", {"expectedRevision": 3, "selection": {"greetingIndex": 0}}
    )
    body = {"expectedRevision": 4, "operationId": "op", "text": "Hello"}
    receipt = await play.v2("POST", f"/drafts/{did}/materialize", body)
    sid = receipt["sessionId"]
    play.provider.enqueue("_.set('hp', 10);")
    message = {"text": "Hello", "requestId": receipt["requestId"]}
    await play.v2("POST", f"/sessions/{sid}/user-message", message, 202)
    await play.idle(sid)
    play.provider.enqueue("_.set('hp', 5);")
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "Again"}, 202)
    await play.idle(sid)
    rows = [r for r in await mvu_history(play, sid) if r.get("committed")]
    # The first version is A's opening with the player's edit (not B's hp 40, not A's raw one).
    assert rows[0]["stat_data"] == {"hp": 90, "place": "garden"}
    assert [r["stat_data"]["hp"] for r in rows] == [90, 10, 5]
    # Later replies never touch the draft's opening snapshot.
    after = await play.v2("GET", f"/drafts/{did}")
    assert stat(after, 0) == {"hp": 90, "place": "garden"}
    assert list(after["draft"]["openings"]) == ["0"]


async def test_variables_that_break_the_card_are_refused(play: Play) -> None:
    created = await new_draft(play)
    did = created["draft"]["id"]
    got, answer = await play.raw(
        "PUT", f"/drafts/{did}", {"expectedRevision": 1, "variables": {"no": "stat_data"}}
    )
    assert got in (400, 409) and answer["code"].startswith("MVU_"), answer
    assert (await play.v2("GET", f"/drafts/{did}")) == created


async def test_an_unreadable_edit_is_a_stable_error_after_a_restart(
    start_play: Any, tmp_path: Path
) -> None:
    host, play = await start_play(tmp_path / "data")
    created = await new_draft(play)
    did = created["draft"]["id"]
    edited = json.loads(json.dumps(created["opening"]["variables"]))
    edited["stat_data"]["place"] = "garden"
    await play.v2("PUT", f"/drafts/{did}", {"expectedRevision": 1, "variables": edited})
    await host.close()
    (edit_file,) = (tmp_path / "data").rglob(f"{did}/0-*.json")
    edit_file.write_bytes(edit_file.read_bytes().replace(b"garden", b"gardex"))
    _, play = await start_play(tmp_path / "data")
    await play.bind()
    status, body = await play.raw("GET", f"/drafts/{did}")
    assert (status, body["code"]) == (500, "DRAFT_READ_FAILED")
    # Resetting that greeting drops the unreadable edit and regenerates its opening.
    reset = await play.v2("PUT", f"/drafts/{did}", {"expectedRevision": 2, "resetVariables": True})
    assert reset["opening"]["variables"]["stat_data"] == {"hp": 90, "place": "home"}
    assert not edit_file.exists()


async def test_a_draft_starts_with_the_global_default_preset(play: Play) -> None:
    made = await play.v1("POST", "/presets", {"name": "House"}, 201)
    pid = made["preset"]["id"]
    await play.v1("POST", "/select", {"id": pid})
    created = await new_draft(play)
    assert created["draft"]["selection"]["presetId"] == pid
    # A draft naming another preset keeps its own choice.
    other = (await play.v1("POST", "/presets", {"name": "Other"}, 201))["preset"]["id"]
    chosen = await new_draft(play, selection={"presetId": other})
    assert chosen["draft"]["selection"]["presetId"] == other
