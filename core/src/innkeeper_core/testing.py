"""The host side of ``innkeeper_hostapi.testing``: a real host on a loopback test server."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from aiohttp.test_utils import TestClient, TestServer

from innkeeper_core.app import CONTAINER, create_app
from innkeeper_core.config import HostConfig
from innkeeper_core.plugins.host import HostSnapshot, PluginHost
from innkeeper_core.plugins.sources import (
    DROP_IN_NAMESPACE,
    PluginSource,
    discover_entry_points,
    plugin_modules,
    purge_modules,
)
from innkeeper_hostapi import ServiceKey

T = TypeVar("T")


class SavedPluginModules:
    """The plugin modules imported now, to put back after a host in the test process unloads.

    Unloading or reloading a plugin purges its modules; the test process's own imports of them
    (and msgspec/typing resolving forward references through ``sys.modules``) must find the same
    module objects afterwards, so whoever starts a full host in-process restores them on close.
    """

    def __init__(self) -> None:
        self.roots = {source.root_module for source in discover_entry_points()}
        self.roots.add(DROP_IN_NAMESPACE)
        self.modules = {
            name: module for root in self.roots for name, module in plugin_modules(root).items()
        }

    def restore(self) -> None:
        """Drop what the host imported fresh and put the saved module objects back."""
        for root in self.roots:
            purge_modules(root)
        sys.modules.update(self.modules)


class CoreTestHost:
    """Implements ``innkeeper_hostapi.testing.RunningHost``."""

    def __init__(self, client: TestClient[Any, Any], plugins: PluginHost) -> None:
        self._client = client
        self.plugins = plugins
        self._saved = SavedPluginModules()

    @property
    def client(self) -> TestClient[Any, Any]:
        return self._client

    @property
    def origin(self) -> str:
        return str(self._client.make_url("/")).rstrip("/")

    async def load(self, plugin_id: str, target: str) -> Mapping[str, Any]:
        kind = "drop-in" if "/" in target or "\\" in target else "entry-point"
        await self.plugins.load(PluginSource(plugin_id, kind, target))
        return self.status(plugin_id)

    async def unload(self, plugin_id: str) -> None:
        await self.plugins.unload(plugin_id)

    async def reload(self, plugin_id: str) -> Mapping[str, Any]:
        await self.plugins.reload(plugin_id)
        return self.status(plugin_id)

    def status(self, plugin_id: str) -> Mapping[str, Any]:
        return self.plugins.describe(plugin_id)

    def get(self, key: ServiceKey[T]) -> T:
        return self.plugins.registries.services.get(key)

    def snapshot(self) -> HostSnapshot:
        return self.plugins.snapshot()

    async def close(self) -> None:
        await self._client.close()
        self._saved.restore()


async def start_test_host(data_dir: Path, **overrides: Any) -> CoreTestHost:
    """Start a host with no plugins on an ephemeral loopback port (or ``port=N``)."""
    config = HostConfig(data_dir=str(data_dir), **{"port": 0, **overrides})
    app = create_app(config, load_plugins=False)
    # A given port is really listened on (so HostInfo.base_url is the true address).
    server = TestServer(app, host="127.0.0.1", port=config.port or None)
    client: TestClient[Any, Any] = TestClient(server)
    await client.start_server()
    return CoreTestHost(client, app[CONTAINER].plugin_host())
