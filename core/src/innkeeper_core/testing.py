"""The host side of ``innkeeper_hostapi.testing``: a real host on a loopback test server."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from aiohttp.test_utils import TestClient, TestServer

from innkeeper_core.app import CONTAINER, create_app
from innkeeper_core.config import HostConfig
from innkeeper_core.plugins.host import HostSnapshot, PluginHost
from innkeeper_core.plugins.sources import PluginSource, SavedPluginModules
from innkeeper_hostapi import ServiceKey

T = TypeVar("T")

__all__ = ["CoreTestHost", "SavedPluginModules", "start_test_host"]


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
