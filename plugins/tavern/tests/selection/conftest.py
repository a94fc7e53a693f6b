"""A running host with the selection store and routes mounted by a drop-in test plugin.

The test plugin wires exactly what the Tavern plugin's setup wires for selections
(``setup_session_selections`` + ``register_selection_routes``) on top of the resource
libraries, so the routes, the ``agent/created`` listener and unloading are exercised for real.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.selection import SessionSelectionStore

PLUGIN_ID = "selplug"
V1 = "/pmp-dsh-tavern/api/v1"

PLUGIN_SOURCE = """
from innkeeper_hostapi import hookimpl
from innkeeper_tavern.http.selection_routes import register_selection_routes
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.selection import setup_session_selections

STATE = {}


@hookimpl
async def innkeeper_plugin_setup(ctx):
    resources = TavernResources(ctx.data_dir, logger=ctx.logger)
    await resources.open()
    store = await setup_session_selections(ctx)
    register_selection_routes(ctx, store, resources)
    STATE["store"] = store
    STATE["resources"] = resources
"""


def write_plugin(tmp_path: Path) -> str:
    folder = tmp_path / "plugins" / PLUGIN_ID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    return str(folder)


class Tavern:
    """HTTP helpers plus direct access to the plugin's store and resource libraries."""

    def __init__(self, host: RunningHost) -> None:
        self.host = host

    @property
    def store(self) -> SessionSelectionStore:
        store: SessionSelectionStore = sys.modules[f"innkeeper_plugins.{PLUGIN_ID}"].STATE["store"]
        return store

    @property
    def resources(self) -> TavernResources:
        res: TavernResources = sys.modules[f"innkeeper_plugins.{PLUGIN_ID}"].STATE["resources"]
        return res

    async def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        headers = {"Origin": self.host.origin} if method != "GET" else None
        resp = await self.host.client.request(method, path, json=body, headers=headers)
        data = await resp.json()
        assert resp.status == status, data
        return data

    async def v1(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        return await self.call(method, V1 + path, body, status)

    async def new_session(self, **body: Any) -> str:
        data = await self.call("POST", "/host/api/sessions", {"title": "t", **body}, 201)
        session_id: str = data["session"]["id"]
        return session_id

    async def prompt(self, session_id: str, text: str = "Hi") -> None:
        await self.call("POST", f"/host/api/sessions/{session_id}/prompt", {"text": text}, 202)

    async def idle(self, session_id: str) -> None:
        await self.host.get(AGENTS).wait_idle(session_id)

    async def fork(self, session_id: str) -> str:
        history = await self.call("GET", f"/host/api/sessions/{session_id}/history?limit=1")
        seq = history["events"][0]["seq"]
        data = await self.call(
            "POST", f"/host/api/sessions/{session_id}/fork", {"atEventId": seq}, 201
        )
        child: str = data["session"]["id"]
        return child

    async def resolve(self, session_id: str) -> None:
        await self.host.get(AGENTS).resolve_agent(session_id)

    def enqueue_slow_reply(self, delay_s: float = 0.2) -> None:
        from innkeeper_core.providers.synthetic import SyntheticProvider, SyntheticReply

        provider = self.host.get(PROVIDER)
        assert isinstance(provider, SyntheticProvider)
        provider.enqueue(SyntheticReply(text="slow reply here", delay_s=delay_s))

    async def preset(self, name: str) -> str:
        return (await self.resources.create_preset({"name": name})).id

    async def character(self, name: str, greetings: int = 1) -> str:
        body = {"name": name, "alternateGreetings": [f"g{i}" for i in range(1, greetings)]}
        return (await self.resources.create_character(body)).record.id

    async def user(self, name: str) -> str:
        return (await self.resources.create_user({"name": name, "description": "d"})).id

    async def world_book(self, name: str) -> str:
        return (await self.resources.create_world_book({"name": name})).id


@pytest_asyncio.fixture
async def tavern(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Tavern]:
    await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
    yield Tavern(innkeeper_host)


@pytest_asyncio.fixture
async def start_host(tmp_path: Path) -> AsyncIterator[Any]:
    """Start extra hosts (own config, restarts on one data dir); closed after the test."""
    hosts: list[CoreTestHost] = []

    async def start(data_dir: Path, **overrides: Any) -> tuple[CoreTestHost, Tavern]:
        host = await start_test_host(data_dir, **overrides)
        hosts.append(host)
        await host.load(PLUGIN_ID, write_plugin(tmp_path))
        return host, Tavern(host)

    try:
        yield start
    finally:
        for host in reversed(hosts):
            await host.close()
