"""Standalone world-book routes: catalog, CRUD, import and JSON export."""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from innkeeper_hostapi import read_body, read_json
from innkeeper_tavern.pure.formats.guards import BOOK_DOCUMENT_LIMITS
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import WORLD_BOOK_NOT_FOUND
from innkeeper_tavern.state.resources.kinds import world_book_wire
from innkeeper_tavern.state.resources.service import (
    MAX_WORLD_BOOK_IMPORT_BYTES,
    export_world_book_json,
)

from .common import Route, attachment, handler, json_object, ok, resource_id

#: World-book import body: up to the 10,000-entry cap (see ``MAX_WORLD_BOOK_IMPORT_BYTES``).
WORLD_BOOK_IMPORT_BODY_LIMIT: Final = MAX_WORLD_BOOK_IMPORT_BYTES
#: ``PATCH /world-books/:id`` sends the normalized model back: every field of every entry is
#: spelled out, so it is a little larger than the ST file it came from.
WORLD_BOOK_PATCH_BODY_LIMIT: Final = 40 << 20
#: ``POST /world-books`` ``{name}``.
WORLD_BOOK_CREATE_BODY_LIMIT: Final = 4 << 10


def routes(res: TavernResources) -> list[Route]:
    """The world-book rows of the v1 table."""

    def bid(request: web.Request) -> str:
        return resource_id(request, WORLD_BOOK_NOT_FOUND, "world book")

    @handler
    async def list_books(request: web.Request) -> web.StreamResponse:
        return ok(worldBooks=res.list_world_books())

    @handler
    async def create(request: web.Request) -> web.StreamResponse:
        record = await res.create_world_book(await json_object(request))
        return ok(201, worldBook=world_book_wire(record))

    @handler
    async def import_book(request: web.Request) -> web.StreamResponse:
        data = await read_body(request)
        # A JSON body was decoded (and guarded by this route's limits) as it arrived: reuse it.
        body = await read_json(request) if request.content_type == "application/json" else None
        record = await res.import_world_book(
            data,
            file_name=request.query.get("filename"),
            name=request.query.get("name"),
            decoded=body if isinstance(body, dict) else None,
        )
        return ok(201, worldBook=world_book_wire(record))

    @handler
    async def get(request: web.Request) -> web.StreamResponse:
        return ok(worldBook=world_book_wire(await res.world_books.get(bid(request))))

    @handler
    async def patch(request: web.Request) -> web.StreamResponse:
        record = await res.update_world_book(bid(request), await json_object(request))
        return ok(worldBook=world_book_wire(record))

    @handler
    async def delete(request: web.Request) -> web.StreamResponse:
        entry = await res.delete_world_book(bid(request))
        return ok(id=entry.id)

    @handler
    async def export(request: web.Request) -> web.StreamResponse:
        record = await res.world_books.get(bid(request))
        data = await asyncio.to_thread(export_world_book_json, record.body)
        return attachment(data, f"{record.body.name}.json", "application/json")

    base = "/world-books/{id}"
    return [
        Route("GET", "/world-books", list_books, "tavern.v1.world_books.list"),
        Route(
            "POST",
            "/world-books",
            create,
            "tavern.v1.world_books.create",
            WORLD_BOOK_CREATE_BODY_LIMIT,
        ),
        Route(
            "POST",
            "/world-books/import",
            import_book,
            "tavern.v1.world_books.import",
            WORLD_BOOK_IMPORT_BODY_LIMIT,
            json_limits=BOOK_DOCUMENT_LIMITS,
        ),
        Route("GET", base, get, "tavern.v1.world_books.get"),
        Route(
            "PATCH",
            base,
            patch,
            "tavern.v1.world_books.patch",
            WORLD_BOOK_PATCH_BODY_LIMIT,
            # A 10,000-entry book is ~500,000 JSON values; the parser's per-entry budget then
            # bounds the book by its entry count (formats.guards.book_limits).
            json_limits=BOOK_DOCUMENT_LIMITS,
        ),
        Route("DELETE", base, delete, "tavern.v1.world_books.delete"),
        Route("GET", f"{base}/json", export, "tavern.v1.world_books.json"),
    ]
