"""Restart recovery of dangling tool calls, slash commands, and the built-in dice roller."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from innkeeper_core.config import ToolsConfig
from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_core.testing import start_test_host
from innkeeper_core.tools.dice import DiceRoller, parse_dice
from innkeeper_hostapi.agents import AGENTS, SESSIONS
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    ToolCall,
    ToolResult,
    TurnStart,
    text_content,
)
from innkeeper_hostapi.testing import RunningHost

from .conftest import Api, read_sse

COMMAND = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.slash import COMMANDS, CommandAnswer

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def rp(invocation):
        if invocation.args not in ("", "off"):
            return CommandAnswer("rp", "error", "usage: /rp [off]")
        return "RP " + ("off" if invocation.args == "off" else "on") + (
            " (queued)" if invocation.running else " (committed)"
        )

    ctx.get(COMMANDS).register(ctx, "rp", "Toggle RP mode.", rp, hint="[off]")
"""


async def test_restart_closes_dangling_calls_with_interrupted_results(tmp_path: Path) -> None:
    data = tmp_path / "data"
    host = await start_test_host(data)
    sessions = host.get(SESSIONS)
    header = await sessions.create(title="t")
    await sessions.append(header.id, TurnStart(turn=1))
    calls = (
        ToolCall(id="a", name="roll", arguments="{}"),
        ToolCall(id="b", name="roll", arguments="{}"),
    )
    await sessions.append(
        header.id,
        AssistantMessage(message_id="m1", content=(), turn=1, tool_calls=calls),
    )
    await sessions.append(
        header.id,
        ToolResult(
            message_id="r1", tool_call_id="a", name="roll", content=text_content("4"), turn=1
        ),
    )
    await host.close()  # the host stopped while call b ran

    host = await start_test_host(data)
    try:
        api = Api(host)
        await host.get(AGENTS).resolve_agent(header.id)
        events = await api.events(header.id)
        assert [e["data"]["type"] for e in events][-2:] == ["tool/result", "turn/end"]
        closed = events[-2]["data"]
        assert (closed["toolCallId"], closed["isError"]) == ("b", True)
        assert closed["content"][0]["text"].startswith("interrupted: the host restarted")
        assert events[-1]["data"]["reason"]["code"] == "HOST_RESTARTED"
        # The next turn's request answers every call, so a real server accepts it.
        await api.prompt(header.id, "go on")
        await api.idle(header.id)
        sent = api.provider.requests[-1].messages
        assert [(m.role, m.tool_call_id) for m in sent] == [
            ("assistant", None),
            ("tool", "a"),
            ("tool", "b"),
            ("user", None),
        ]
    finally:
        await host.close()


async def test_a_command_answers_without_a_message_or_an_event(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str], leak_check: object
) -> None:
    await innkeeper_host.load("rp", plugin_dir("rp", COMMAND))
    session = await api.new_session()
    resp = await innkeeper_host.client.get(f"/host/api/sessions/{session}/events")
    answer = await api.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "/rp"})
    assert answer["command"] == {"name": "rp", "kind": "success", "text": "RP on (committed)"}
    assert answer["itemId"] is None and answer["startedTurn"] is False
    frames = await read_sse(resp, lambda f: f.get("event") == "command/result")
    assert frames[-1]["data"] == {"name": "rp", "kind": "success", "text": "RP on (committed)"}
    resp.close()
    bad = await api.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "/rp loud"})
    assert bad["command"]["kind"] == "error"
    assert await api.types(session) == []  # the empty session stays empty
    assert api.provider.requests == []
    # An unknown command is ordinary input.
    await api.prompt(session, "/me waves")
    await api.idle(session)
    assert api.provider.requests[-1].messages[-1].content == "/me waves"
    await innkeeper_host.unload("rp")
    await api.prompt(session, "/rp off")  # no longer a command
    await api.idle(session)
    assert api.provider.requests[-1].messages[-1].content == "/rp off"


def test_dice_notation_follows_sillytavern() -> None:
    assert parse_dice("2d6+3").notation == "2d6+3"
    assert parse_dice("d20").notation == "1d20"
    assert parse_dice("20").notation == "1d20"
    assert parse_dice("4D10-1").notation == "4d10-1"
    for bad in ("", "d", "2d", "d0", "0d6", "2d6+", "1d6*2", "101d6", "1d2000000", "x"):
        with pytest.raises(ValueError, match=r"dice|sides|notation"):
            parse_dice(bad)
    roller = DiceRoller(random.Random(7))
    result = roller.roll(parse_dice("3d6+2"))
    assert len(result["rolls"]) == 3 and all(1 <= r <= 6 for r in result["rolls"])
    assert result["total"] == sum(result["rolls"]) + 2


async def test_the_dice_tool_is_off_unless_configured(
    innkeeper_host: RunningHost, api: Api, tmp_path: Path
) -> None:
    assert (await api.call("GET", "/host/api/tools"))["tools"] == []
    host = await start_test_host(tmp_path / "dice", tools=ToolsConfig(dice=True))
    try:
        dice_api = Api(host)
        (tool,) = (await dice_api.call("GET", "/host/api/tools"))["tools"]
        assert (tool["name"], tool["owner"], tool["risk"]) == ("roll", "host", "read-only")
        session = await dice_api.new_session()
        dice_api.provider.enqueue(SyntheticReply.calling(("roll", {"dice": "2d6"})), "Rolled.")
        await dice_api.prompt(session, "Roll")
        await dice_api.idle(session)
        result = next(
            e["data"] for e in await dice_api.events(session) if e["data"]["type"] == "tool/result"
        )
        assert '"dice": "2d6"' in result["content"][0]["text"]
        answer = await dice_api.call(
            "POST", f"/host/api/sessions/{session}/prompt", {"text": "/roll 1d1+4"}
        )
        assert answer["command"]["text"] == "1d1+4: [1] = 5"
    finally:
        await host.close()


def test_calls_without_a_result_are_answered_in_the_request() -> None:
    from innkeeper_core.agents.tool_steps import MISSING_RESULT, answer_missing
    from innkeeper_hostapi.providers import ChatMessage, ChatToolCall

    calls = (
        ChatToolCall(id="a", name="x", arguments="{}"),
        ChatToolCall(id="b", name="x", arguments="{}"),
    )
    history = [
        ChatMessage(role="user", content="go"),
        ChatMessage(role="assistant", content="", tool_calls=calls),
        ChatMessage(role="tool", content="1", tool_call_id="a"),
        ChatMessage(role="user", content="again"),  # a fork cut before b's result
        ChatMessage(role="assistant", content="", tool_calls=calls[:1]),
    ]
    out = answer_missing(history)
    assert [(m.role, m.tool_call_id, m.content) for m in out[2:]] == [
        ("tool", "a", "1"),
        ("tool", "b", MISSING_RESULT),
        ("user", None, "again"),
        ("assistant", None, ""),
        ("tool", "a", MISSING_RESULT),
    ]
    assert answer_missing(
        [*history[:3], ChatMessage(role="tool", content="2", tool_call_id="b")]
    ) == [
        *history[:3],
        ChatMessage(role="tool", content="2", tool_call_id="b"),
    ]
