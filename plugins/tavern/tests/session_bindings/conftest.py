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

import pytest_asyncio
from tavern_harness import HostStarter, TavernApi, host_starter

from innkeeper_core.testing import CoreTestHost
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings import SessionSelectionStore

PLUGIN_ID = "selplug"

PLUGIN_SOURCE = """
from innkeeper_hostapi import hookimpl
from innkeeper_tavern.face.routes.session_bindings import register_selection_routes
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings import setup_session_selections

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


class Tavern(TavernApi):
    """HTTP helpers plus direct access to the plugin's store and resource libraries."""

    @property
    def store(self) -> SessionSelectionStore:
        store: SessionSelectionStore = sys.modules[f"innkeeper_plugins.{PLUGIN_ID}"].STATE["store"]
        return store

    @property
    def resources(self) -> TavernResources:
        res: TavernResources = sys.modules[f"innkeeper_plugins.{PLUGIN_ID}"].STATE["resources"]
        return res

    async def prompt(self, session_id: str, text: str = "Hi") -> None:
        await self.send(session_id, text)


@pytest_asyncio.fixture
async def tavern(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Tavern]:
    await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
    yield Tavern(innkeeper_host)


@pytest_asyncio.fixture
async def start_host(tmp_path: Path) -> AsyncIterator[HostStarter]:
    """Start extra hosts (own config, restarts on one data dir); closed after the test."""

    async def load(host: CoreTestHost) -> Tavern:
        await host.load(PLUGIN_ID, write_plugin(tmp_path))
        return Tavern(host)

    async with host_starter(load) as start:
        yield start
