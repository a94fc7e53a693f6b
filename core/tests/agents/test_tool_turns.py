"""Tool calls in turns, end to end: a fake OpenAI-compatible server streams parallel calls, the
host runs them and sends the results back; durable history and /messages show them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from innkeeper_core.config import ProviderConfig
from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.testing import RunningHost

from .conftest import Api, completions_server

TOOLS_PLUGIN = """
from innkeeper_hostapi import hookimpl

CALLS = []

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def weather(call):
        CALLS.append(("weather", dict(call.arguments), call.turn, call.step))
        return {"city": call.arguments["city"], "sky": "clear"}

    async def clock(call):
        CALLS.append(("clock", dict(call.arguments), call.turn, call.step))
        return "It is noon."

    ctx.add_tool("weather", "Weather in a city.", {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    }, weather, risk="read-only")
    ctx.add_tool("clock", "The time.", {"type": "object", "properties": {}}, clock,
                 risk="read-only")
"""


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def _tool_deltas() -> list[bytes]:
    """Two parallel calls, interleaved and split across many small deltas."""
    a_args, b_args = '{"city": "Oslo"}', "{}"
    pieces: list[bytes] = [
        _sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]}),
        _sse(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_w",
                                    "type": "function",
                                    "function": {"name": "weather", "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            }
        ),
        _sse(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 1,
                                    "id": "call_c",
                                    "type": "function",
                                    "function": {"name": "clock", "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            }
        ),
    ]
    for i in range(0, len(a_args), 2):
        pieces.append(
            _sse(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": 0, "function": {"arguments": a_args[i : i + 2]}}
                                ]
                            },
                        }
                    ]
                }
            )
        )
        if i < len(b_args):
            pieces.append(
                _sse(
                    {
                        "choices": [
                            {
                                "index": 0,
                                "delta": {
                                    "tool_calls": [
                                        {"index": 1, "function": {"arguments": b_args[i : i + 2]}}
                                    ]
                                },
                            }
                        ]
                    }
                )
            )
    pieces.append(_sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    pieces.append(b"data: [DONE]\n\n")
    return pieces


@pytest.fixture
async def fake_tool_server() -> AsyncIterator[tuple[TestServer, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        received.append(body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if len(received) == 1:
            for piece in _tool_deltas():
                await response.write(piece)
        else:
            for text in ("Clear skies", " at noon."):
                await response.write(_sse({"choices": [{"index": 0, "delta": {"content": text}}]}))
            await response.write(
                _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            )
            await response.write(b"data: [DONE]\n\n")
        return response

    async with completions_server(completions) as server:
        yield server, received


async def test_parallel_tool_calls_run_and_return_in_order(
    tmp_path: Path,
    fake_tool_server: tuple[TestServer, list[dict[str, Any]]],
    plugin_dir: Callable[[str, str], str],
) -> None:
    import sys

    server, received = fake_tool_server
    provider = ProviderConfig(kind="openai", base_url=str(server.make_url("/v1")), model="fake")
    host = await start_test_host(tmp_path / "data", provider=provider)
    try:
        api = Api(host)
        await host.load("tools", plugin_dir("tools", TOOLS_PLUGIN))
        session = await api.new_session()
        await api.prompt(session, "Weather and time?")
        await api.idle(session)

        calls = sys.modules["innkeeper_plugins.tools"].CALLS
        assert calls == [("weather", {"city": "Oslo"}, 1, 1), ("clock", {}, 1, 1)]
        first, second = received
        assert [t["function"]["name"] for t in first["tools"]] == ["clock", "weather"]
        assert first["tool_choice"] == "auto"
        assert second["messages"][-3:] == [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_w",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "call_c",
                        "type": "function",
                        "function": {"name": "clock", "arguments": "{}"},
                    },
                ],
            },
            {
                "role": "tool",
                "content": '{"city": "Oslo", "sky": "clear"}',
                "tool_call_id": "call_w",
            },
            {"role": "tool", "content": "It is noon.", "tool_call_id": "call_c"},
        ]

        events = await api.events(session)
        types = [e["data"]["type"] for e in events]
        assert types == [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "user/message",
            "request/header",
            "assistant/message",
            "tool/result",
            "tool/result",
            "request/header",
            "assistant/message",
            "turn/end",
        ]
        assistant = events[5]["data"]
        assert assistant["toolCalls"] == [
            {"id": "call_w", "name": "weather", "arguments": '{"city": "Oslo"}'},
            {"id": "call_c", "name": "clock", "arguments": "{}"},
        ]
        assert assistant["finishReason"] == "tool_calls"
        assert [e["data"]["toolCallId"] for e in events[6:8]] == ["call_w", "call_c"]
        assert [e["data"].get("step") for e in events if e["data"]["type"] == "request/header"] == [
            1,
            2,
        ]
        assert events[-1]["data"]["reason"]["kind"] == "completed"

        messages = (await api.call("GET", f"/host/api/sessions/{session}/messages"))["messages"]
        assert [(m["role"], m["text"]) for m in messages] == [
            ("user", "Weather and time?"),
            ("assistant", ""),
            ("tool", '{"city": "Oslo", "sky": "clear"}'),
            ("tool", "It is noon."),
            ("assistant", "Clear skies at noon."),
        ]
        assert [c["id"] for c in messages[1]["toolCalls"]] == ["call_w", "call_c"]
        assert [m["toolCallId"] for m in messages[2:4]] == ["call_w", "call_c"]
        assert messages[2]["origin"]["producer"] == "weather"
    finally:
        await host.close()


PROJECTOR = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import REQUEST_PROJECTOR
from innkeeper_hostapi.providers import ChatMessage


class Note:
    name = "note"

    async def project(self, turn, messages):
        return (*messages, ChatMessage(role="system", content=f"[step {turn.step}]"))


@hookimpl
def innkeeper_plugin_setup(ctx):
    async def look(call):
        return "a door"

    ctx.add_tool("look", "Look.", {"type": "object"}, look, risk="read-only")
    ctx.claim_slot(REQUEST_PROJECTOR, Note())
"""


async def test_request_assembly_references_tool_messages(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("note", plugin_dir("note", PROJECTOR))
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply.calling(("look", {})), "A door.")
    await api.prompt(session, "Look")
    await api.idle(session)
    events = await api.events(session)
    by_seq = {e["seq"]: e["data"] for e in events}
    assemblies = [e["data"] for e in events if e["data"]["type"] == "request/assembly"]
    assert [a["step"] for a in assemblies] == [1, 2]
    entries = assemblies[1]["entries"]
    assert [(e["role"], by_seq[e["ref"]]["type"] if e.get("ref") else None) for e in entries] == [
        ("user", "user/message"),
        ("assistant", "assistant/message"),
        ("tool", "tool/result"),
        ("system", None),
    ]
    sent = api.provider.requests[1].messages
    wire = [
        {"role": "user", "content": "Look", "name": None},
        {
            "role": "assistant",
            "content": "",
            "name": None,
            "toolCalls": [{"id": "call_1", "name": "look", "arguments": "{}"}],
        },
        {"role": "tool", "content": "a door", "name": None, "toolCallId": "call_1"},
        {"role": "system", "content": "[step 2]", "name": None},
    ]
    assert [m.role for m in sent] == [w["role"] for w in wire]
    digest = hashlib.sha256(json.dumps(wire, ensure_ascii=False).encode()).hexdigest()
    assert assemblies[1]["sha256"] == digest
