"""Continue and impersonate turns (docs/sessions.md "Turn kinds"; issue 30, item 6)."""

from __future__ import annotations

from typing import Any


async def _chat(api: Any) -> str:
    session = await api.new_session()
    api.provider.enqueue("The door creaks")
    await api.prompt(session, "I knock.")
    await api.idle(session)
    return str(session)


async def test_continue_extends_the_last_reply_and_sends_no_user_message(api: Any) -> None:
    session = await _chat(api)
    api.provider.enqueue(" open.")
    answer = await api.call("POST", f"/host/api/sessions/{session}/continue", {}, status=202)
    assert answer["turn"] == 2
    await api.idle(session)
    # The request ends with the reply being continued; no new user input was sent.
    sent = api.provider.requests[-1].messages
    assert [m.role for m in sent if m.role != "system"] == ["user", "assistant"]
    assert sent[-1].content == "The door creaks"
    assert not api.provider.requests[-1].tools

    view = await api.call("GET", f"/host/api/sessions/{session}/messages")
    replies = [m for m in view["messages"] if m["role"] == "assistant"]
    assert [m["text"] for m in replies] == ["The door creaks", " open."]
    assert replies[1]["continues"] == replies[0]["id"] and replies[0]["continues"] is None
    starts = [e["data"] for e in await api.events(session) if e["data"]["type"] == "turn/start"]
    assert starts[-1] == {"type": "turn/start", "turn": 2, "kind": "continue"}
    assert "kind" not in starts[0]  # a normal turn's log is as before

    # A second continue extends the same (root) message.
    api.provider.enqueue(" Wind.")
    await api.call("POST", f"/host/api/sessions/{session}/continue", status=202)
    await api.idle(session)
    view = await api.call("GET", f"/host/api/sessions/{session}/messages")
    replies = [m for m in view["messages"] if m["role"] == "assistant"]
    assert [m["continues"] for m in replies] == [None, replies[0]["id"], replies[0]["id"]]


async def test_continue_needs_a_finished_reply_last(api: Any) -> None:
    session = await api.new_session()
    before = len(await api.events(session))
    refused = await api.call("POST", f"/host/api/sessions/{session}/continue", status=409)
    assert refused["code"] == "NOTHING_TO_CONTINUE"
    assert len(await api.events(session)) == before
    stray = await api.call("POST", f"/host/api/sessions/{session}/continue", {"x": 1}, status=400)
    assert stray["code"] == "INVALID_BODY"
    missing = await api.call("POST", "/host/api/sessions/nope/continue", status=404)
    assert missing["code"] == "SESSION_NOT_FOUND"


async def test_impersonate_returns_the_text_and_appends_no_message(api: Any) -> None:
    session = await _chat(api)
    before = await api.call("GET", f"/host/api/sessions/{session}/messages")
    api.provider.enqueue("I push the door.")
    answer = await api.call("POST", f"/host/api/sessions/{session}/impersonate", {})
    assert answer["text"] == "I push the door."
    assert answer["turn"] == 2 and answer["reason"]["kind"] == "completed"
    after = await api.call("GET", f"/host/api/sessions/{session}/messages")
    assert [m["id"] for m in after["messages"] if m["role"] != "system"] == [
        m["id"] for m in before["messages"] if m["role"] != "system"
    ]
    types = [e["data"]["type"] for e in await api.events(session)]
    assert types.count("assistant/message") == 1 and types.count("user/message") == 1
    # The next normal turn's history has no trace of the impersonation.
    api.provider.enqueue("It opens.")
    await api.prompt(session, "I push the door.")
    await api.idle(session)
    history = [m.content for m in api.provider.requests[-1].messages if m.role != "system"]
    assert history == ["I knock.", "The door creaks", "I push the door."]
