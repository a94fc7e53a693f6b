"""A running host with resources, selections and session templates mounted by a drop-in plugin.

The drop-in plugin wires what the Tavern plugin's setup wires for these parts — the resource
libraries, ``setup_session_selections`` + ``register_selection_routes``, the deletion listener
that clears selections, and ``install_session_templates`` — so routes, services and unloading
are exercised for real without depending on parts of the Tavern plugin under construction.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.selection import SessionSelectionStore
from innkeeper_tavern.templates import SessionTemplateStore

PLUGIN_ID = "tplplug"
V1 = "/pmp-dsh-tavern/api/v1"

PLUGIN_SOURCE = """
from innkeeper_hostapi import hookimpl
from innkeeper_tavern.http.selection_routes import register_selection_routes
from innkeeper_tavern.http.template_routes import install_session_templates
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.selection import setup_session_selections
from innkeeper_tavern.templates import SESSION_TEMPLATES

STATE = {}


@hookimpl
async def innkeeper_plugin_setup(ctx):
    resources = TavernResources(ctx.data_dir, logger=ctx.logger)
    await resources.open()
    store = await setup_session_selections(ctx)
    register_selection_routes(ctx, store, resources)
    resources.deletion_listeners.append(store.clear_resource)
    await install_session_templates(ctx, resources, store)
    STATE["store"] = store
    STATE["resources"] = resources
    STATE["templates"] = ctx.get(SESSION_TEMPLATES)
    STATE["root"] = ctx.data_dir
"""


def write_plugin(tmp_path: Path) -> str:
    folder = tmp_path / "plugins" / PLUGIN_ID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    return str(folder)


class Tavern:
    """HTTP helpers plus direct access to the plugin's stores."""

    def __init__(self, host: RunningHost) -> None:
        self.host = host

    def _state(self, key: str) -> Any:
        return sys.modules[f"innkeeper_plugins.{PLUGIN_ID}"].STATE[key]

    @property
    def store(self) -> SessionSelectionStore:
        store: SessionSelectionStore = self._state("store")
        return store

    @property
    def resources(self) -> TavernResources:
        res: TavernResources = self._state("resources")
        return res

    @property
    def templates(self) -> SessionTemplateStore:
        templates: SessionTemplateStore = self._state("templates")
        return templates

    @property
    def root(self) -> Path:
        root: Path = self._state("root")
        return root

    async def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        headers = {"Origin": self.host.origin} if method != "GET" else None
        resp = await self.host.client.request(method, path, json=body, headers=headers)
        data = await resp.json()
        assert resp.status == status, data
        return data

    async def v1(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        return await self.call(method, V1 + path, body, status)

    async def raw(
        self, method: str, path: str, data: bytes, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {"Origin": self.host.origin, "Content-Type": content_type}
        resp = await self.host.client.request(method, V1 + path, data=data, headers=headers)
        return resp.status, await resp.json()

    async def new_session(self, **body: Any) -> str:
        data = await self.call("POST", "/host/api/sessions", {"title": "t", **body}, 201)
        session_id: str = data["session"]["id"]
        return session_id

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
    """Start extra hosts (own plugin config, restarts on one data dir); closed after the test."""
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
