"""A host with the real Tavern plugin loaded, corpus import helpers and the synthetic provider."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from tavern_harness import V1, TavernApi

from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.testing import RunningHost

#: The shared corpus, used in place (never copied into the repo).
CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
PROLIX = CORPUS / "prolix-oc-st-presets"


def read_bytes(path: Path) -> bytes:
    """Test data is small and local: a plain blocking read."""
    return path.read_bytes()


class Tavern(TavernApi):
    """HTTP helpers over the test client (mutations carry the same-origin header)."""

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

    async def prompt(self, session_id: str, text: str) -> None:
        await self.call("POST", f"/host/api/sessions/{session_id}/prompt", {"text": text}, 202)
        await self.host.get(AGENTS).wait_idle(session_id)

    async def active(self, session_id: str | None = None) -> Any:
        query = f"?sessionId={session_id}" if session_id else ""
        return await self.v1("GET", "/active" + query)


@pytest_asyncio.fixture
async def tavern(innkeeper_host: RunningHost) -> AsyncIterator[Tavern]:
    """The real Tavern plugin in a fresh host."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield Tavern(innkeeper_host)


@pytest_asyncio.fixture
async def tavern_for() -> Any:
    """Wraps another host (e.g. one started with plugin config) in the same helpers."""
    return Tavern
