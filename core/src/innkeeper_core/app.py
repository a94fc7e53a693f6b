"""Composition root: build the aiohttp application for a configuration."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from innkeeper_core import __version__
from innkeeper_core.config import MAX_REQUEST_BODY, HostConfig
from innkeeper_core.container import CoreContainer
from innkeeper_core.http.host_routes import HOST_OWNER, TOKEN_PATH, HostRoutes
from innkeeper_core.http.model_routes import ModelRoutes
from innkeeper_core.http.problems import problem_middleware
from innkeeper_core.http.session_routes import SessionRoutes
from innkeeper_core.plugins.reloader import PluginReloader
from innkeeper_core.plugins.sources import discover_drop_ins, discover_entry_points
from innkeeper_core.providers.connection import ModelConnection
from innkeeper_core.sessions.committed import CommittedEvents
from innkeeper_core.tools.builtins import install_builtin_tools
from innkeeper_hostapi import HostInfo, ServiceKey
from innkeeper_hostapi.agents import (
    AGENTS,
    PROVIDER,
    REQUEST_HOOKS,
    SESSION_ANNOTATIONS,
    SESSIONS,
    SYSTEM_PROMPT,
    WORKSPACES,
)
from innkeeper_hostapi.keys import HTTP_CLIENT
from innkeeper_hostapi.slash import COMMANDS
from innkeeper_hostapi.tools import TOOL_POLICY, TOOLS

log = logging.getLogger("innkeeper")

CONTAINER: Final = web.AppKey("innkeeper.container", CoreContainer)
#: The model connection of a started app (``startup_line`` says what it talks to).
MODEL_CONNECTION: Final = web.AppKey("innkeeper.model_connection", ModelConnection)
JSON: Final = ("application/json",)


def create_app(
    config: HostConfig, *, load_plugins: bool = True, listening: bool = True
) -> web.Application:
    """Build the app. Plugins load and resources start on app start-up, and stop on cleanup.

    ``load_plugins=False`` starts an empty host (tests load plugins explicitly).
    ``listening=False`` is a host a command runs in its own process (``local_host``): nothing
    listens, so ``innkeeper_host_started`` is not called, and turns a crashed server left open
    are left for the next server to close and answer (a command must not call the provider).
    """
    container = CoreContainer(config=config)
    registries = container.registries()
    guard = container.guard()
    dispatcher = container.dispatcher()
    plugins = container.plugin_host()
    routes = registries.routes

    app = web.Application(
        middlewares=[problem_middleware, guard.middleware, registries.middlewares.middleware],
        client_max_size=MAX_REQUEST_BODY,
    )
    app[CONTAINER] = container

    host_routes = HostRoutes(plugins)
    for prefix in ("/host/", "/healthz", TOKEN_PATH):
        routes.reserve_prefix(prefix, HOST_OWNER)
    for method, path, handler, name in (
        ("GET", "/healthz", host_routes.healthz, "host.healthz"),
        ("GET", "/host/api/plugins", host_routes.list_plugins, "host.plugins"),
        ("GET", "/host/api/tools", host_routes.list_tools, "host.tools"),
        ("GET", TOKEN_PATH, guard.token_handler, "host.request_token"),
    ):
        routes.add(method, path, handler, owner=HOST_OWNER, name=name, max_body=0, accepts=())
    app.router.add_route("*", "/{tail:.*}", dispatcher.handle)

    hub = container.hub()

    async def close_streams(app: web.Application) -> None:
        hub.close()  # live SSE streams end before the server waits for handlers

    app.on_shutdown.append(close_streams)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await asyncio.to_thread(Path(config.data_dir).mkdir, parents=True, exist_ok=True)
        await _maybe_await(container.init_resources())
        client = await _resolve(container.http_client())
        store = await _resolve(container.store())
        sessions = await _resolve(container.sessions())
        workspaces = await _resolve(container.workspaces())
        connection = await _resolve(container.model_connection())
        agents = await _resolve(container.agents())
        app[MODEL_CONNECTION] = connection
        # Saved model settings apply from the next turn on, with no restart.
        remove_connection_listener = connection.listen(
            lambda provider: setattr(agents, "provider", provider)
        )
        policy = await _resolve(container.policy())
        remove_listener = store.add_listener(hub.on_append)
        remove_policy_listener = store.add_listener(policy.on_append)
        # After the policy's own listener: a plugin reading the policy sees the new mode.
        committed = CommittedEvents(registries.bus, registries.bus.listening)
        remove_committed_listener = store.add_listener(committed.on_append)
        committed.start()
        builtins = install_builtin_tools(registries, config.tools)
        host_services: tuple[tuple[ServiceKey[Any], object], ...] = (
            (HTTP_CLIENT, client),
            (SESSIONS, sessions),
            (WORKSPACES, workspaces),
            (AGENTS, agents),
            (SYSTEM_PROMPT, registries.sections),
            (REQUEST_HOOKS, registries.request_hooks),
            (SESSION_ANNOTATIONS, registries.annotations),
            (TOOLS, registries.tools),
            (TOOL_POLICY, policy),
            (COMMANDS, registries.commands),
        )
        bindings = [
            registries.services.bind(key, HOST_OWNER, _constant(value))
            for key, value in host_services
        ]
        # Resolved at call time: the provider in use now, after any change from the page.
        bindings.append(registries.services.bind(PROVIDER, HOST_OWNER, lambda: agents.provider))
        model_routes = ModelRoutes(connection, client)
        entries = [
            routes.add(method, path, handler, owner=HOST_OWNER, max_body=limit, accepts=JSON)
            for method, path, handler, limit in model_routes.routes()
        ]
        session_routes = SessionRoutes(
            store, sessions, workspaces, agents, hub, policy, annotations=registries.annotations
        )
        entries += [
            routes.add(method, path, handler, owner=HOST_OWNER, max_body=limit, accepts=JSON)
            for method, path, handler, limit in session_routes.routes()
        ]
        if load_plugins:
            for source in [*discover_entry_points(), *discover_drop_ins(config.plugin_dirs)]:
                await plugins.load(source)
        if listening:
            # After the plugins: their agent/created listeners see the recovered sessions.
            await agents.recover()
            plugins.host_started(
                HostInfo(
                    version=__version__,
                    base_url=f"http://{config.host}:{config.port}",
                    data_dir=config.data_dir,
                    reload=config.reload,
                )
            )
        stop = asyncio.Event()
        watcher = (
            asyncio.get_running_loop().create_task(
                PluginReloader(plugins).run(stop), name="host:reloader"
            )
            if config.reload
            else None
        )
        yield
        stop.set()
        if watcher is not None:
            await asyncio.gather(watcher, return_exceptions=True)
        await agents.shutdown()
        await plugins.shutdown()
        remove_committed_listener()
        await committed.stop()
        for entry in entries:
            routes.remove(entry)
        for binding in bindings:
            registries.services.unbind(binding)
        remove_listener()
        remove_policy_listener()
        remove_connection_listener()
        await builtins()
        await _maybe_await(container.shutdown_resources())

    app.cleanup_ctx.append(lifecycle)
    return app


async def _maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value


def _constant(value: object) -> Callable[[], object]:
    return lambda: value


async def _resolve(value: Any) -> Any:
    """A provider's value: awaited when it depends on an async resource."""
    return await value if inspect.isawaitable(value) else value
