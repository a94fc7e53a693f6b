"""Steering sent during a reply that is then cancelled is delivered first in the next turn, never
as a late second step after that turn's reply (issue 10, item 6; docs/sessions.md)."""

from __future__ import annotations

import asyncio
from typing import Any

from innkeeper_core.providers.synthetic import SyntheticReply


async def wait_for(api: Any, session: str, kind: str) -> None:
    for _ in range(400):
        if kind in await api.types(session):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {kind} event")


async def test_steering_of_a_cancelled_reply_opens_the_next_turn(api: Any) -> None:
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply(text="a b c d e f g h i j", delay_s=0.2), "Next reply")
    await api.prompt(session, "Start")
    await wait_for(api, session, "request/header")
    await api.prompt(session, "Mind the wolves", mode="steer")
    await api.call("POST", f"/host/api/sessions/{session}/cancel")
    await api.idle(session)

    await api.prompt(session, "Where are we?")
    await api.idle(session)
    events = await api.events(session)
    starts = [i for i, e in enumerate(events) if e["data"]["type"] == "turn/start"]
    second = events[starts[1] :]
    users = [e["data"] for e in second if e["data"]["type"] == "user/message"]
    assert [(u["origin"]["kind"], u["content"][0]["text"]) for u in users] == [
        ("steering", "Mind the wolves"),
        ("user", "Where are we?"),
    ]
    # One request, one reply: the steering is not sent again as a second step.
    assert [e["data"]["type"] for e in second].count("assistant/message") == 1
    sent = [m.content for m in api.provider.requests[-1].messages if m.role == "user"]
    assert sent[-2:] == ["Mind the wolves", "Where are we?"]
