"""v2 continue and impersonate (docs/play.md; docs/sessions.md "Turn kinds")."""

from __future__ import annotations

from play_harness import Play


async def test_continue_and_impersonate_over_the_play_routes(play: Play) -> None:
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    status, body = await play.raw("POST", f"/sessions/{sid}/continue", {})
    assert (status, body["code"]) == (409, "PLAY_NOTHING_TO_CONTINUE")
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "hello"}, 202)
    await play.idle(sid)
    before = await play.v2("GET", f"/sessions/{sid}/messages")

    started = await play.v2("POST", f"/sessions/{sid}/continue", {}, 202)
    assert started["turn"] == 2
    await play.idle(sid)
    after = await play.v2("GET", f"/sessions/{sid}/messages")
    replies = [m for m in after["messages"] if m["role"] == "assistant"]
    assert len(replies) == 2 and replies[1]["continues"] == replies[0]["id"]

    shown = await play.v2("POST", f"/sessions/{sid}/impersonate", {}, 200)
    assert shown["turn"] == 3 and shown["reason"]["kind"] == "completed"
    assert isinstance(shown["text"], str) and shown["text"]
    again = await play.v2("GET", f"/sessions/{sid}/messages")
    assert [m["id"] for m in again["messages"] if m["role"] != "system"] == [
        m["id"] for m in after["messages"] if m["role"] != "system"
    ]
    assert len(before["messages"]) < len(after["messages"])
    status, body = await play.raw("POST", f"/sessions/{sid}/impersonate", {"x": 1})
    assert (status, body["code"]) == (400, "PLAY_BODY_INVALID")
    status, body = await play.raw("POST", "/sessions/s-missing/continue", {})
    assert (status, body["code"]) == (404, "PLAY_SESSION_NOT_FOUND")
