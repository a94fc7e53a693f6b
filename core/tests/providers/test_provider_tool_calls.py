"""Tool calls through providers: OpenAI-compatible deltas accumulated, tools sent, synthetic."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from innkeeper_core.providers.synthetic import SyntheticProvider, SyntheticReply
from innkeeper_core.providers.tool_calls import ToolCallAccumulator
from innkeeper_hostapi.providers import (
    MAX_TOOL_CALLS_PER_MESSAGE,
    ChatMessage,
    ChatToolCall,
    FinalMessage,
    ProviderError,
    ProviderRequest,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)

from .test_provider_openai import Fake, collect, fake, provider, session

__all__ = ["fake", "session"]  # fixtures imported for pytest


def tool_chunk(*calls: dict[str, Any], finish: str | None = None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": {"tool_calls": list(calls)}}
    if finish is not None:
        choice["finish_reason"] = finish
    return b"data: " + json.dumps({"model": "fake-1", "choices": [choice]}).encode() + b"\n\n"


def fragments(index: int, call_id: str, name: str, arguments: str, size: int) -> list[bytes]:
    """One call split the way OpenAI streams it: id+name first, then argument pieces."""
    out = [
        tool_chunk(
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        )
    ]
    for start in range(0, len(arguments), size):
        out.append(
            tool_chunk({"index": index, "function": {"arguments": arguments[start : start + size]}})
        )
    return out


TOOLS = (
    ToolSpec(
        name="roll",
        description="Roll dice.",
        parameters={"type": "object", "properties": {"dice": {"type": "string"}}},
    ),
)


async def test_parallel_tool_calls_split_across_many_deltas(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    first = fragments(0, "call_a", "roll", '{"dice": "2d6+3"}', 3)
    second = fragments(1, "call_b", "weather", '{"city": "Oslo", "days": 2}', 4)
    interleaved: list[bytes] = []
    for a, b in zip(first, second, strict=False):
        interleaved += [a, b]
    interleaved += first[len(second) :] + second[len(first) :]
    state.pieces = [
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me see."}}]}\n\n',
        *interleaved,
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    request = ProviderRequest(
        messages=(ChatMessage(role="user", content="roll for me"),),
        tools=TOOLS,
        tool_choice="auto",
    )
    items = await collect(provider(session, url), request)
    deltas = [i for i in items if isinstance(i, ToolCallDelta)]
    assert len(deltas) == len(first) + len(second)
    assert "".join(d.arguments for d in deltas if d.index == 1) == '{"city": "Oslo", "days": 2}'
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["Let me see."]
    final = items[-1]
    assert isinstance(final, FinalMessage)
    assert final.finish_reason == "tool_calls"
    assert final.text == "Let me see."
    assert final.tool_calls == (
        ChatToolCall(id="call_a", name="roll", arguments='{"dice": "2d6+3"}'),
        ChatToolCall(id="call_b", name="weather", arguments='{"city": "Oslo", "days": 2}'),
    )
    body = state.bodies[0]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "roll",
                "description": "Roll dice.",
                "parameters": {"type": "object", "properties": {"dice": {"type": "string"}}},
            },
        }
    ]
    assert body["tool_choice"] == "auto"


async def test_tool_messages_are_sent_in_openai_shape(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n']
    request = ProviderRequest(
        messages=(
            ChatMessage(role="user", content="roll"),
            ChatMessage(
                role="assistant",
                content="",
                tool_calls=(ChatToolCall(id="call_a", name="roll", arguments="{}"),),
            ),
            ChatMessage(role="tool", content="7", tool_call_id="call_a"),
        ),
        tool_choice="roll",
    )
    await collect(provider(session, url), request)
    body = state.bodies[0]
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "roll", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "content": "7", "tool_call_id": "call_a"},
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "roll"}}
    assert "tools" not in body


async def test_plain_requests_send_no_tool_fields(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n']
    await collect(
        provider(session, url), ProviderRequest(messages=(ChatMessage(role="user", content="x"),))
    )
    assert "tools" not in state.bodies[0] and "tool_choice" not in state.bodies[0]


def test_accumulator_without_indexes_and_bounds() -> None:
    acc = ToolCallAccumulator("p")
    acc.add(None, "x1", "look", '{"a"')
    acc.add(None, None, None, ": 1}")
    acc.add(None, "x2", "look", "{}")
    acc.add(None, "x2", "look", "")  # the id and name resent on every fragment
    assert acc.calls() == (
        ChatToolCall(id="x1", name="look", arguments='{"a": 1}'),
        ChatToolCall(id="x2", name="look", arguments="{}"),
    )
    nameless = ToolCallAccumulator("p")
    nameless.add(0, None, None, "{}")
    with pytest.raises(ProviderError, match="no function name"):
        nameless.calls()
    many = ToolCallAccumulator("p")
    for index in range(MAX_TOOL_CALLS_PER_MESSAGE):
        many.add(index, f"c{index}", "look", "")
    with pytest.raises(ProviderError, match="tool calls in one reply"):
        many.add(MAX_TOOL_CALLS_PER_MESSAGE, "over", "look", "")
    assert ToolCallAccumulator("p").calls() == ()


async def test_synthetic_provider_streams_scripted_calls() -> None:
    synthetic = SyntheticProvider()
    synthetic.enqueue(SyntheticReply.calling(("roll", {"dice": "1d20"}), ("roll", {"dice": "d6"})))
    items = [i async for i in synthetic.stream(ProviderRequest(messages=(), tools=TOOLS))]
    final = items[-1]
    assert isinstance(final, FinalMessage)
    assert final.finish_reason == "tool_calls"
    assert [c.id for c in final.tool_calls] == ["call_1", "call_2"]
    streamed = "".join(i.arguments for i in items if isinstance(i, ToolCallDelta) and i.index == 0)
    assert json.loads(streamed) == {"dice": "1d20"}
    assert synthetic.requests[0].tools == TOOLS
