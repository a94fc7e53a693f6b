"""A host with the real Tavern plugin loaded, corpus import helpers and the synthetic provider."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from innkeeper_core.providers.synthetic import SyntheticProvider
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.testing import RunningHost

#: The shared corpus, used in place (never copied into the repo).
CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
PROLIX = CORPUS / "prolix-oc-st-presets"
V1 = "/pmp-dsh-tavern/api/v1"


def read_bytes(path: Path) -> bytes:
    """Test data is small and local: a plain blocking read."""
    return path.read_bytes()


class Tavern:
    """HTTP helpers over the test client (mutations carry the same-origin header)."""

    def __init__(self, host: RunningHost) -> None:
        self.host = host

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        status: int = 200,
        *,
        data: bytes | None = None,
        content_type: str | None = None,
    ) -> Any:
        headers = {"Origin": self.host.origin} if method != "GET" else {}
        if content_type:
            headers["Content-Type"] = content_type
        resp = await self.host.client.request(method, path, json=body, data=data, headers=headers)
        payload = await resp.json()
        assert resp.status == status, payload
        return payload

    async def v1(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        return await self.call(method, V1 + path, body, status)

    async def import_preset(self, path: Path) -> str:
        body = {"content": read_bytes(path).decode(), "name": path.stem}
        data = await self.v1("POST", "/import", body, 201)
        return str(data["preset"]["id"])

    async def import_card(self, path: Path) -> str:
        ctype = "image/png" if path.suffix == ".png" else "application/json"
        data = await self.call(
            "POST",
            f"{V1}/characters/import?filename={urllib.parse.quote(path.name)}",
            data=read_bytes(path),
            content_type=ctype,
            status=201,
        )
        return str(data["character"]["id"])

    async def import_world_book(self, path: Path) -> str:
        data = await self.call(
            "POST",
            f"{V1}/world-books/import?filename={urllib.parse.quote(path.name)}",
            data=read_bytes(path),
            content_type="application/json",
            status=201,
        )
        return str(data["worldBook"]["id"])

    async def import_world_book_json(self, doc: Any, name: str = "book.json") -> str:
        data = await self.call(
            "POST",
            f"{V1}/world-books/import?filename={urllib.parse.quote(name)}",
            data=json.dumps(doc).encode(),
            content_type="application/json",
            status=201,
        )
        return str(data["worldBook"]["id"])

    async def new_session(self) -> str:
        data = await self.call("POST", "/host/api/sessions", {"title": "t"}, 201)
        return str(data["session"]["id"])

    async def prompt(self, session_id: str, text: str) -> None:
        await self.call("POST", f"/host/api/sessions/{session_id}/prompt", {"text": text}, 202)
        await self.host.get(AGENTS).wait_idle(session_id)

    async def events(self, session_id: str) -> list[dict[str, Any]]:
        page = await self.call("GET", f"/host/api/sessions/{session_id}/history?limit=1000")
        return list(reversed(page["events"]))

    async def active(self, session_id: str | None = None) -> Any:
        query = f"?sessionId={session_id}" if session_id else ""
        return await self.v1("GET", "/active" + query)

    @property
    def provider(self) -> SyntheticProvider:
        provider = self.host.get(PROVIDER)
        assert isinstance(provider, SyntheticProvider)
        return provider


@pytest_asyncio.fixture
async def tavern(innkeeper_host: RunningHost) -> AsyncIterator[Tavern]:
    """The real Tavern plugin in a fresh host."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield Tavern(innkeeper_host)


@pytest_asyncio.fixture
async def tavern_for() -> Any:
    """Wraps another host (e.g. one started with plugin config) in the same helpers."""
    return Tavern
