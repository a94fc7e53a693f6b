"""Helpers for agent tests: sessions over HTTP, the synthetic provider, SSE reading."""

from __future__ import annotations

import asyncio
import contextlib
import json
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from innkeeper_core.providers.synthetic import SyntheticProvider
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.testing import RunningHost


class Api:
    """Thin HTTP helper over the test client (mutations carry the same-origin header)."""

    def __init__(self, host: RunningHost) -> None:
        self.host = host
        self.headers = {"Origin": host.origin}

    async def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        resp = await self.host.client.request(
            method, path, json=body, headers=self.headers if method != "GET" else None
        )
        data = await resp.json()
        assert resp.status == status, data
        return data

    async def new_session(self, title: str = "test") -> str:
        data = await self.call("POST", "/host/api/sessions", {"title": title}, status=201)
        session_id: str = data["session"]["id"]
        return session_id

    async def prompt(self, session_id: str, text: str, mode: str = "queue") -> Any:
        return await self.call(
            "POST", f"/host/api/sessions/{session_id}/prompt", {"text": text, "mode": mode}, 202
        )

    async def idle(self, session_id: str) -> None:
        await self.host.get(AGENTS).wait_idle(session_id)

    async def events(self, session_id: str) -> list[dict[str, Any]]:
        page = await self.call("GET", f"/host/api/sessions/{session_id}/history?limit=1000")
        events: list[dict[str, Any]] = list(reversed(page["events"]))
        return events

    async def types(self, session_id: str) -> list[str]:
        return [e["data"]["type"] for e in await self.events(session_id)]

    @property
    def provider(self) -> SyntheticProvider:
        provider = self.host.get(PROVIDER)
        assert isinstance(provider, SyntheticProvider)
        return provider


@pytest.fixture
def api(innkeeper_host: RunningHost) -> Api:
    return Api(innkeeper_host)


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Callable[[str, str], str]:
    def write(plugin_id: str, source: str) -> str:
        folder = tmp_path / "plugins" / plugin_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text(textwrap.dedent(source))
        return str(folder)

    return write


async def read_sse(resp: Any, until: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Read SSE frames as {id, event, data} until ``until(frame)`` is true."""
    frames: list[dict[str, Any]] = []
    frame: dict[str, Any] = {}
    while True:
        line = (await resp.content.readline()).decode()
        if not line:
            return frames
        line = line.rstrip("\n")
        if not line:
            if frame:
                frames.append(frame)
                if until(frame):
                    return frames
            frame = {}
        elif line.startswith("id: "):
            frame["id"] = int(line[4:])
        elif line.startswith("event: "):
            frame["event"] = line[7:]
        elif line.startswith("data: "):
            frame["data"] = json.loads(line[6:])


@contextlib.asynccontextmanager
async def completions_server(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[TestServer]:
    """A loopback OpenAI-compatible server whose ``/v1/chat/completions`` is ``handler``."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str, tries: int = 500) -> T:
    """The first truthy result of ``probe()``, polled every 10 ms (for asynchronous effects)."""
    for _ in range(tries):
        result = await probe()
        if result:
            return result
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")
