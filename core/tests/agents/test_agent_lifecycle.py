"""Agent creation, forks, restarts and parameter fallback across a whole turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from innkeeper_core.config import ProviderConfig
from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.agents import AGENTS, SESSIONS
from innkeeper_hostapi.sessions import InboxItem, InboxSpliced, TurnStart, text_content
from innkeeper_hostapi.testing import RunningHost

from .conftest import Api

INIT_RECORDER = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import AGENT_CREATED

CREATED = []

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def record(event):
        CREATED.append((event.session_id, event.parent_session_id, event.delegation_depth))
        if ctx.config.get("fail"):
            raise RuntimeError("initialization refused")

    ctx.on(AGENT_CREATED, record)
"""


async def test_agent_created_listeners_run_before_the_first_request(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    import sys

    await innkeeper_host.load("recorder", plugin_dir("recorder", INIT_RECORDER))
    created = sys.modules["innkeeper_plugins.recorder"].CREATED
    session = await api.new_session()
    await api.prompt(session, "Hi")
    await api.idle(session)
    await api.prompt(session, "Again")  # the agent exists: no second initialization
    await api.idle(session)
    assert created == [(session, None, 0)]

    seq = (await api.events(session))[-1]["seq"]
    fork = await api.call(
        "POST", f"/host/api/sessions/{session}/fork", {"atEventId": seq}, status=201
    )
    child = fork["session"]["id"]
    delegated = await api.call("POST", "/host/api/sessions", {"delegatedFrom": session}, status=201)
    await innkeeper_host.get(AGENTS).resolve_agent(child)
    await innkeeper_host.get(AGENTS).resolve_agent(delegated["session"]["id"])
    assert created[1:] == [(child, session, 0), (delegated["session"]["id"], session, 1)]


async def test_failing_agent_created_listener_fails_creation(
    tmp_path: Path, plugin_dir: Callable[[str, str], str]
) -> None:
    host = await start_test_host(tmp_path / "data", plugins={"recorder": {"fail": True}})
    try:
        api = Api(host)
        await host.load("recorder", plugin_dir("recorder", INIT_RECORDER))
        session = await api.new_session()
        data = await api.call(
            "POST", f"/host/api/sessions/{session}/prompt", {"text": "Hi"}, status=500
        )
        assert data["code"] == "AGENT_INIT_FAILED"
        assert "initialization refused" in data["error"]
        assert await api.types(session) == []  # nothing was queued or written
        await host.unload("recorder")
        await api.prompt(session, "Hi")
        await api.idle(session)
        assert (await api.types(session))[-1] == "turn/end"
    finally:
        await host.close()


async def test_forks_copy_no_queued_input_and_restarts_lose_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    host = await start_test_host(data)
    sessions = host.get(SESSIONS)
    header = await sessions.create(title="crashed")
    item = InboxItem(id="queued-1", content=text_content("typed before the crash"))
    insert = await sessions.append(
        header.id, InboxSpliced(op="insert", target="next-turn", start=0, inserted=(item,))
    )
    await sessions.append(header.id, TurnStart(turn=1))  # a turn left open by the crash
    await host.close()

    host = await start_test_host(data)
    try:
        api = Api(host)
        sessions = host.get(SESSIONS)
        # Start-up recovery closed the dangling turn and served the queued input at once.
        await api.idle(header.id)
        events = await api.events(header.id)
        ends = [e["data"] for e in events if e["data"]["type"] == "turn/end"]
        assert (ends[0]["turn"], ends[0]["reason"]["code"]) == (1, "HOST_RESTARTED")
        claim = next(e["data"] for e in events if e["data"].get("op") == "claim")
        assert claim["claimEventSeqs"] == [insert.seq]
        assert api.provider.requests[-1].messages[-1].content == "typed before the crash"

        requests = len(api.provider.requests)
        child = await sessions.fork(header.id, insert.seq)
        await host.get(AGENTS).resolve_agent(child.id)
        await api.idle(child.id)
        assert await api.types(child.id) == ["agent/inbox/spliced"]  # inherited, not served
        assert len(api.provider.requests) == requests
    finally:
        await host.close()


async def test_restart_recovery_frees_a_session_left_mid_turn(tmp_path: Path) -> None:
    """Issue 19 item 9: fork, cancel and prompt work at once after a crash mid-turn."""
    data = tmp_path / "data"
    host = await start_test_host(data)
    sessions = host.get(SESSIONS)
    header = await sessions.create(title="crashed mid-turn")
    item = InboxItem(id="claimed-1", content=text_content("answer me"))
    await sessions.append(
        header.id, InboxSpliced(op="insert", target="next-turn", start=0, inserted=(item,))
    )
    start = await sessions.append(header.id, TurnStart(turn=1))  # the process died here
    await host.close()

    host = await start_test_host(data)
    try:
        api = Api(host)
        base = f"/host/api/sessions/{header.id}"
        # The acknowledged input that the dead turn had not claimed yet is answered now.
        await api.idle(header.id)
        assert api.provider.requests[-1].messages[-1].content == "answer me"
        inspect = await api.call("GET", base)
        assert (inspect["turnOpen"], inspect["openTurn"]) == (False, None)
        events = await api.events(header.id)
        end = next(e["data"] for e in events if e["data"]["type"] == "turn/end")
        assert end["reason"] == {
            "kind": "interrupted",
            "code": "HOST_RESTARTED",
            "message": "host restarted",
        }
        fork = await api.call("POST", f"{base}/fork", {"atEventId": start.seq}, status=201)
        assert fork["session"]["id"] != header.id
        assert (await api.call("POST", f"{base}/cancel"))["interrupted"] is False
        await api.idle(header.id)
        receipt = await api.prompt(header.id, "are you there?")
        assert receipt["ok"] is True
        await api.idle(header.id)
        types = await api.types(header.id)
        assert types.count("turn/end") >= 2 and types[-1] == "turn/end"
        assert "assistant/message" in types
    finally:
        await host.close()


def _turn_end(turn: int) -> Any:
    from innkeeper_hostapi.sessions import TurnEnd, TurnEndReason

    return TurnEnd(turn=turn, reason=TurnEndReason(kind="interrupted", code="TEST"))


async def test_dangling_turn_is_closed_on_resume(tmp_path: Path) -> None:
    host = await start_test_host(tmp_path / "data")
    try:
        sessions = host.get(SESSIONS)
        header = await sessions.create(title="t")
        await sessions.append(header.id, TurnStart(turn=1))
        await host.get(AGENTS).resolve_agent(header.id)
        events = await Api(host).events(header.id)
        end = events[-1]["data"]
        assert end["type"] == "turn/end"
        assert (end["reason"]["kind"], end["reason"]["code"]) == ("interrupted", "HOST_RESTARTED")
    finally:
        await host.close()


FALLBACK_LISTENER = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import REQUEST_ERROR, REQUEST_HOOKS

NOTICES = []

@hookimpl
def innkeeper_plugin_setup(ctx):
    def preset(turn, draft):
        draft.temperature = 1.3
        draft.stop = ("###",)

    ctx.get(REQUEST_HOOKS).adjust(ctx, "preset", 0, preset)

    async def on_error(notice):
        NOTICES.append((notice.kind, notice.parameter, notice.retryable))
        if notice.parameter is not None:
            notice.retry_without(notice.parameter)

    ctx.on(REQUEST_ERROR, on_error)
"""


@pytest.fixture
async def fake_openai() -> AsyncIterator[tuple[TestServer, list[dict[str, Any]]]]:
    """An OpenAI-compatible server that rejects ``temperature`` and streams otherwise."""
    received: list[dict[str, Any]] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        received.append(body)
        if request.headers.get("Authorization") != "Bearer sk-test":
            return web.json_response({"error": {"message": "Invalid API key"}}, status=401)
        if "temperature" in body:
            return web.json_response(
                {
                    "error": {
                        "message": "Unsupported parameter: 'temperature' is not supported.",
                        "type": "invalid_request_error",
                        "param": "temperature",
                    }
                },
                status=400,
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in ("Hello", " from", " fake"):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        await response.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server, received
    finally:
        await server.close()


async def _openai_host(tmp_path: Path, server: TestServer, api_key: str) -> CoreTestHost:
    provider = ProviderConfig(
        kind="openai",
        base_url=str(server.make_url("/v1")),
        api_key=api_key,
        model="fake-model",
        parameter_fallback=False,  # only the plugin's listener asks for retries here
    )
    return await start_test_host(tmp_path / "data", provider=provider)


async def test_openai_rejection_retries_without_the_parameter(
    tmp_path: Path,
    fake_openai: tuple[TestServer, list[dict[str, Any]]],
    plugin_dir: Callable[[str, str], str],
) -> None:
    import sys

    server, received = fake_openai
    host = await _openai_host(tmp_path, server, "sk-test")
    try:
        api = Api(host)
        await host.load("preset", plugin_dir("preset", FALLBACK_LISTENER))
        session = await api.new_session()
        await api.prompt(session, "Hi")
        await api.idle(session)
        assert [("temperature" in body, body.get("stop")) for body in received] == [
            (True, ["###"]),
            (False, ["###"]),  # only the rejected parameter is omitted
        ]
        events = await api.events(session)
        headers = [e["data"] for e in events if e["data"]["type"] == "request/header"]
        assert [h.get("omitted", []) for h in headers] == [[], ["temperature"]]
        assert headers[1]["requested"]["temperature"] == 1.3
        assert "temperature" not in headers[1]["effective"] or (
            headers[1]["effective"]["temperature"] is None
        )
        assistant = next(e["data"] for e in events if e["data"]["type"] == "assistant/message")
        assert assistant["content"][0]["text"] == "Hello from fake"
        notices = sys.modules["innkeeper_plugins.preset"].NOTICES
        assert notices == [("invalid-parameter", "temperature", True)]
    finally:
        await host.close()


async def test_openai_auth_error_is_never_retried(
    tmp_path: Path,
    fake_openai: tuple[TestServer, list[dict[str, Any]]],
    plugin_dir: Callable[[str, str], str],
) -> None:
    server, received = fake_openai
    host = await _openai_host(tmp_path, server, "sk-wrong")
    try:
        api = Api(host)
        await host.load("preset", plugin_dir("preset", FALLBACK_LISTENER))
        session = await api.new_session()
        await api.prompt(session, "Hi")
        await api.idle(session)
        assert len(received) == 1
        end = (await api.events(session))[-1]["data"]
        assert (end["reason"]["kind"], end["reason"]["code"]) == ("error", "PROVIDER_AUTH")
    finally:
        await host.close()


async def test_forks_run_turns_after_earlier_cuts(api: Api, innkeeper_host: RunningHost) -> None:
    session = await api.new_session()
    for text in ("one", "two"):
        await api.prompt(session, text)
        await api.idle(session)
    events = await api.events(session)
    first_end = next(e["seq"] for e in events if e["data"]["type"] == "turn/end")
    inside_first = next(e["seq"] for e in events if e["data"]["type"] == "request/header")
    for cut in (first_end, inside_first):  # after turn 1, and inside turn 1 (cut before its end)
        fork = await api.call(
            "POST", f"/host/api/sessions/{session}/fork", {"atEventId": cut}, status=201
        )
        child = fork["session"]["id"]
        await api.prompt(child, "branch")
        await api.idle(child)
        child_events = await api.events(child)
        starts = [e["data"]["turn"] for e in child_events if e["data"]["type"] == "turn/start"]
        assert starts[-1] == 3  # turn numbers continue after the parent's last turn
        assert child_events[-1]["data"]["reason"]["kind"] == "completed"
        assert api.provider.requests[-1].messages[-1].content == "branch"
