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
from tavern_harness import V1, HostStarter, TavernApi, host_starter

from innkeeper_core.testing import CoreTestHost
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings import SessionSelectionStore
from innkeeper_tavern.state.session_templates import SessionTemplateStore

PLUGIN_ID = "tplplug"

PLUGIN_SOURCE = """
from innkeeper_hostapi import hookimpl
from innkeeper_tavern.face.routes.session_bindings import register_selection_routes
from innkeeper_tavern.face.routes.session_templates import install_session_templates
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings import setup_session_selections
from innkeeper_tavern.state.session_templates import SESSION_TEMPLATES

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


class Tavern(TavernApi):
    """HTTP helpers plus direct access to the plugin's stores."""

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

    async def raw(
        self, method: str, path: str, data: bytes, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {"Origin": self.host.origin, "Content-Type": content_type}
        resp = await self.host.client.request(method, V1 + path, data=data, headers=headers)
        return resp.status, await resp.json()


@pytest_asyncio.fixture
async def tavern(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Tavern]:
    await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
    yield Tavern(innkeeper_host)


@pytest_asyncio.fixture
async def start_host(tmp_path: Path) -> AsyncIterator[HostStarter]:
    """Start extra hosts (own plugin config, restarts on one data dir); closed after the test."""

    async def load(host: CoreTestHost) -> Tavern:
        await host.load(PLUGIN_ID, write_plugin(tmp_path))
        return Tavern(host)

    async with host_starter(load) as start:
        yield start
