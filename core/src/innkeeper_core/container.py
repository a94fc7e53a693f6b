"""The host's dependency-injector container: what the host builds, starts and stops.

The HTTP client session and the event store are async resources: ``init_resources()`` opens
them when the app starts, ``shutdown_resources()`` closes them on cleanup. Providers depending on
them (sessions, provider, agents) resolve to awaitables: ``await container.agents()``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

import aiohttp
from dependency_injector import containers, providers

from innkeeper_core.agents.hub import LiveHub
from innkeeper_core.agents.manager import AgentManager
from innkeeper_core.config import HostConfig
from innkeeper_core.http.dispatch import Dispatcher, PluginGate
from innkeeper_core.http.security import RequestGuard
from innkeeper_core.plugins.context import HostRegistries
from innkeeper_core.plugins.host import PluginHost
from innkeeper_core.providers.connection import ModelConnection
from innkeeper_core.sessions import StoreSessionController, StoreWorkspaceController
from innkeeper_core.sessions.store import event_store_resource
from innkeeper_core.tools.policy import PolicyDefaults, ToolPolicy
from innkeeper_core.tools.runner import ToolRunner
from innkeeper_hostapi.bodies import BodyTimeouts


async def client_session() -> AsyncIterator[aiohttp.ClientSession]:
    """One shared outgoing HTTP session per server, closed on shutdown."""
    session = aiohttp.ClientSession()
    try:
        yield session
    finally:
        await session.close()


def _policy_defaults(config: HostConfig) -> PolicyDefaults:
    tools = config.tools
    return PolicyDefaults.from_config(
        tools.permission_preset, tools.sandbox_mode, tools.approval_policy, tools.approval_timeout_s
    )


def _call_config(connection: ModelConnection) -> Callable[[], dict[str, Any]]:
    """The host's default call config for every request (plugins adjust it through hooks):
    the model of the connection in use now (the page's model settings apply to the next turn)."""
    return lambda: {"model": connection.model or None}


class CoreContainer(containers.DeclarativeContainer):
    """Host services. Resources (the HTTP client) start and stop with the aiohttp app."""

    config = providers.Dependency(instance_of=HostConfig)
    registries = providers.Singleton(HostRegistries)
    gate = providers.Singleton(PluginGate)
    guard = providers.Singleton(RequestGuard, allowed_hosts=config.provided.allowed_hosts)
    dispatcher = providers.Singleton(
        Dispatcher,
        routes=registries.provided.routes,
        gate=gate,
        timeouts=providers.Callable(
            BodyTimeouts,
            idle=config.provided.body_idle_timeout,
            total=config.provided.body_timeout,
        ),
        max_pending_per_peer=config.provided.max_pending_bodies_per_peer,
    )
    plugin_host = providers.Singleton(
        PluginHost,
        registries=registries,
        gate=gate,
        data_root=providers.Callable(Path, config.provided.data_dir),
        blocked=providers.Callable(frozenset, config.provided.blocked_plugins),
        plugin_config=config.provided.plugins,
        drain_seconds=config.provided.drain_seconds,
    )
    hub = providers.Singleton(LiveHub)
    http_client = providers.Resource(client_session)
    store = providers.Resource(event_store_resource, data_dir=config.provided.data_dir)
    sessions = providers.Singleton(StoreSessionController, store)
    workspaces = providers.Singleton(StoreWorkspaceController, store)
    # ``config.provided.provider`` would name the provided-instance's own ``provider`` attribute.
    provider_config = providers.Callable(attrgetter("provider"), config)
    # The configured settings, the ones saved from the page, and the provider built from them.
    model_connection = providers.Singleton(
        ModelConnection,
        provider_config,
        http_client,
        data_dir=providers.Callable(Path, config.provided.data_dir),
        fixed=providers.Callable(frozenset, provider_config.provided.fixed),
    )
    #: The provider at start-up (``model_connection`` swaps the agents' one on a change).
    provider = providers.Callable(attrgetter("provider"), model_connection)
    tools_config = providers.Callable(attrgetter("tools"), config)
    policy = providers.Singleton(
        ToolPolicy, store, hub, providers.Callable(_policy_defaults, config)
    )
    tool_runner = providers.Singleton(
        ToolRunner,
        registries.provided.tools,
        policy,
        call_timeout_s=tools_config.provided.call_timeout_s,
    )
    agents = providers.Singleton(
        AgentManager,
        store=store,
        sessions=sessions,
        hub=hub,
        bus=registries.provided.bus,
        sections=registries.provided.sections,
        request_hooks=registries.provided.request_hooks,
        slots=registries.provided.slots,
        provider=provider,
        call_config=providers.Callable(_call_config, model_connection),
        parameter_fallback=provider_config.provided.parameter_fallback,
        tools=tool_runner,
        commands=registries.provided.commands,
        max_steps=tools_config.provided.max_steps,
    )
