"""Preset routes: catalog, CRUD, ST import/export, native regex and world-book relations."""

from __future__ import annotations

import asyncio
from typing import Any, Final

from aiohttp import web

from innkeeper_tavern.pure.formats.preset import (
    PRESET_INVALID,
    Preset,
    export_preset_json,
    preset_regex_scripts,
)
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import PRESET_NOT_FOUND
from innkeeper_tavern.state.resources.kinds import preset_wire
from innkeeper_tavern.state.resources.library import Record

from .common import Route, attachment, bad_request, handler, json_object, ok, resource_id

#: Preset routes accept bodies up to 2 MiB, as the original did (`docs/resources.md#original-data`).
PRESET_BODY_LIMIT: Final = 2 << 20
#: ``POST /import`` carries the preset as an escaped JSON string; escaping can double its size.
PRESET_IMPORT_BODY_LIMIT: Final = 2 * PRESET_BODY_LIMIT
#: ``PUT …/world-books``: 100 ids of ≤ 100 characters (`docs/contract/world-info.md#relations`)
#: fit in 64 KiB.
BINDING_BODY_LIMIT: Final = 64 << 10


def routes(res: TavernResources) -> list[Route]:
    """The preset rows of the v1 table."""

    def pid(request: web.Request) -> str:
        return resource_id(request, PRESET_NOT_FOUND, "preset")

    def revised(record: Record[Preset]) -> dict[str, Any]:
        # Read right after the write returned (no await in between): the revision it was
        # stored at, so every answer carrying a preset carries the revision to edit it with.
        return {**preset_wire(record), "revision": res.presets.revision_of(record.id)}

    @handler
    async def create(request: web.Request) -> web.StreamResponse:
        record = await res.create_preset(await json_object(request))
        return ok(201, preset=revised(record))

    @handler
    async def import_preset(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        unknown = sorted(set(body) - {"content", "name"})
        if unknown or "content" not in body:
            raise bad_request("body must be {content, name?}")
        name = body.get("name")
        if name is not None and not isinstance(name, str):
            raise bad_request("name must be a string")
        content = body["content"]
        if not isinstance(content, str | dict):
            raise bad_request("content must be the preset JSON text")
        record = await res.import_preset(content, name)
        return ok(201, preset=revised(record))

    @handler
    async def get(request: web.Request) -> web.StreamResponse:
        record, revision = await res.presets.get_with_revision(pid(request))
        return ok(preset={**preset_wire(record), "revision": revision})

    @handler
    async def put(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        expected = body.pop("expectedRevision", None)
        if expected is not None and not isinstance(expected, str):
            raise bad_request("expectedRevision must be a string", PRESET_INVALID)
        # A stale ``expectedRevision`` is refused (409 RESOURCE_REVISION_CONFLICT) and nothing is
        # written: the editor keeps the player's edit (docs/resources.md "Preset editing").
        record = await res.update_preset(pid(request), body, expected_revision=expected)
        return ok(preset=revised(record))

    @handler
    async def delete(request: web.Request) -> web.StreamResponse:
        entry = await res.delete_preset(pid(request))
        return ok(id=entry.id)

    @handler
    async def export(request: web.Request) -> web.StreamResponse:
        record = await res.presets.get(pid(request))
        data = await asyncio.to_thread(export_preset_json, record.body)
        return attachment(data, f"{record.body.name}.json", "application/json")

    @handler
    async def get_regex(request: web.Request) -> web.StreamResponse:
        record = await res.presets.get(pid(request))
        return ok(regexScripts=preset_regex_scripts(record.body))

    @handler
    async def put_regex(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        if set(body) != {"regexScripts"}:
            raise bad_request("body must be {regexScripts}", "REGEX_SCRIPTS_INVALID")
        record = await res.set_preset_regex(pid(request), body["regexScripts"])
        return ok(regexScripts=preset_regex_scripts(record.body))

    @handler
    async def get_books(request: web.Request) -> web.StreamResponse:
        preset_id = pid(request)
        ids = res.world_book_ids("preset", preset_id)
        return ok(binding={"presetId": preset_id, "worldBookIds": ids})

    @handler
    async def put_books(request: web.Request) -> web.StreamResponse:
        preset_id = pid(request)
        body = await json_object(request)
        if set(body) != {"worldBookIds"}:
            raise bad_request("body must be {worldBookIds}", "WORLD_BOOK_BINDING_INVALID")
        ids = await res.set_world_book_ids("preset", preset_id, body["worldBookIds"])
        return ok(binding={"presetId": preset_id, "worldBookIds": ids})

    big = PRESET_BODY_LIMIT
    return [
        Route("POST", "/presets", create, "tavern.v1.presets.create", big),
        Route(
            "POST", "/import", import_preset, "tavern.v1.presets.import", PRESET_IMPORT_BODY_LIMIT
        ),
        Route("GET", "/presets/{id}", get, "tavern.v1.presets.get"),
        Route("PUT", "/presets/{id}", put, "tavern.v1.presets.put", big),
        Route("DELETE", "/presets/{id}", delete, "tavern.v1.presets.delete"),
        Route("GET", "/presets/{id}/export", export, "tavern.v1.presets.export"),
        Route("GET", "/presets/{id}/regex-scripts", get_regex, "tavern.v1.presets.regex.get"),
        Route("PUT", "/presets/{id}/regex-scripts", put_regex, "tavern.v1.presets.regex.put", big),
        Route("GET", "/presets/{id}/world-books", get_books, "tavern.v1.presets.books.get"),
        Route(
            "PUT",
            "/presets/{id}/world-books",
            put_books,
            "tavern.v1.presets.books.put",
            BINDING_BODY_LIMIT,
        ),
    ]
