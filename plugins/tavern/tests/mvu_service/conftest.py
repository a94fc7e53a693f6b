"""A running host with the resource libraries, session selections and ``tavernMvu``.

A drop-in test plugin wires exactly what the Tavern plugin's setup wires for MVU
(``install_session_selections`` + ``install_mvu``) so the tests do not depend on unrelated parts
of the plugin; one test loads the real plugin as well.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from tavern_harness import HostStarter, TavernApi, host_starter

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_core.testing import CoreTestHost
from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.features.mvu_service import MvuService
from innkeeper_tavern.state.resources import TavernResources

PLUGIN_ID = "mvuplug"

PLUGIN_SOURCE = """
from innkeeper_hostapi import hookimpl
from innkeeper_tavern.face.routes.session_bindings import install_session_selections
from innkeeper_tavern.face.routes.mvu_install import install_mvu
from innkeeper_tavern.state.resources import TavernResources

STATE = {}


@hookimpl
async def innkeeper_plugin_setup(ctx):
    resources = TavernResources(ctx.data_dir, logger=ctx.logger)
    await resources.open()
    selections = await install_session_selections(ctx, resources)
    STATE["service"] = await install_mvu(ctx, resources, selections)
    STATE["resources"] = resources
"""

INITVAR = "hp: 100\nmood: calm\ngold: 5\nbag: [sword, $__META_EXTENSIBLE__$]"


def card_json(
    name: str = "Ada",
    initvar: str = INITVAR,
    first_message: str = "Welcome.",
    greetings: tuple[str, ...] = (),
    extensions: dict[str, Any] | None = None,
) -> bytes:
    """A V2 card whose embedded book holds one `[initvar]` entry."""
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "first_mes": first_message,
            "alternate_greetings": list(greetings),
            "character_book": {
                "name": f"{name} book",
                "entries": [
                    {
                        "keys": [],
                        "content": initvar,
                        "comment": "[initvar] base",
                        "enabled": True,
                        "insertion_order": 100,
                    }
                ],
            },
            "extensions": extensions or {},
        },
    }
    return json.dumps(card).encode()


def write_plugin(tmp_path: Path) -> str:
    folder = tmp_path / "plugins" / PLUGIN_ID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    return str(folder)


class Mvu(TavernApi):
    """HTTP helpers, the synthetic provider and direct access to the service."""

    def __init__(self, host: RunningHost, plugin_id: str = PLUGIN_ID) -> None:
        super().__init__(host)
        self.plugin_id = plugin_id

    @property
    def service(self) -> MvuService:
        service = self.host.get(TAVERN_MVU)
        assert isinstance(service, MvuService)
        return service

    @property
    def resources(self) -> TavernResources:
        module = sys.modules[f"innkeeper_plugins.{PLUGIN_ID}"]
        resources: TavernResources = module.STATE["resources"]
        return resources

    async def get(self, path: str, status: int = 200, **query: Any) -> Any:
        from urllib.parse import urlencode

        params = {k: json.dumps(v) if isinstance(v, dict) else str(v) for k, v in query.items()}
        return await self.v1("GET", f"{path}?{urlencode(params)}", status=status)

    async def card(self, **kwargs: Any) -> str:
        imported = await self.resources.import_character(card_json(**kwargs), "card.json")
        return imported.record.id

    async def new_session(self, card_id: str | None = None) -> str:
        data = await self.call("POST", "/host/api/sessions", {"title": "t"}, 201)
        session_id: str = data["session"]["id"]
        if card_id is not None:
            await self.select(session_id, card_id)
        return session_id

    async def select(self, session_id: str, card_id: str, greeting: int = 0) -> None:
        await self.v1(
            "POST",
            "/character-selection",
            {
                "sessionId": session_id,
                "characterCardId": card_id,
                "character": {"greetingIndex": greeting},
            },
        )

    async def turn(self, session_id: str, reply: str | SyntheticReply, text: str = "Hi") -> None:
        self.provider.enqueue(reply)
        await self.call("POST", f"/host/api/sessions/{session_id}/prompt", {"text": text}, 202)
        await self.host.get(AGENTS).wait_idle(session_id)

    async def state(self, session_id: str) -> dict[str, Any]:
        """The session's (single) resource record with content.

        The instance is allocated first, as the session's first real use (a turn, an edit, a
        prompt read) would: a GET alone only shows what would be allocated and changes nothing.
        """
        scope = {"authority": "local", "sessionId": session_id}
        service = self.service
        async with service._lock:
            await service._ensure_instance(session_id)
        listed = (await self.get("/mvu/resources", scope=scope))["resources"]
        assert len(listed) == 1, listed
        record: dict[str, Any] = (await self.get("/mvu/resource", id=listed[0]["id"], scope=scope))[
            "resource"
        ]
        return record

    async def stat(self, session_id: str) -> dict[str, Any]:
        stat: dict[str, Any] = (await self.state(session_id))["content"]["stat_data"]
        return stat


@pytest_asyncio.fixture
async def mvu(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Mvu]:
    await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
    yield Mvu(innkeeper_host)


@pytest_asyncio.fixture
async def start_host(tmp_path: Path) -> AsyncIterator[HostStarter]:
    """Start hosts on one data dir (restarts); each is closed after the test at the latest."""

    async def load(host: CoreTestHost) -> Mvu:
        await host.load(PLUGIN_ID, write_plugin(tmp_path))
        return Mvu(host)

    async with host_starter(load) as start:
        yield start
