"""The host's preflight: a parameter value the configured profile does not take is omitted
before the request, whichever plugin set it, and recorded in ``request/header``
(`docs/contract/loader.md#parameter-admission`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from innkeeper_core.config import ProviderConfig
from innkeeper_core.testing import start_test_host

from .conftest import Api, completions_server

EFFORT_HOOK = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import REQUEST_HOOKS

EFFORT = {"value": None}

@hookimpl
def innkeeper_plugin_setup(ctx):
    def effort(turn, draft):
        draft.temperature = 0.7
        draft.reasoning_effort = EFFORT["value"]

    ctx.get(REQUEST_HOOKS).adjust(ctx, "effort", 0, effort)
"""


@pytest.fixture
async def server() -> AsyncIterator[tuple[TestServer, list[dict[str, Any]]]]:
    """An OpenAI-compatible server that records each body and streams a short reply."""
    received: list[dict[str, Any]] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        received.append(await request.json())
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
        await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        return response

    async with completions_server(completions) as test_server:
        yield test_server, received


@pytest.mark.parametrize(
    ("profile", "efforts", "effort", "sent"),
    [
        ("vllm", None, "xhigh", None),  # vLLM takes low/medium/high
        ("vllm", None, "high", "high"),
        ("openai", None, "xhigh", "xhigh"),
        ("openai", ["low"], "medium", None),  # the configured list replaces the profile's
        ("deepseek", None, "high", None),  # no reasoning_effort at all
    ],
)
async def test_an_effort_the_profile_does_not_take_is_omitted_and_recorded(
    tmp_path: Path,
    server: tuple[TestServer, list[dict[str, Any]]],
    plugin_dir: Callable[[str, str], str],
    profile: str,
    efforts: list[str] | None,
    effort: str,
    sent: str | None,
) -> None:
    import sys

    test_server, received = server
    config = ProviderConfig(
        kind="openai",
        base_url=str(test_server.make_url("/v1")),
        model="m",
        profile=profile,  # type: ignore[arg-type]
        reasoning_efforts=efforts,
    )
    host = await start_test_host(tmp_path / "data", provider=config)
    try:
        api = Api(host)
        await host.load("effort", plugin_dir("effort", EFFORT_HOOK))
        sys.modules["innkeeper_plugins.effort"].EFFORT["value"] = effort
        session = await api.new_session()
        await api.prompt(session, "Hi")
        await api.idle(session)
        assert len(received) == 1  # omitted before the request: no rejection, no retry
        assert received[0].get("reasoning_effort") == sent
        assert received[0]["temperature"] == 0.7
        events = await api.events(session)
        header = next(e["data"] for e in events if e["data"]["type"] == "request/header")
        assert header["requested"]["reasoningEffort"] == effort
        assert header["effective"]["reasoningEffort"] == sent
        assert header.get("omitted", []) == ([] if sent else ["reasoningEffort"])
    finally:
        await host.close()
