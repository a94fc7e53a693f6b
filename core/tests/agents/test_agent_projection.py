"""A request projector changes what is sent, never the durable history."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from innkeeper_hostapi.testing import RunningHost

from .conftest import Api

PROJECTOR = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import REQUEST_PROJECTOR, SYSTEM_PROMPT
from innkeeper_hostapi.providers import ChatMessage


class DepthLore:
    name = "depth-lore"

    async def project(self, turn, messages):
        note = ChatMessage(role="system", content=f"[lore at depth 1, turn {turn.turn}]")
        return (*messages[:-1], note, messages[-1])


@hookimpl
def innkeeper_plugin_setup(ctx):
    ctx.get(SYSTEM_PROMPT).section(ctx, "base", 0, lambda turn: "Base prompt.")
    ctx.claim_slot(REQUEST_PROJECTOR, DepthLore())
"""


async def test_projection_is_sent_and_recorded_by_reference(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("projector", plugin_dir("projector", PROJECTOR))
    session = await api.new_session()
    await api.prompt(session, "Hello")
    await api.idle(session)

    (request,) = api.provider.requests
    sent = [(m.role, m.content) for m in request.messages]
    assert sent == [
        ("system", "Base prompt."),
        ("system", "[lore at depth 1, turn 1]"),
        ("user", "Hello"),
    ]
    events = await api.events(session)
    assembly = next(e["data"] for e in events if e["data"]["type"] == "request/assembly")
    by_seq = {e["seq"]: e["data"] for e in events}
    system, lore, user = assembly["entries"]
    assert by_seq[system["ref"]]["type"] == "system/message"
    assert by_seq[user["ref"]]["type"] == "user/message"
    assert (lore["role"], lore["ref"], lore["content"]) == (
        "system",
        None,
        "[lore at depth 1, turn 1]",
    )
    wire = [{"role": r, "content": c, "name": None} for r, c in sent]
    digest = hashlib.sha256(json.dumps(wire, ensure_ascii=False).encode()).hexdigest()
    assert assembly["sha256"] == digest
    assert assembly["projector"] == "depth-lore"

    # The request-only message never enters durable history or the derived messages.
    messages = (await api.call("GET", f"/host/api/sessions/{session}/messages"))["messages"]
    assert "[lore at depth 1, turn 1]" not in [m["text"] for m in messages]

    # The slot is a singleton; unloading frees it and requests go out unprojected.
    await innkeeper_host.unload("projector")
    await api.prompt(session, "Again")
    await api.idle(session)
    assert [m.content for m in api.provider.requests[-1].messages] == [
        "Hello",
        "Synthetic reply to: Hello",
        "Again",
    ]
