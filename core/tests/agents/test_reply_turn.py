"""``AgentService.reply``: a normal turn that claims no input (docs/sessions.md "Turn kinds"),
refused while a turn runs or input is queued."""

from __future__ import annotations

from typing import Any

import pytest

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.sessions import TurnConflict


async def test_a_reply_answers_again_without_a_user_message(api: Any) -> None:
    session = await api.new_session()
    api.provider.enqueue("First.")
    await api.prompt(session, "Hello.")
    await api.idle(session)
    agents = api.host.get(AGENTS)
    api.provider.enqueue("Second.")
    assert await agents.reply(session) == 2
    await api.idle(session)
    view = await api.call("GET", f"/host/api/sessions/{session}/messages")
    assert [(m["role"], m["text"], m["turn"]) for m in view["messages"]] == [
        ("user", "Hello.", 1),
        ("assistant", "First.", 1),
        ("assistant", "Second.", 2),
    ]
    assert [m.role for m in api.provider.requests[-1].messages].count("user") == 1

    api.provider.enqueue(SyntheticReply(text="slow reply here", delay_s=0.2))
    await agents.reply(session)
    with pytest.raises(TurnConflict):
        await agents.reply(session)
    await api.idle(session)
