"""Character routes: catalog and sidebar order, CRUD, JSON/PNG import and export, embedded book,
native regex, world-book relations, missing-card relink."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import read_body
from innkeeper_tavern.pure.formats import card as card_format
from innkeeper_tavern.pure.formats.png import MAX_CARD_FILE_BYTES
from innkeeper_tavern.state.resources import CharacterImport, TavernResources
from innkeeper_tavern.state.resources.character_state import MAX_CHARACTER_ORDER
from innkeeper_tavern.state.resources.errors import CHARACTER_NOT_FOUND
from innkeeper_tavern.state.resources.kinds import character_wire
from innkeeper_tavern.state.thumbnails.images import make_card_cover

from .common import (
    MULTIPART_OVERHEAD_BYTES,
    Route,
    attachment,
    bad_request,
    handler,
    json_object,
    ok,
    resource_id,
    upload,
)
from .presets import BINDING_BODY_LIMIT

#: `docs/contract/http-api.md#v1-limits`: ``POST /characters/import`` 32 MiB file limit (a
#: multipart upload may add its envelope on top).
CHARACTER_IMPORT_BODY_LIMIT: Final = MAX_CARD_FILE_BYTES + MULTIPART_OVERHEAD_BYTES
#: Media types ``POST /characters/import`` accepts: a raw JSON or PNG card, or a form upload.
CHARACTER_IMPORT_TYPES: Final = (
    "application/json",
    "image/png",
    "application/octet-stream",
    "multipart/form-data",
)
#: ``POST``/``PATCH /characters``: card text fields (the stored document has its own limit).
CHARACTER_BODY_LIMIT: Final = 8 << 20
#: Embedded-book edits ≤ 4 MiB, as in the original (`docs/resources.md#original-data`).
CHARACTER_WORLD_BOOK_BODY_LIMIT: Final = 4 << 20
#: ``PUT /characters/order``: 4,096 ids (`docs/contract/resources.md#character-order`).
CHARACTER_ORDER_BODY_LIMIT: Final = MAX_CHARACTER_ORDER * 128
#: ``POST /characters/relink``: two ids.
RELINK_BODY_LIMIT: Final = 4 << 10
#: ``PUT /characters/:id/avatar``: the uploaded picture (cropped and re-encoded server-side).
AVATAR_BODY_LIMIT: Final = 16 << 20
#: Media types of an avatar upload.
AVATAR_TYPES: Final = ("image/png", "image/jpeg", "image/webp")
#: Regex arrays travel inside the card document (same bound as preset regex bodies).
REGEX_BODY_LIMIT: Final = 2 << 20


def _imported(result: CharacterImport) -> dict[str, Any]:
    out: dict[str, Any] = {"character": character_wire(result.record)}
    if result.match is not None:
        tombstone, how = result.match
        # Without a play workspace the relink is deferred and the tombstone stays.
        out["missingCharacterMatch"] = {
            "previousCharacterId": tombstone.id,
            "name": tombstone.name,
            "matchedBy": how,
            "relinked": result.relinked,
        }
    return out


async def _card_response(build: Callable[[], dict[str, Any]], status: int = 200) -> web.Response:
    """``{ok:true, **build()}`` built and encoded off the event loop: a card may hold tens of
    MiB."""

    def encode() -> bytes:
        return msgspec.json.encode({"ok": True, **build()})

    body = await asyncio.to_thread(encode)
    return web.Response(body=body, status=status, content_type="application/json")


def routes(res: TavernResources) -> list[Route]:
    """The character rows of the v1 table."""

    def cid(request: web.Request) -> str:
        return resource_id(request, CHARACTER_NOT_FOUND, "character")

    def catalog() -> dict[str, Any]:
        cards, mode, missing = res.list_characters()
        return {
            "characters": cards,
            "sorting": {"mode": mode},
            "missingCharacters": [
                {"id": t.id, "name": t.name, "sha256": t.sha256, "deletedAt": t.deleted_at}
                for t in missing
            ],
        }

    @handler
    async def list_characters(request: web.Request) -> web.StreamResponse:
        return web.Response(body=res.character_catalog_json(), content_type="application/json")

    @handler
    async def create(request: web.Request) -> web.StreamResponse:
        result = await res.create_character(await json_object(request))
        return await _card_response(lambda: _imported(result), 201)

    @handler
    async def import_card(request: web.Request) -> web.StreamResponse:
        file_name, data = await upload(request)
        # parse_card_bytes checks the 32 MiB file limit first (ARTIFACT_TOO_LARGE, 413).
        result = await res.import_character(data, file_name)
        return await _card_response(lambda: _imported(result), 201)

    def revised(record: Any) -> dict[str, Any]:
        # The revision is read right after the write returned (no await in between), so it is
        # the one this record was stored at.
        return {
            "character": {
                **character_wire(record),
                "revision": res.characters.revision_of(record.id),
            }
        }

    @handler
    async def get(request: web.Request) -> web.StreamResponse:
        record, revision = await res.characters.get_with_revision(cid(request))
        return await _card_response(
            lambda: {"character": {**character_wire(record), "revision": revision}}
        )

    @handler
    async def patch(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        expected = body.pop("expectedRevision", None)
        if expected is not None and not isinstance(expected, str):
            raise bad_request(
                "expectedRevision must be a string", card_format.CHARACTER_CARD_INVALID
            )
        record = await res.update_character(
            cid(request), lambda c: card_format.edit_card(c, body), expected_revision=expected
        )
        answer = revised(record)
        return await _card_response(lambda: answer)

    @handler
    async def put_avatar(request: web.Request) -> web.StreamResponse:
        card_id = cid(request)
        expected = request.query.get("expectedRevision")
        data = await read_body(request)
        cover = await asyncio.to_thread(make_card_cover, data)
        record = await res.update_character(
            card_id, card_format.with_cover, expected_revision=expected, cover=cover
        )
        answer = revised(record)
        return await _card_response(lambda: answer)

    @handler
    async def delete(request: web.Request) -> web.StreamResponse:
        tombstone = await res.delete_character(cid(request))
        return ok(
            id=tombstone.id,
            missingCharacter={
                "id": tombstone.id,
                "name": tombstone.name,
                "sha256": tombstone.sha256,
            },
        )

    @handler
    async def export_json(request: web.Request) -> web.StreamResponse:
        record = await res.characters.get(cid(request))
        data = await asyncio.to_thread(card_format.export_card_json, record.body)
        return attachment(data, f"{record.body.name}.json", "application/json")

    @handler
    async def export_png(request: web.Request) -> web.StreamResponse:
        card_id = cid(request)
        record = await res.characters.get(card_id)
        cover = await res.characters.read_artifact(card_id)
        data = await asyncio.to_thread(card_format.export_card_png, record.body, cover)
        return attachment(data, f"{record.body.name}.png", "image/png")

    @handler
    async def patch_book(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        if set(body) != {"characterBook"}:
            raise bad_request("body must be {characterBook}", card_format.CHARACTER_CARD_INVALID)
        book = body["characterBook"]
        record = await res.update_character(
            cid(request), lambda c: card_format.with_character_book(c, book)
        )
        return await _card_response(lambda: {"character": character_wire(record)})

    @handler
    async def get_regex(request: web.Request) -> web.StreamResponse:
        record = await res.characters.get(cid(request))
        return ok(regexScripts=card_format.card_regex_scripts(record.body))

    @handler
    async def put_regex(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        if set(body) != {"regexScripts"}:
            raise bad_request("body must be {regexScripts}", "REGEX_SCRIPTS_INVALID")
        record = await res.set_character_regex(cid(request), body["regexScripts"])
        return ok(regexScripts=card_format.card_regex_scripts(record.body))

    @handler
    async def get_books(request: web.Request) -> web.StreamResponse:
        card_id = cid(request)
        ids = res.world_book_ids("character", card_id)
        return ok(binding={"characterCardId": card_id, "worldBookIds": ids})

    @handler
    async def put_books(request: web.Request) -> web.StreamResponse:
        card_id = cid(request)
        body = await json_object(request)
        if set(body) != {"worldBookIds"}:
            raise bad_request("body must be {worldBookIds}", "WORLD_BOOK_BINDING_INVALID")
        ids = await res.set_world_book_ids("character", card_id, body["worldBookIds"])
        return ok(binding={"characterCardId": card_id, "worldBookIds": ids})

    @handler
    async def put_order(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        unknown = sorted(set(body) - {"mode", "characterIds"})
        if unknown:
            raise bad_request(f"unknown field {unknown[0]!r}", "CHARACTER_ORDER_INVALID")
        await res.set_character_order(body.get("mode"), body.get("characterIds"))
        listing = catalog()
        return ok(characters=listing["characters"], sorting=listing["sorting"])

    @handler
    async def relink(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        if set(body) != {"previousCharacterId", "characterId"}:
            raise bad_request(
                "body must be {previousCharacterId, characterId}", "CHARACTER_RELINK_INVALID"
            )
        playthroughs, sessions = await res.relink_character(
            body["previousCharacterId"], body["characterId"]
        )
        return ok(relinkedPlaythroughCount=playthroughs, relinkedSessionCount=sessions)

    base = "/characters/{id}"
    return [
        Route("GET", "/characters", list_characters, "tavern.v1.characters.list"),
        Route("POST", "/characters", create, "tavern.v1.characters.create", CHARACTER_BODY_LIMIT),
        Route(
            "POST",
            "/characters/import",
            import_card,
            "tavern.v1.characters.import",
            CHARACTER_IMPORT_BODY_LIMIT,
            CHARACTER_IMPORT_TYPES,
            card_format.CARD_LIMITS,
        ),
        Route(
            "PUT",
            "/characters/order",
            put_order,
            "tavern.v1.characters.order",
            CHARACTER_ORDER_BODY_LIMIT,
        ),
        Route(
            "POST", "/characters/relink", relink, "tavern.v1.characters.relink", RELINK_BODY_LIMIT
        ),
        Route("GET", base, get, "tavern.v1.characters.get"),
        Route("PATCH", base, patch, "tavern.v1.characters.patch", CHARACTER_BODY_LIMIT),
        Route("DELETE", base, delete, "tavern.v1.characters.delete"),
        Route(
            "PUT",
            f"{base}/avatar",
            put_avatar,
            "tavern.v1.characters.avatar",
            AVATAR_BODY_LIMIT,
            AVATAR_TYPES,
        ),
        Route("GET", f"{base}/json", export_json, "tavern.v1.characters.json"),
        Route("GET", f"{base}/png", export_png, "tavern.v1.characters.png"),
        Route(
            "PATCH",
            f"{base}/world-book",
            patch_book,
            "tavern.v1.characters.book",
            CHARACTER_WORLD_BOOK_BODY_LIMIT,
            json_limits=card_format.CARD_LIMITS,
        ),
        Route("GET", f"{base}/regex-scripts", get_regex, "tavern.v1.characters.regex.get"),
        Route(
            "PUT",
            f"{base}/regex-scripts",
            put_regex,
            "tavern.v1.characters.regex.put",
            REGEX_BODY_LIMIT,
        ),
        Route("GET", f"{base}/world-books", get_books, "tavern.v1.characters.books.get"),
        Route(
            "PUT",
            f"{base}/world-books",
            put_books,
            "tavern.v1.characters.books.put",
            BINDING_BODY_LIMIT,
        ),
    ]
