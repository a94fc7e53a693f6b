"""Cleanup over HTTP (for ``innkeeper playthroughs cleanup``, which talks to the running server
where the per-path guard and leases live) and as the optional agent tool
``tavern_cleanup_invalid_playthroughs`` (`docs/contract/play.md#cleanup`)."""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import PluginContext, json_response
from innkeeper_hostapi.tools import ToolError, ToolInvocation
from innkeeper_tavern.face.routes.play import SMALL_BODY_LIMIT, PlayRoute, json_body
from innkeeper_tavern.features.play.cleanup import Cleanup
from innkeeper_tavern.features.play.errors import PLAY_CLEANUP_INVALID, PlayError
from innkeeper_tavern.features.play.oplog import OperationLog

TOOL_NAME: Final = "tavern_cleanup_invalid_playthroughs"
TOOL_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["preview", "clean", "restore"]},
        "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 100},
        "workspaceScope": {"type": "string"},
    },
    "additionalProperties": False,
}


async def run_cleanup(
    cleanup: Cleanup, oplog: OperationLog, body: dict[str, Any]
) -> dict[str, Any]:
    """One cleanup request: ``{}``/``preview`` reads; ``clean``/``restore`` are operations."""
    extra = sorted(set(body) - {"action", "ids", "workspaceScope"})
    if extra:
        raise PlayError(400, PLAY_CLEANUP_INVALID, f"unknown field {extra[0]!r}")
    action = body.get("action", "preview")
    if action == "preview":
        if "ids" in body:
            raise PlayError(400, PLAY_CLEANUP_INVALID, "preview takes no ids")
        return await cleanup.preview()
    if action not in ("clean", "restore"):
        raise PlayError(400, PLAY_CLEANUP_INVALID, "action is preview, clean or restore")
    async with oplog.operation(f"playthrough.cleanup.{action}", "POST") as op:
        if action == "clean":
            return await cleanup.clean(body, op)
        return await cleanup.restore(body, op)


def cleanup_routes(cleanup: Cleanup, oplog: OperationLog) -> list[PlayRoute]:
    async def get_preview(request: web.Request) -> web.StreamResponse:
        return json_response(await cleanup.preview())

    async def post(request: web.Request) -> web.StreamResponse:
        return json_response(await run_cleanup(cleanup, oplog, await json_body(request)))

    return [
        PlayRoute(
            "/playthrough-cleanup",
            {"GET": (get_preview, None), "POST": (post, SMALL_BODY_LIMIT)},
            "tavern.v2.playthrough_cleanup",
        )
    ]


def register_cleanup_tool(ctx: PluginContext, cleanup: Cleanup, oplog: OperationLog) -> None:
    """Offer the maintenance tool (only with ``maintenanceTools: true``; disposed on unload)."""

    async def handler(call: ToolInvocation) -> Any:
        try:
            return await run_cleanup(cleanup, oplog, dict(call.arguments))
        except PlayError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from None

    ctx.add_tool(
        TOOL_NAME,
        "Preview, clean or restore play-workspace playthroughs whose sessions are all missing. "
        "Mutations need 1-100 explicit ids and the preview's workspaceScope.",
        TOOL_SCHEMA,
        handler,
        risk="workspace-write",
    )
