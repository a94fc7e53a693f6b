"""Fixtures for the group tests: a host with the Tavern plugin and a few cards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

V1 = "/pmp-dsh-tavern/api/v1"


class Groups:
    """JSON calls against the v1 prefix (mutations carry the same-origin header)."""

    def __init__(self, host: Any, root: Path) -> None:
        self.host = host
        self.root = root

    async def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        headers = {"Origin": self.host.origin} if method != "GET" else {}
        resp = await self.host.client.request(method, V1 + path, json=body, headers=headers)
        payload = await resp.json()
        assert resp.status == status, payload
        return payload

    async def card(self, name: str, **fields: Any) -> str:
        doc = await self.call("POST", "/characters", {"name": name, **fields}, 201)
        card_id: str = doc["character"]["id"]
        return card_id


@pytest_asyncio.fixture
async def groups(innkeeper_host: Any, tmp_path: Path) -> AsyncIterator[Groups]:
    """The Tavern plugin loaded into a fresh host."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield Groups(innkeeper_host, tmp_path / "innkeeper-data" / "plugins" / "tavern")
