"""A failed turn shows with the messages and can be retried without a second user message
(issue 10, item 5)."""

from __future__ import annotations

from typing import Any

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.providers import ProviderError


async def test_a_failed_turn_is_visible_and_a_retry_reruns_it(api: Any) -> None:
    session = await api.new_session()
    api.provider.enqueue(
        SyntheticReply(text="", error=ProviderError("network", "connection refused"))
    )
    await api.prompt(session, "I limp into the glade.")
    await api.idle(session)

    view = await api.call("GET", f"/host/api/sessions/{session}/messages")
    failed = view["failedTurn"]
    assert failed["turn"] == 1 and failed["code"] == "PROVIDER_NETWORK"
    assert "connection refused" in failed["message"]
    users = [m for m in view["messages"] if m["role"] == "user"]
    assert failed["userEventId"] == users[0]["seq"]

    # The route takes nothing; a stray field is refused before anything runs, while `{}` (what
    # most HTTP clients send with a POST) is the same as no body.
    stray = await api.call("POST", f"/host/api/sessions/{session}/retry", {"x": 1}, status=400)
    assert stray["code"] == "INVALID_BODY"
    api.provider.enqueue("The glade is quiet.")
    retried = await api.call("POST", f"/host/api/sessions/{session}/retry", {}, status=202)
    assert retried["turn"] == 2
    await api.idle(session)
    view = await api.call("GET", f"/host/api/sessions/{session}/messages")
    assert view["failedTurn"] is None
    assert [(m["role"], m["text"]) for m in view["messages"]] == [
        ("user", "I limp into the glade."),  # once: the retry sends no second user message
        ("assistant", "The glade is quiet."),
    ]
    sent = [m.role for m in api.provider.requests[-1].messages]
    assert sent.count("user") == 1

    # Nothing failed now: a retry is refused with a code, and nothing is written.
    before = len(await api.events(session))
    refused = await api.call("POST", f"/host/api/sessions/{session}/retry", status=409)
    assert refused["code"] == "NO_FAILED_TURN"
    assert len(await api.events(session)) == before
    missing = await api.call("POST", "/host/api/sessions/nope/retry", status=404)
    assert missing["code"] == "SESSION_NOT_FOUND"
