"""Composition root: build the aiohttp application for a configuration."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from innkeeper_core import __version__
from innkeeper_core.config import MAX_REQUEST_BODY, HostConfig
from innkeeper_core.container import CoreContainer
from innkeeper_core.http.host_routes import HOST_OWNER, TOKEN_PATH, HostRoutes
from innkeeper_core.http.problems import problem_middleware
from innkeeper_core.plugins.reloader import PluginReloader
from innkeeper_core.plugins.sources import discover_drop_ins, discover_entry_points
from innkeeper_hostapi import HostInfo
from innkeeper_hostapi.keys import HTTP_CLIENT

log = logging.getLogger("innkeeper")

CONTAINER: Final = web.AppKey("innkeeper.container", CoreContainer)


def create_app(config: HostConfig, *, load_plugins: bool = True) -> web.Application:
    """Build the app. Plugins load and resources start on app start-up, and stop on cleanup.

    ``load_plugins=False`` starts an empty host (tests load plugins explicitly).
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
        ("GET", TOKEN_PATH, guard.token_handler, "host.request_token"),
    ):
        routes.add(method, path, handler, owner=HOST_OWNER, name=name, max_body=0, accepts=())
    app.router.add_route("*", "/{tail:.*}", dispatcher.handle)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await asyncio.to_thread(Path(config.data_dir).mkdir, parents=True, exist_ok=True)
        await _maybe_await(container.init_resources())
        resolved: Any = container.http_client()
        client = resolved.result() if isinstance(resolved, asyncio.Future) else resolved
        binding = registries.services.bind(HTTP_CLIENT, HOST_OWNER, lambda: client)
        if load_plugins:
            for source in [*discover_entry_points(), *discover_drop_ins(config.plugin_dirs)]:
                await plugins.load(source)
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
        await plugins.shutdown()
        registries.services.unbind(binding)
        await _maybe_await(container.shutdown_resources())

    app.cleanup_ctx.append(lifecycle)
    return app


async def _maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value
