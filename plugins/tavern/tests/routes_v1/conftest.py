"""Fixtures for the v1 route tests: a host with the Tavern plugin loaded, and a small client."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

#: The shared corpus, used in place (never copied into the repo).
CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
V1 = "/pmp-dsh-tavern/api/v1"


class Tavern:
    """Thin helpers over the host's test client: same-origin mutations, JSON decoding."""

    def __init__(self, host: Any, root: Path) -> None:
        self.host = host
        #: The plugin's data directory (``ctx.data_dir``).
        self.root = root
        self.client = host.client
        self.origin = {"Origin": host.origin}

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | None = None,
        content_type: str | None = None,
        status: int | None = None,
    ) -> Any:
        headers = dict(self.origin) if method != "GET" else {}
        if content_type:
            headers["Content-Type"] = content_type
        payload = io.BytesIO(data) if data is not None else None
        resp = await self.client.request(
            method, V1 + path, json=json, data=payload, headers=headers
        )
        body = await resp.read()
        if status is not None:
            assert resp.status == status, (resp.status, body[:500])
        if resp.content_type == "application/json" and "attachment" not in resp.headers.get(
            "Content-Disposition", ""
        ):
            import json as _json

            return _json.loads(body)
        return body

    async def get(self, path: str, status: int = 200) -> Any:
        return await self.call("GET", path, status=status)

    async def raw(self, path: str) -> tuple[int, bytes, Any]:
        resp = await self.client.get(V1 + path)
        return resp.status, await resp.read(), resp.headers


@pytest_asyncio.fixture
async def tavern(innkeeper_host: Any, tmp_path: Path) -> AsyncIterator[Tavern]:
    """The Tavern plugin loaded into a fresh host."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    root = tmp_path / "innkeeper-data" / "plugins" / "tavern"
    assert root.is_dir()
    yield Tavern(innkeeper_host, root)
