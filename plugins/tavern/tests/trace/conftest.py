"""A host with the real Tavern plugin, corpus imports and a bound Seraphina session."""

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

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
V3 = "/pmp-dsh-tavern/api/v3"

#: A small standalone book whose entry fires on "lantern".
BOOK = {
    "name": "Glade lore",
    "entries": {
        "0": {
            "uid": 0,
            "key": ["lantern"],
            "content": "The lantern of the glade never goes out.",
            "comment": "Lantern",
            "position": 0,
            "order": 100,
        },
        "1": {
            "uid": 1,
            "key": ["dragon"],
            "content": "No dragon has been seen in a century.",
            "comment": "Dragon",
            "position": 1,
            "order": 100,
        },
    },
}


def read_bytes(path: Path) -> bytes:
    """Test data is small and local: a plain blocking read."""
    return path.read_bytes()


class TraceHost(TavernApi):
    """HTTP helpers over the test client (mutations carry the same-origin header)."""

    async def v3(self, path: str, status: int = 200) -> Any:
        return await self.call("GET", V3 + path, status=status)

    async def import_file(self, kind: str, path: Path, ctype: str) -> str:
        data = await self.call(
            "POST",
            f"{V1}/{kind}/import?filename={urllib.parse.quote(path.name)}",
            data=read_bytes(path),
            content_type=ctype,
            status=201,
        )
        return str(data["character" if kind == "characters" else "worldBook"]["id"])

    async def import_book(self, doc: Any) -> str:
        data = await self.call(
            "POST",
            f"{V1}/world-books/import?filename=book.json",
            data=json.dumps(doc).encode(),
            content_type="application/json",
            status=201,
        )
        return str(data["worldBook"]["id"])

    async def bound_session(self, book: Any = None) -> dict[str, str]:
        content = read_bytes(ST / "presets_openai_Default.json").decode()
        body = {"content": content, "name": "Default"}
        preset = str((await self.v1("POST", "/import", body, 201))["preset"]["id"])
        card = await self.import_file("characters", ST / "default_Seraphina.png", "image/png")
        book_id = await self.import_book(book or BOOK)
        session = await self.new_session()
        await self.v1("POST", "/select", {"id": preset, "sessionId": session})
        await self.v1(
            "POST", "/character-selection", {"sessionId": session, "characterCardId": card}
        )
        await self.v1(
            "POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book_id]}
        )
        return {"preset": preset, "card": card, "book": book_id, "session": session}

    async def prompt(self, session_id: str, text: str) -> None:
        await self.call("POST", f"/host/api/sessions/{session_id}/prompt", {"text": text}, 202)
        await self.host.get(AGENTS).wait_idle(session_id)


@pytest_asyncio.fixture
async def trace_host(innkeeper_host: RunningHost) -> AsyncIterator[TraceHost]:
    """The real Tavern plugin in a fresh host."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield TraceHost(innkeeper_host)


@pytest_asyncio.fixture
async def trace_helpers() -> type[TraceHost]:
    """The helper class, for tests that load the plugin themselves (leak checks)."""
    return TraceHost
