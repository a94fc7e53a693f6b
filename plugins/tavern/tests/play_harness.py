"""Helpers of the v2 play tests (on ``pythonpath`` like :mod:`tavern_harness`): the :class:`Play`
client over ``/pmp-dsh-tavern/api/v2`` with a workspace root to bind."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from tavern_harness import TavernApi

from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.plugin import TAVERN_RESOURCES
from innkeeper_tavern.state.resources import TavernResources

V2 = "/pmp-dsh-tavern/api/v2"

#: A card whose book holds an ``[initvar]`` entry (``hp: 100``): its sessions have MVU state.
MVU_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Ada",
        "first_mes": "Welcome.",
        "character_book": {
            "name": "Ada book",
            "entries": [
                {
                    "keys": [],
                    "content": "hp: 100",
                    "comment": "[initvar] base",
                    "enabled": True,
                    "insertion_order": 100,
                }
            ],
        },
    },
}


class Play(TavernApi):
    """HTTP helpers for ``/pmp-dsh-tavern/api/v2`` plus a bound workspace root."""

    def __init__(self, host: RunningHost, root: Path) -> None:
        super().__init__(host)
        #: The directory tests bind as the play workspace root.
        self.root = root

    async def lore_event(self, session_id: str) -> dict[str, Any]:
        """A ``resolvePromptDependency`` event of the lore macro in the embedded book of the
        session's card (a consumer actually bound to it)."""
        picked = await self.v1("GET", f"/character-selection?sessionId={session_id}")
        book = f"character:{picked['selection']['characterCardId']}:embedded-world-book"
        return {
            "usage": "world-book-variable",
            "consumer": {"adapterId": "tavern.world-books", "id": book},
        }

    @property
    def resources(self) -> TavernResources:
        return self.host.get(TAVERN_RESOURCES)

    async def v2(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        return await self.call(method, V2 + path, body, status)

    async def raw(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Origin": self.host.origin} if method != "GET" else {}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = io.BytesIO(json.dumps(body).encode())
        resp = await self.host.client.request(method, V2 + path, data=data, headers=headers)
        return resp.status, await resp.json()

    async def call_raw(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Origin": self.host.origin} if method != "GET" else {}
        resp = await self.host.client.request(method, path, json=body, headers=headers)
        return resp.status, await resp.json()

    async def bind(self) -> dict[str, Any]:
        data: dict[str, Any] = await self.v2("PUT", "/workspace", {"path": str(self.root)})
        return data

    async def read(self, path: str, status: int = 200) -> Any:
        return await self.v2("GET", f"/workspace/files?path={path}", status=status)

    async def write(self, path: str, content: str, status: int = 200, **extra: Any) -> Any:
        got, body = await self.raw(
            "PUT", f"/workspace/files?path={path}", {"content": content, **extra}
        )
        assert got == status, body
        return body
