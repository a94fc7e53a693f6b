"""Play sessions: create, branch, user messages (requestId once), messages and coordinates."""

from __future__ import annotations

import json

from play_harness import Play


async def turn(play: Play, session_id: str, text: str) -> None:
    await play.v2("POST", f"/sessions/{session_id}/user-message", {"text": text}, 202)
    await play.idle(session_id)


async def test_create_binds_the_default_workspace_when_none_is(play: Play) -> None:
    created = await play.v2("POST", "/sessions", {}, 201)
    view = await play.v2("GET", "/workspace")
    assert view["selected"] is True and view["rootPath"] == view["defaultRootPath"]
    header = await play.call("GET", f"/host/api/sessions/{created['sessionId']}")
    assert header["header"]["workspaceId"] == view["workspaceId"]


async def test_create_copies_selection_and_titles_by_character(play: Play) -> None:
    await play.bind()
    card = await play.character("Ada")
    first = await play.v2("POST", "/sessions", {}, 201)
    sid = first["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": sid, "characterCardId": card})
    second = await play.v2("POST", "/sessions", {"selectionFromSessionId": sid}, 201)
    assert second["title"].startswith("Ada ")
    selected = await play.v1("GET", f"/character-selection?sessionId={second['sessionId']}")
    assert selected["character"]["id"] == card
    status, body = await play.raw("POST", "/sessions", {"selectionFromSessionId": "nope"})
    assert (status, body["code"]) == (404, "PLAY_SESSION_NOT_FOUND")
    status, body = await play.raw("POST", "/sessions", {"bogus": 1})
    assert (status, body["code"]) == (400, "PLAY_BODY_INVALID")


async def test_messages_origins_and_paging(play: Play) -> None:
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    empty = await play.v2("GET", f"/sessions/{sid}/messages")
    assert (empty["messages"], empty["throughSeq"]) == ([], 0)
    for i in range(3):
        await turn(play, sid, f"hello {i}")
    data = await play.v2("GET", f"/sessions/{sid}/messages")
    roles = [(m["role"], m["origin"]["kind"]) for m in data["messages"] if m["role"] != "system"]
    assert roles == [("user", "user"), ("assistant", "assistant")] * 3
    assert data["incompleteTurn"] is False and data["stoppedRequest"] is None
    assert data["sessionFormatVersion"] == 4 and data["migratedFromV2"] is False
    host = await play.call("GET", f"/host/api/sessions/{sid}/messages")
    assert [m["seq"] for m in data["messages"]] == [m["seq"] for m in host["messages"]]
    assert data["throughSeq"] == host["throughSeq"]
    coords = await play.v2("GET", f"/sessions/{sid}/coordinates")
    assert coords == {"ok": True, "sessionFormatVersion": 4, "migratedFromV2": False}
    for path in ("/sessions/bad%20id/coordinates", "/sessions/bad%20id/messages"):
        status, body = await play.raw("GET", path)
        assert (status, body["code"]) == (400, "PLAY_SESSION_INVALID")
    status, body = await play.raw("GET", "/sessions/s-missing/coordinates")
    assert (status, body["code"]) == (404, "PLAY_SESSION_NOT_FOUND")
    status, body = await play.raw("POST", f"/sessions/{sid}/coordinates", {})
    assert (status, body["code"]) == (405, "PLAY_METHOD_NOT_ALLOWED")


async def test_messages_read_many_pages_with_one_pinned_snapshot(play: Play) -> None:
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    for i in range(160):  # > one host page of 1000 events (7 events a turn)
        await turn(play, sid, f"m{i}")
    data = await play.v2("GET", f"/sessions/{sid}/messages")
    users = [m for m in data["messages"] if m["origin"]["kind"] == "user"]
    assert [m["text"] for m in users] == [f"m{i}" for i in range(160)]
    seqs = [m["seq"] for m in data["messages"]]
    assert seqs == sorted(seqs) and data["throughSeq"] > 1000


async def test_user_message_request_id_is_accepted_once(play: Play) -> None:
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    body = {"text": "once", "requestId": "req-1"}
    first = await play.v2("POST", f"/sessions/{sid}/user-message", body, 202)
    again = await play.v2("POST", f"/sessions/{sid}/user-message", body, 202)
    assert first["replayed"] is False and again["replayed"] is True
    assert again["spliceSeq"] == first["spliceSeq"]
    await play.idle(sid)
    data = await play.v2("GET", f"/sessions/{sid}/messages")
    assert [m["text"] for m in data["messages"] if m["role"] == "user"] == ["once"]
    status, answer = await play.raw(
        "POST", f"/sessions/{sid}/user-message", {"text": "other", "requestId": "req-1"}
    )
    assert (status, answer["code"]) == (409, "PLAY_REQUEST_ID_CONFLICT")
    status, answer = await play.raw("POST", f"/sessions/{sid}/user-message", {"text": " "})
    assert (status, answer["code"]) == (400, "PLAY_BODY_INVALID")


async def test_branch_coordinates_and_selection(play: Play) -> None:
    await play.bind()
    card = await play.character("Ada")
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": sid, "characterCardId": card})
    await turn(play, sid, "one")
    await turn(play, sid, "two")
    data = await play.v2("GET", f"/sessions/{sid}/messages")
    first_reply = next(m for m in data["messages"] if m["role"] == "assistant")
    at = first_reply["seq"]
    for bad in ({"atEventId": -1}, {"atEventId": "3"}, {"atEventId": 10**9}, {}):
        status, body = await play.raw("POST", f"/sessions/{sid}/branch", bad)
        assert (status, body["code"]) == (400, "PLAY_COORDINATES_INVALID"), bad
    status, body = await play.raw(
        "POST", f"/sessions/{sid}/branch", {"atEventId": at, "sessionFormatVersion": None}
    )
    assert (status, body["code"]) == (400, "PLAY_COORDINATES_INVALID")
    status, body = await play.raw(
        "POST", f"/sessions/{sid}/branch", {"atEventId": at, "sessionFormatVersion": 3}
    )
    assert (status, body["code"]) == (409, "PLAY_COORDINATES_MIGRATION_REQUIRED")
    child = await play.v2(
        "POST", f"/sessions/{sid}/branch", {"atEventId": at, "sessionFormatVersion": 4}, 201
    )
    cid = child["sessionId"]
    inherited = await play.v2("GET", f"/sessions/{cid}/messages")
    assert [m["text"] for m in inherited["messages"] if m["role"] == "user"] == ["one"]
    assert inherited["messages"][-1]["seq"] == at
    selected = await play.v1("GET", f"/character-selection?sessionId={cid}")
    assert selected["character"]["id"] == card
    # The child continues on its own; the source is unchanged.
    await turn(play, cid, "three")
    source = await play.v2("GET", f"/sessions/{sid}/messages")
    assert [m["text"] for m in source["messages"] if m["role"] == "user"] == ["one", "two"]


async def test_branch_of_an_open_turn_is_fork_unavailable(play: Play) -> None:
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await turn(play, sid, "one")
    play.enqueue_slow_reply(0.3)
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "slow"}, 202)
    status, body = await play.raw("POST", f"/sessions/{sid}/branch", {"atEventId": 1})
    assert (status, body["code"]) == (409, "PLAY_FORK_UNAVAILABLE")
    await play.idle(sid)


async def test_messages_display_bodies_leave_unshown_bodies_out(play: Play) -> None:
    await play.bind()
    card = await play.character("Ada")
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": sid, "characterCardId": card})
    # An import context makes the first turn's assembly a system prompt with a body.
    await play.write("ada/p1/import-context.json", json.dumps({"schemaVersion": 1, "qa": []}))
    reference = {"reference": {"path": "ada/p1/import-context.json"}}
    await play.v2("PUT", f"/sessions/{sid}/import-context", reference)
    for i in range(2):
        await turn(play, sid, f"hello {i}")
    full = await play.v2("GET", f"/sessions/{sid}/messages")
    assert full == await play.v2("GET", f"/sessions/{sid}/messages?bodies=full")
    light = await play.v2("GET", f"/sessions/{sid}/messages?bodies=display")
    assert {k: v for k, v in light.items() if k != "messages"} == {
        k: v for k, v in full.items() if k != "messages"
    }
    assert len(light["messages"]) == len(full["messages"])
    unshown = 0
    for whole, lean in zip(full["messages"], light["messages"], strict=True):
        if whole["origin"]["kind"] in ("system", "context"):
            unshown += 1
            assert whole["text"] and "bodyOmitted" not in whole
            assert (lean["text"], lean["content"], lean["bodyOmitted"]) == ("", [], True)
            assert {
                k: v for k, v in lean.items() if k not in ("text", "content", "bodyOmitted")
            } == {k: v for k, v in whole.items() if k not in ("text", "content")}
        else:  # the text is the whole body: content (text blocks only) is not repeated
            assert "content" not in lean and "bodyOmitted" not in lean
            assert "".join(b["text"] for b in whole["content"]) == whole["text"] == lean["text"]
            assert lean == {k: v for k, v in whole.items() if k != "content"}
    assert unshown >= 1, "the assembled system prompt is a system-origin message"
    status, body = await play.raw("GET", f"/sessions/{sid}/messages?bodies=none")
    assert (status, body["code"]) == (400, "PLAY_MESSAGES_QUERY_INVALID")
