"""User routes: catalog, CRUD, portable Tavern JSON import/export, world-book relations."""

from __future__ import annotations

from typing import Final

from aiohttp import web

from innkeeper_hostapi import read_body
from innkeeper_tavern.pure.formats.user import (
    MAX_USER_BODY_BYTES,
    MAX_USER_IMPORT_BYTES,
    export_user_json,
)
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import USER_NOT_FOUND
from innkeeper_tavern.state.resources.kinds import user_wire

from .common import Route, attachment, bad_request, handler, json_object, ok, resource_id
from .presets import BINDING_BODY_LIMIT

#: `docs/contract/resources.md#portable-json`: user import ≤ 1 MiB.
USER_IMPORT_BODY_LIMIT: Final = MAX_USER_IMPORT_BYTES
#: Same section: other user JSON writes keep their 256 KiB body limit.
USER_BODY_LIMIT: Final = MAX_USER_BODY_BYTES


def routes(res: TavernResources) -> list[Route]:
    """The user rows of the v1 table."""

    def uid(request: web.Request) -> str:
        return resource_id(request, USER_NOT_FOUND, "user")

    @handler
    async def list_users(request: web.Request) -> web.StreamResponse:
        return ok(users=res.list_users())

    @handler
    async def create(request: web.Request) -> web.StreamResponse:
        record = await res.create_user(await json_object(request))
        return ok(201, user=user_wire(record))

    @handler
    async def import_user(request: web.Request) -> web.StreamResponse:
        record = await res.import_user(await read_body(request))
        return ok(201, user=user_wire(record))

    @handler
    async def export(request: web.Request) -> web.StreamResponse:
        record = await res.users.get(uid(request))
        return attachment(
            export_user_json(record.body), f"{record.body.name}.json", "application/json"
        )

    @handler
    async def get(request: web.Request) -> web.StreamResponse:
        return ok(user=user_wire(await res.users.get(uid(request))))

    @handler
    async def patch(request: web.Request) -> web.StreamResponse:
        record = await res.update_user(uid(request), await json_object(request))
        return ok(user=user_wire(record))

    @handler
    async def delete(request: web.Request) -> web.StreamResponse:
        entry = await res.delete_user(uid(request))
        return ok(id=entry.id)

    @handler
    async def get_books(request: web.Request) -> web.StreamResponse:
        user_id = uid(request)
        return ok(binding={"userId": user_id, "worldBookIds": res.world_book_ids("user", user_id)})

    @handler
    async def put_books(request: web.Request) -> web.StreamResponse:
        user_id = uid(request)
        body = await json_object(request)
        if set(body) != {"worldBookIds"}:
            raise bad_request("body must be {worldBookIds}", "WORLD_BOOK_BINDING_INVALID")
        ids = await res.set_world_book_ids("user", user_id, body["worldBookIds"])
        return ok(binding={"userId": user_id, "worldBookIds": ids})

    base = "/users/{id}"
    return [
        Route("GET", "/users", list_users, "tavern.v1.users.list"),
        Route("POST", "/users", create, "tavern.v1.users.create", USER_BODY_LIMIT),
        Route(
            "POST", "/users/import", import_user, "tavern.v1.users.import", USER_IMPORT_BODY_LIMIT
        ),
        Route("GET", f"{base}/export", export, "tavern.v1.users.export"),
        Route("GET", base, get, "tavern.v1.users.get"),
        Route("PATCH", base, patch, "tavern.v1.users.patch", USER_BODY_LIMIT),
        Route("DELETE", base, delete, "tavern.v1.users.delete"),
        Route("GET", f"{base}/world-books", get_books, "tavern.v1.users.books.get"),
        Route(
            "PUT", f"{base}/world-books", put_books, "tavern.v1.users.books.put", BINDING_BODY_LIMIT
        ),
    ]
