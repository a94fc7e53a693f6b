"""Session opening world books (`docs/contract/openings.md#opening-world-books`): the
``tavernOpeningWorldBooks`` service and ``POST /pmp-dsh-tavern/api/v1/sessions/:sessionId/
opening-worldbook/prepare`` and ``/commit``.

- :mod:`.manifest` — the opening manifest (shared with the rendering cache's opening snapshot);
- :mod:`.model` — request shapes, ``sourceIdentity``, digests and stable codes;
- :mod:`.store` — ``opening-world-books.json`` (books and receipts, one atomic write);
- :mod:`.service` — proposals and CAS commits;
- :mod:`.views` — the loader's matcher hook, the bound listing and usage decisions.

docs/worldbook.md documents the routes, the service, the manifest format, limits and codes.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import PluginContext, json_response, path_params, read_json
from innkeeper_hostapi.agents import SESSIONS
from innkeeper_hostapi.structure import StructureLimits
from innkeeper_tavern.features.catalogs.memory import MemorySources
from innkeeper_tavern.features.opening_books.manifest import (
    MANIFEST_PATH_OPTION,
    Manifest,
    ManifestError,
    load_manifest,
)
from innkeeper_tavern.features.opening_books.model import MAX_SNAPSHOT_BYTES
from innkeeper_tavern.features.opening_books.service import (
    TAVERN_OPENING_WORLD_BOOKS,
    OpeningWorldBooks,
)
from innkeeper_tavern.features.opening_books.store import OpeningBookStore
from innkeeper_tavern.features.prompt_profile.profile import TavernProfileLoader
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

__all__ = [
    "TAVERN_OPENING_WORLD_BOOKS",
    "OpeningWorldBooks",
    "configured_manifest",
    "install_opening_books",
]

#: ``prepare`` carries up to two snapshots (their text, JSON-escaped) and small fields.
PREPARE_BODY_LIMIT: Final = 2 * MAX_SNAPSHOT_BYTES + (1 << 20)
#: ``commit`` carries ids, the identity and two flags.
COMMIT_BODY_LIMIT: Final = 16 << 10
PREPARE_JSON_LIMITS: Final = StructureLimits(max_string_bytes=MAX_SNAPSHOT_BYTES + (1 << 10))


async def configured_manifest(ctx: PluginContext) -> Manifest:
    """The shipped manifest plus the file named by the ``openingManifestPath`` option (a
    malformed one fails the plugin load with the reason)."""
    extra = ctx.config.get(MANIFEST_PATH_OPTION)
    if extra is not None and (not isinstance(extra, str) or not extra):
        raise ValueError(f"{MANIFEST_PATH_OPTION} must be a file path")
    try:
        return await asyncio.to_thread(load_manifest, extra)
    except ManifestError as exc:
        raise ValueError(f"opening manifest: {exc}") from None


async def install_opening_books(
    ctx: PluginContext,
    resources: TavernResources,
    selections: SessionSelectionStore,
    loader: TavernProfileLoader,
    memory: MemorySources,
    manifest: Manifest,
) -> OpeningWorldBooks:
    """Open the store, provide the service, hook the loader's matcher and the bound listing,
    register both routes; unloading undoes each (and revokes every proposal)."""
    store = OpeningBookStore(ctx.data_dir, logger=ctx.logger)
    await store.open()
    service = OpeningWorldBooks(
        resources,
        selections,
        lambda: ctx.get_optional(SESSIONS),
        manifest,
        store,
        logger=ctx.logger,
    )
    ctx.provide(TAVERN_OPENING_WORLD_BOOKS, lambda: service)
    ctx.on_dispose(service.close)
    views = service.views
    adapter = loader.store_world_books
    if adapter is not None:
        adapter.session_books.append(views.session_books)
        ctx.on_dispose(lambda: adapter.session_books.remove(views.session_books))
    memory.bound_sources.append(views)
    ctx.on_dispose(lambda: memory.bound_sources.remove(views))

    async def prepare(request: web.Request) -> web.StreamResponse:
        body: Any = await read_json(request)
        session_id = path_params(request)["session_id"]
        return json_response(await service.prepare(body, session_id=session_id))

    async def commit(request: web.Request) -> web.StreamResponse:
        body: Any = await read_json(request)
        session_id = path_params(request)["session_id"]
        return json_response(await service.commit(body, session_id=session_id))

    base = V1_PREFIX + "/sessions/{session_id}/opening-worldbook"
    ctx.add_route(
        "POST",
        base + "/prepare",
        prepare,
        name="tavern.opening_worldbook.prepare",
        max_body=PREPARE_BODY_LIMIT,
        json_limits=PREPARE_JSON_LIMITS,
    )
    ctx.add_route(
        "POST",
        base + "/commit",
        commit,
        name="tavern.opening_worldbook.commit",
        max_body=COMMIT_BODY_LIMIT,
    )
    return service
