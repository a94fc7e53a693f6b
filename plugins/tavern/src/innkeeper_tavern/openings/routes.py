"""HTTP routes of opening drafts under ``/pmp-dsh-tavern/api/v2/drafts`` (`spec/API.md`
"Sessionless opening drafts"). Mutations run as logged play operations; reads stay quiet."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from innkeeper_hostapi import json_response, path_params
from innkeeper_hostapi.structure import StructureLimits
from innkeeper_tavern.play.oplog import Operation, OperationLog
from innkeeper_tavern.play.routes import (
    MESSAGE_BODY_LIMIT,
    SMALL_BODY_LIMIT,
    Handler,
    PlayRoute,
    json_body,
)

from .drafts import Drafts

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
