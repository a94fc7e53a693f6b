"""HTTP routes of playthroughs and focus (`docs/contract/play.md#v2-surface`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from innkeeper_hostapi import json_response, path_params
from innkeeper_tavern.face.routes.play import SMALL_BODY_LIMIT, Handler, PlayRoute, json_body
from innkeeper_tavern.features.play.import_context import ImportContexts
from innkeeper_tavern.features.play.oplog import Operation, OperationLog
from innkeeper_tavern.features.play.playthroughs import Playthroughs


def import_context_routes(contexts: ImportContexts, oplog: OperationLog) -> list[PlayRoute]:
    """``GET/PUT/DELETE /sessions/:id/import-context``."""

    async def get(request: web.Request) -> web.StreamResponse:
        return json_response(await contexts.get(path_params(request)["session_id"]))

    async def put(request: web.Request) -> web.StreamResponse:
        sid = path_params(request)["session_id"]
        async with oplog.operation("import-context.put", "PUT", session_id=sid) as op:
            body = await json_body(request)
            result = await contexts.put(sid, body, op)
        return json_response(result)

    async def delete(request: web.Request) -> web.StreamResponse:
        sid = path_params(request)["session_id"]
        async with oplog.operation("import-context.delete", "DELETE", session_id=sid) as op:
            result = await contexts.delete(sid, None, op)
        return json_response(result)

    return [
        PlayRoute(
            "/sessions/{session_id}/import-context",
            {
                "GET": (get, None),
                "PUT": (put, SMALL_BODY_LIMIT),
                "DELETE": (delete, SMALL_BODY_LIMIT),
            },
            "tavern.v2.import_context",
        )
    ]


def playthrough_routes(playthroughs: Playthroughs, oplog: OperationLog) -> list[PlayRoute]:
    """Focus, availability, relink-character, detach-session and the ``/focus`` fallback."""

    def mutation(
        operation: str, run: Callable[[str, dict[str, Any], Operation], Awaitable[dict[str, Any]]]
    ) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            pid = path_params(request)["playthrough_id"]
            async with oplog.operation(operation, "POST", playthrough_id=pid) as op:
                body = await json_body(request)
                session_id = body.get("sessionId")
                op.session_id = session_id if isinstance(session_id, str) else None
                result = await run(pid, body, op)
            return json_response(result)

        return handler

    async def focus(request: web.Request) -> web.StreamResponse:
        return json_response(await playthroughs.focus(path_params(request)["playthrough_id"]))

    async def availability(request: web.Request) -> web.StreamResponse:
        return json_response(
            await playthroughs.availability(path_params(request)["playthrough_id"])
        )

    async def focus_by_path(request: web.Request) -> web.StreamResponse:
        return json_response(await playthroughs.focus_by_path(request.query.get("path")))

    base = "/playthroughs/{playthrough_id}"
    return [
        PlayRoute(base + "/focus", {"GET": (focus, None)}, "tavern.v2.playthrough_focus"),
        PlayRoute(base + "/availability", {"GET": (availability, None)}, "tavern.v2.availability"),
        PlayRoute(
            base + "/relink-character",
            {
                "POST": (
                    mutation("playthrough.relink-character", playthroughs.relink_character),
                    SMALL_BODY_LIMIT,
                )
            },
            "tavern.v2.relink_character",
        ),
        PlayRoute(
            base + "/detach-session",
            {
                "POST": (
                    mutation("playthrough.detach-session", playthroughs.detach),
                    SMALL_BODY_LIMIT,
                )
            },
            "tavern.v2.detach_session",
        ),
        PlayRoute("/focus", {"GET": (focus_by_path, None)}, "tavern.v2.focus"),
    ]
