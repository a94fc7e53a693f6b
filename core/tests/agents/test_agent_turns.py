"""Turns end to end over HTTP with the synthetic provider."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.providers import ProviderError
from innkeeper_hostapi.testing import RunningHost

from .conftest import Api, read_sse

PERSONA = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import REQUEST_HOOKS, SYSTEM_PROMPT

@hookimpl
def innkeeper_plugin_setup(ctx):
    ctx.get(SYSTEM_PROMPT).section(ctx, "persona", 10, lambda turn: "You are Ada.")

    def tune(turn, draft):
        draft.temperature = 0.5
        draft.max_tokens = 64
        draft.extras["top_p"] = 0.9

    ctx.get(REQUEST_HOOKS).adjust(ctx, "persona:sampling", 5, tune)
"""

LORE = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import REQUEST_HOOKS, SYSTEM_PROMPT

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def lore(turn):
        claimed = " | ".join(item.content[0].text for item in turn.claimed)
        return f"Lore for turn {turn.turn} (claimed: {claimed})"

    ctx.get(SYSTEM_PROMPT).section(ctx, "lore", 20, lore)
    ctx.get(SYSTEM_PROMPT).section(ctx, "empty", 30, lambda turn: None)

    def later(turn, draft):
        draft.temperature = draft.temperature + 0.25  # runs after persona's hook (order 5 < 9)

    ctx.get(REQUEST_HOOKS).adjust(ctx, "lore:sampling", 9, later)
"""


async def wait_for_event(api: Api, session: str, event_type: str) -> None:
    for _ in range(200):
        if event_type in await api.types(session):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {event_type} event")


async def test_full_turn_with_sections_and_call_config(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    # Loaded in reverse order: section order, not load order, decides placement.
    await innkeeper_host.load("lore", plugin_dir("lore", LORE))
    await innkeeper_host.load("persona", plugin_dir("persona", PERSONA))
    session = await api.new_session()
    receipt = await api.prompt(session, "Hello there")
    assert receipt["startedTurn"] is True
    await api.idle(session)

    (request,) = api.provider.requests
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[0].content == ("You are Ada.\n\nLore for turn 1 (claimed: Hello there)")
    assert request.messages[1].content == "Hello there"
    assert request.params.temperature == 0.75
    assert request.params.max_tokens == 64
    assert request.params.extras == {"top_p": 0.9}

    assert await api.types(session) == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "user/message",
        "system/message",
        "request/header",
        "assistant/message",
        "turn/end",
    ]
    events = await api.events(session)
    insert, claim = events[0]["data"], events[2]["data"]
    assert insert["op"] == "insert"
    assert claim["op"] == "claim"
    assert claim["claimEventSeqs"] == [events[0]["seq"]]
    assert events[-1]["data"]["reason"]["kind"] == "completed"

    messages = (await api.call("GET", f"/host/api/sessions/{session}/messages"))["messages"]
    assert [(m["role"], m["origin"]["kind"], m["text"]) for m in messages] == [
        ("user", "user", "Hello there"),
        ("system", "system", "You are Ada.\n\nLore for turn 1 (claimed: Hello there)"),
        ("assistant", "assistant", "Synthetic reply to: Hello there"),
    ]

    # The second turn sends the history; unloading a plugin removes its section and hook.
    await innkeeper_host.unload("lore")
    await api.prompt(session, "And again")
    await api.idle(session)
    second = api.provider.requests[-1]
    assert second.messages[0].content == "You are Ada."
    assert [m.content for m in second.messages[1:]] == [
        "Hello there",
        "Synthetic reply to: Hello there",
        "And again",
    ]
    assert second.params.temperature == 0.5


async def test_sse_streams_durable_and_partial_events(
    api: Api, innkeeper_host: RunningHost
) -> None:
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply(text="one two three", delay_s=0.01))
    resp = await innkeeper_host.client.get(f"/host/api/sessions/{session}/events")
    assert resp.headers["Content-Type"] == "text/event-stream"
    await api.prompt(session, "Stream please")
    frames = await read_sse(resp, lambda f: f.get("event") == "turn/end")
    partials = [f["data"]["text"] for f in frames if f["event"] == "assistant/partial"]
    assert "".join(partials) == "one two three"
    durable = [f for f in frames if "id" in f]
    assert [f["id"] for f in durable] == sorted(f["id"] for f in durable)
    assert durable[-1]["event"] == "turn/end"
    resp.close()

    # Reconnecting with Last-Event-ID replays only what came after it.
    resume_from = durable[3]["id"]
    resp = await innkeeper_host.client.get(
        f"/host/api/sessions/{session}/events", headers={"Last-Event-ID": str(resume_from)}
    )
    replay = await read_sse(resp, lambda f: f.get("event") == "turn/end")
    assert [f["id"] for f in replay] == [f["id"] for f in durable if f["id"] > resume_from]
    resp.close()


async def test_cancel_interrupts_the_stream(api: Api, innkeeper_host: RunningHost) -> None:
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply(text="a b c d e f g h", delay_s=0.05))
    stream = await innkeeper_host.client.get(f"/host/api/sessions/{session}/events")
    await api.prompt(session, "Long answer")
    await read_sse(stream, lambda f: f.get("event") == "assistant/partial")
    stream.close()
    result = await api.call("POST", f"/host/api/sessions/{session}/cancel")
    assert result["interrupted"] is True
    await api.idle(session)
    events = await api.events(session)
    assistant = next(e["data"] for e in events if e["data"]["type"] == "assistant/message")
    assert assistant["interrupted"] is True
    text = assistant["content"][0]["text"]
    assert "a b c d e f g h".startswith(text)
    assert len(text) < len("a b c d e f g h")
    assert events[-1]["data"]["reason"]["kind"] == "interrupted"
    idle = await api.call("POST", f"/host/api/sessions/{session}/cancel")
    assert idle["interrupted"] is False


async def test_steering_joins_the_running_turn(api: Api) -> None:
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply(text="x y z", delay_s=0.05), "Steered reply")
    await api.prompt(session, "Start")
    await wait_for_event(api, session, "request/header")
    steer = await api.prompt(session, "Also consider this", mode="steer")
    assert steer["startedTurn"] is False
    await api.idle(session)
    events = await api.events(session)
    turns = [e["data"] for e in events if e["data"]["type"] in ("turn/start", "turn/end")]
    assert len(turns) == 2  # one turn, two steps
    users = [e["data"] for e in events if e["data"]["type"] == "user/message"]
    assert [u["origin"]["kind"] for u in users] == ["user", "steering"]
    splices = [e["data"] for e in events if e["data"]["type"] == "agent/inbox/spliced"]
    assert [(s["op"], s["target"]) for s in splices] == [
        ("insert", "next-turn"),
        ("claim", "next-turn"),
        ("insert", "next-step"),
        ("claim", "next-step"),
    ]
    assert api.provider.requests[-1].messages[-1].content == "Also consider this"


async def test_queued_input_waits_and_can_be_cancelled(api: Api) -> None:
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply(text="slow reply here", delay_s=0.05))
    await api.prompt(session, "First")
    await wait_for_event(api, session, "user/message")  # the first turn has claimed "First"
    second = await api.prompt(session, "Second")
    third = await api.prompt(session, "Third")
    assert second["startedTurn"] is False
    await api.call("DELETE", f"/host/api/sessions/{session}/inbox/{third['itemId']}")
    await api.call("DELETE", f"/host/api/sessions/{session}/inbox/{third['itemId']}", status=404)
    await api.idle(session)
    events = await api.events(session)
    splices = [e for e in events if e["data"]["type"] == "agent/inbox/spliced"]
    ops = [s["data"]["op"] for s in splices]
    assert ops == ["insert", "claim", "insert", "insert", "cancel", "claim"]
    last_claim = splices[-1]["data"]
    assert last_claim["claimEventSeqs"] == [second["spliceSeq"]]
    users = [e["data"]["content"][0]["text"] for e in events if e["data"]["type"] == "user/message"]
    assert users == ["First", "Second"]


async def test_provider_errors_end_the_turn_with_a_code(api: Api) -> None:
    session = await api.new_session()
    api.provider.enqueue(
        SyntheticReply(text="", error=ProviderError("auth", "bad key", status=401))
    )
    await api.prompt(session, "Hi")
    await api.idle(session)
    events = await api.events(session)
    types = [e["data"]["type"] for e in events]
    assert types.count("request/header") == 1  # auth errors are never retried
    error = next(e["data"] for e in events if e["data"]["type"] == "request/error")
    assert (error["kind"], error["message"], error["status"]) == ("auth", "bad key", 401)
    reason = events[-1]["data"]["reason"]
    assert (reason["kind"], reason["code"], reason["message"]) == (
        "error",
        "PROVIDER_AUTH",
        "bad key",
    )


async def test_bad_requests(api: Api) -> None:
    await api.call("POST", "/host/api/sessions/nope/prompt", {"text": "x"}, status=404)
    session = await api.new_session()
    data = await api.call("POST", f"/host/api/sessions/{session}/prompt", {"text": " "}, 400)
    assert data["code"] == "INVALID_ARGUMENT"
    data = await api.call(
        "POST", f"/host/api/sessions/{session}/prompt", {"text": "x", "mode": "shout"}, 400
    )
    assert data["code"] == "INVALID_BODY"
    data = await api.call("GET", f"/host/api/sessions/{session}/history?limit=abc", status=400)
    assert data["code"] == "INVALID_ARGUMENT"
