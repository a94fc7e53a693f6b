"""The Tavern plugin's only contact with the host: ``innkeeper_plugin_setup(ctx)``.

Setup opens the resource libraries in ``ctx.data_dir`` (off the event loop), takes the data
directory's writer lock (so ``innkeeper import`` never writes behind a running server's back),
provides them as the ``tavern.resources`` service and registers the v1 routes of
`spec/API.md` "v1 bundled UI contract" under ``/pmp-dsh-tavern/api/v1``. Everything is registered
through ``ctx``, so unloading takes all of it back.
"""

from __future__ import annotations

import asyncio

from innkeeper_hostapi import PluginContext, ServiceKey, hookimpl

from .http import V1_PREFIX, v1_routes
from .resources import TavernResources
from .resources.lock import DataDirLock

#: The resource libraries, for other Tavern parts and plugins (resolve at call time).
TAVERN_RESOURCES: ServiceKey[TavernResources] = ServiceKey("tavern.resources", TavernResources)


@hookimpl
async def innkeeper_plugin_setup(ctx: PluginContext) -> None:
    """Open the stores and register every v1 resource route."""
    root = ctx.data_dir
    lock = DataDirLock(root)
    await asyncio.to_thread(lock.acquire)
    ctx.on_dispose(lock.release)
    resources = TavernResources(root, logger=ctx.logger)
    await resources.open()
    ctx.provide(TAVERN_RESOURCES, lambda: resources)
    for route in v1_routes(resources):
        ctx.add_route(
            route.method,
            V1_PREFIX + route.path,
            route.handler,
            name=route.name,
            max_body=route.max_body,
            accepts=route.accepts,
        )
