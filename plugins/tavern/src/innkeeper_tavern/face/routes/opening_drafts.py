"""HTTP routes of opening drafts under ``/pmp-dsh-tavern/api/v2/drafts``
(`docs/contract/openings.md#opening-drafts`). Mutations run as logged play operations; reads stay
quiet."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from innkeeper_hostapi import PluginContext, json_response, path_params, read_json
from innkeeper_hostapi.structure import StructureLimits
from innkeeper_tavern.face.routes.play import (
    MESSAGE_BODY_LIMIT,
    SMALL_BODY_LIMIT,
    Handler,
    PlayRoute,
    json_body,
)
from innkeeper_tavern.features.opening_drafts.cards import CardBindings
from innkeeper_tavern.features.opening_drafts.drafts import Drafts
from innkeeper_tavern.features.opening_drafts.grants import GRANT_BODY_LIMIT, RenderingAuthority
from innkeeper_tavern.features.play.oplog import Operation, OperationLog
from innkeeper_tavern.pure.api_paths import V1_PREFIX

#: A draft ``PUT`` carries one greeting's variables (bounded by the record limit).
DRAFT_BODY_LIMIT = 4 << 20


def draft_routes(drafts: Drafts, oplog: OperationLog) -> list[PlayRoute]:
    """``/drafts``, ``/drafts/:id`` and its ``preview``, ``materialize`` and ``cancel``."""

    def mutation(
        operation: str,
        run: Callable[[str, dict[str, Any], Operation], Awaitable[dict[str, Any]]],
        status: int = 200,
    ) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            did = path_params(request).get("draft_id", "")
            async with oplog.operation(operation, request.method) as op:
                body = await json_body(request)
                result = await run(did, body, op)
            return json_response(result, status=status)

        return handler

    async def run_create(_: str, body: dict[str, Any], op: Operation) -> dict[str, Any]:
        return await drafts.create(body, op)

    async def get(request: web.Request) -> web.StreamResponse:
        return json_response(await drafts.get(path_params(request)["draft_id"]))

    async def preview(request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        return json_response(await drafts.preview(path_params(request)["draft_id"], body))

    base = "/drafts/{draft_id}"
    return [
        PlayRoute(
            "/drafts",
            {"POST": (mutation("draft.create", run_create, 201), SMALL_BODY_LIMIT)},
            "tavern.v2.drafts",
        ),
        PlayRoute(
            base,
            {
                "GET": (get, None),
                "PUT": (mutation("draft.update", drafts.put), DRAFT_BODY_LIMIT),
            },
            "tavern.v2.draft",
        ),
        PlayRoute(
            base + "/preview", {"POST": (preview, SMALL_BODY_LIMIT)}, "tavern.v2.draft_preview"
        ),
        PlayRoute(
            base + "/materialize",
            {"POST": (mutation("draft.materialize", drafts.materialize), MESSAGE_BODY_LIMIT)},
            "tavern.v2.draft_materialize",
            StructureLimits(max_string_bytes=MESSAGE_BODY_LIMIT),
        ),
        PlayRoute(
            base + "/cancel",
            {"POST": (mutation("draft.cancel", drafts.cancel), SMALL_BODY_LIMIT)},
            "tavern.v2.draft_cancel",
        ),
    ]


def register_card_routes(
    ctx: PluginContext, authority: RenderingAuthority, cards: CardBindings
) -> None:
    """``/v1/rendering-write-grants`` and ``/v1/mvu/card-binding``, ``/card-write``,
    ``/card-binding/revoke``."""

    async def post_grant(request: web.Request) -> web.StreamResponse:
        return json_response(authority.grant(await read_json(request)))

    async def delete_grant(request: web.Request) -> web.StreamResponse:
        removed = authority.revoke(path_params(request)["grant_id"])
        return json_response({"ok": True, "removed": removed})

    async def bind(request: web.Request) -> web.StreamResponse:
        return json_response(await cards.bind(await read_json(request)))

    async def write(request: web.Request) -> web.StreamResponse:
        return json_response(await cards.write(await read_json(request)))

    async def revoke(request: web.Request) -> web.StreamResponse:
        return json_response(await cards.revoke(await read_json(request)))

    routes: list[tuple[str, str, Handler, str, int]] = [
        ("POST", "/rendering-write-grants", post_grant, "grants.post", GRANT_BODY_LIMIT),
        ("DELETE", "/rendering-write-grants/{grant_id}", delete_grant, "grants.delete", 1024),
        ("POST", "/mvu/card-binding", bind, "card_binding", SMALL_BODY_LIMIT),
        ("POST", "/mvu/card-write", write, "card_write", MESSAGE_BODY_LIMIT),
        ("POST", "/mvu/card-binding/revoke", revoke, "card_binding.revoke", SMALL_BODY_LIMIT),
    ]
    for method, path, handler, name, limit in routes:
        ctx.add_route(method, V1_PREFIX + path, handler, name=f"tavern.{name}", max_body=limit)
