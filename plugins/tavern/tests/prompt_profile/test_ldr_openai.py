"""Preset parameter fallback against a fake OpenAI-compatible server (the wire request itself)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from tavern_harness import DEFAULT_PRESET_CALL

from innkeeper_core.config import ProviderConfig
from innkeeper_core.testing import start_test_host
from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"


@pytest.fixture
async def fake_openai() -> AsyncIterator[tuple[TestServer, list[dict[str, Any]]]]:
    """A chat-completions server that rejects ``temperature`` and streams otherwise."""
    received: list[dict[str, Any]] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        received.append(body)
        if "temperature" in body:
            error = {
                "message": "Unsupported parameter: 'temperature' is not supported with this model.",
                "type": "invalid_request_error",
                "param": "temperature",
            }
            return web.json_response({"error": error}, status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in ("The glade", " is safe."):
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


async def test_a_rejected_preset_temperature_is_omitted_once(
    tmp_path: Path, fake_openai: tuple[TestServer, list[dict[str, Any]]], tavern_for: Any
) -> None:
    server, received = fake_openai
    provider = ProviderConfig(
        kind="openai",
        base_url=str(server.make_url("/v1")),
        api_key="sk-test",
        model="fake-model",
        parameter_fallback=False,  # only Tavern's request-error listener asks for the retry
    )
    host = await start_test_host(tmp_path / "data", provider=provider)
    try:
        await host.load("tavern", "innkeeper_tavern.plugin")
        tavern = tavern_for(host)
        preset = await tavern.import_preset(ST / "presets_openai_Default.json")
        session = await tavern.new_session()
        await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
        await tavern.prompt(session, "Hello?")

        # No card or user bound: {{char}} is "Assistant", {{user}} is "User".
        expected_system = (
            "Write Assistant's next reply in a fictional chat between Assistant and User."
        )
        assert [b["messages"] for b in received] == [
            [{"role": "system", "content": expected_system}, {"role": "user", "content": "Hello?"}]
        ] * 2
        assert [(b.get("temperature"), b.get("max_tokens")) for b in received] == [
            (1, 300),
            (None, 300),  # only the rejected preset override is omitted
        ]
        events = await tavern.events(session)
        reply = next(e["data"] for e in events if e["data"]["type"] == "assistant/message")
        assert reply["content"][0]["text"] == "The glade is safe."
        parameters = host.get(ASSEMBLY_AUDIT).latest(session)["parameters"]
        assert parameters["omitted"] == ["temperature"]
        assert parameters["fallbacks"] == [
            {"attempt": 1, "parameter": "temperature", "kind": "invalid-parameter", "status": 400}
        ]
        assert parameters["effective"]["temperature"] is None
        assert parameters["effective"]["maxTokens"] == 300
    finally:
        await host.close()


@pytest.mark.parametrize(
    ("profile", "effort", "requested", "sent", "omitted"),
    [
        ("openai", "xhigh", "xhigh", "xhigh", ["minP", "topA", "repetitionPenalty"]),
        ("vllm", "xhigh", "xhigh", None, ["reasoningEffort", "topA"]),
        ("vllm", "min", "minimal", None, ["reasoningEffort", "topA"]),  # ST's min, as ST sends it
        (
            "deepseek",
            "high",
            "high",
            None,
            ["reasoningEffort", "minP", "topA", "repetitionPenalty"],
        ),
        ("openrouter", "max", "high", "high", []),  # ST's max
    ],
)
async def test_preset_parameters_are_admitted_per_provider_profile(
    tmp_path: Path,
    fake_openai: tuple[TestServer, list[dict[str, Any]]],
    tavern_for: Any,
    profile: str,
    effort: str,
    requested: str,
    sent: str | None,
    omitted: list[str],
) -> None:
    """The preflight against each profile: what reaches the wire, and the exact record."""
    server, received = fake_openai
    provider = ProviderConfig(
        kind="openai",
        base_url=str(server.make_url("/v1")),
        api_key="sk-test",
        model="fake-model",
        profile=profile,  # type: ignore[arg-type]
    )
    host = await start_test_host(tmp_path / "data", provider=provider)
    try:
        await host.load("tavern", "innkeeper_tavern.plugin")
        tavern = tavern_for(host)
        preset = await tavern.import_preset(ST / "presets_openai_Default.json")
        await tavern.v1("PUT", f"/presets/{preset}", {"sampling": {"reasoningEffort": effort}})
        session = await tavern.new_session()
        await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
        await tavern.prompt(session, "Hello?")

        first = received[0]  # the server then rejects temperature: the fallback is unchanged
        assert first.get("reasoning_effort") == sent
        wire = {
            "reasoningEffort": "reasoning_effort",
            "minP": "min_p",
            "topA": "top_a",
            "repetitionPenalty": "repetition_penalty",
        }
        assert {w for w in wire.values() if w in first} == {
            w for n, w in wire.items() if n not in omitted
        }
        admission = host.get(ASSEMBLY_AUDIT).latest(session)["parameters"]["admission"]
        proposed = {**DEFAULT_PRESET_CALL, "reasoningEffort": requested}
        assert admission == {
            "provider": "openai",
            "requested": proposed,
            "effective": {k: None if k in omitted else v for k, v in proposed.items()},
            "omitted": omitted,
        }
        assert [b.get("temperature") for b in received] == [1, None]
    finally:
        await host.close()
