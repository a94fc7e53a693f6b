"""The host's dependency-injector container: what the host builds, starts and stops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from dependency_injector import containers, providers

from innkeeper_core.config import HostConfig
from innkeeper_core.http.dispatch import Dispatcher, PluginGate
from innkeeper_core.http.security import RequestGuard
from innkeeper_core.plugins.context import HostRegistries
from innkeeper_core.plugins.host import PluginHost


async def client_session() -> AsyncIterator[aiohttp.ClientSession]:
    """One shared outgoing HTTP session per server, closed on shutdown."""
    session = aiohttp.ClientSession()
    try:
        yield session
    finally:
        await session.close()


class CoreContainer(containers.DeclarativeContainer):
    """Host services. Resources (the HTTP client) start and stop with the aiohttp app."""

    config = providers.Dependency(instance_of=HostConfig)
    registries = providers.Singleton(HostRegistries)
    gate = providers.Singleton(PluginGate)
    guard = providers.Singleton(RequestGuard, allowed_hosts=config.provided.allowed_hosts)
    dispatcher = providers.Singleton(Dispatcher, routes=registries.provided.routes, gate=gate)
    plugin_host = providers.Singleton(
        PluginHost,
        registries=registries,
        gate=gate,
        data_root=providers.Callable(Path, config.provided.data_dir),
        blocked=providers.Callable(frozenset, config.provided.blocked_plugins),
        plugin_config=config.provided.plugins,
        drain_seconds=config.provided.drain_seconds,
    )
    http_client = providers.Resource(client_session)
