"""The playthroughs of folders bound before the current one (docs/play.md "Moving the play
folder").

Binding another folder never moves or deletes anything: the earlier folder keeps its
``catalog.json``, its timelines and (in the host's store) its sessions. The binding remembers the
earlier folders (:class:`~innkeeper_tavern.features.play.workspace.PreviousRoot`), and
``GET /workspace/previous`` reads each one's catalog, read-only, through the same path jail as
the bound root, so a player can see what is kept where and bind that folder again to open it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import json_response
from innkeeper_tavern.face.routes.play import PlayRoute
from innkeeper_tavern.features.play.errors import PLAY_CATALOG_UNAVAILABLE, PlayError
from innkeeper_tavern.features.play.paths import Jail
from innkeeper_tavern.features.play.schema import TAVERN_EXT, validate_managed
from innkeeper_tavern.features.play.workspace import PlayWorkspace, PreviousRoot

#: Most playthrough rows listed per earlier folder (the answer says when some were left off).
MAX_LISTED_ROWS: Final = 1000
CATALOG: Final = "catalog.json"


def _row(raw: dict[str, Any]) -> dict[str, Any]:
    ext = raw.get("ext")
    tavern = ext.get(TAVERN_EXT) if isinstance(ext, dict) else None
    tavern = tavern if isinstance(tavern, dict) else {}
    return {
        "id": raw.get("id"),
        "path": raw.get("path"),
        "title": raw.get("title"),
        "characterId": tavern.get("characterId"),
        "characterName": tavern.get("characterName"),
        "playthroughNumber": tavern.get("playthroughNumber"),
        "archived": bool(tavern.get("archivedAt")),
    }


def read_previous(root: PreviousRoot) -> dict[str, Any]:
    """One earlier folder: ``status`` ``ok`` (its catalog's rows), ``empty`` (no catalog) or
    ``unavailable`` (missing, a link, unreadable or invalid, with the error ``code``)."""
    out: dict[str, Any] = {
        "rootPath": root.root_path,
        "workspaceId": root.workspace_id,
        "boundAt": root.bound_at,
        "leftAt": root.left_at,
        "status": "ok",
        "playthroughs": [],
        "truncated": False,
    }
    jail = Jail(root.root_path)
    try:
        opened = jail.open_parent((CATALOG,), create=False)
        try:
            data = jail.read_at(opened)
        finally:
            opened.close()
        if data is None:
            out["status"] = "empty"
            return out
        rows = validate_managed(CATALOG, data)["playthroughs"]
    except PlayError as exc:
        out.update(status="unavailable", code=exc.code, reason=exc.message)
        return out
    except OSError as exc:
        out.update(status="unavailable", code=PLAY_CATALOG_UNAVAILABLE, reason=str(exc.strerror))
        return out
    out["playthroughs"] = [_row(r) for r in rows[:MAX_LISTED_ROWS]]
    out["truncated"] = len(rows) > MAX_LISTED_ROWS
    return out


def previous_routes(workspace: PlayWorkspace) -> list[PlayRoute]:
    """``GET /workspace/previous``: the earlier folders, newest first, with their rows."""

    async def get_previous(request: web.Request) -> web.StreamResponse:
        binding = workspace.binding
        roots = list(binding.previous_roots) if binding is not None else []
        found = [await asyncio.to_thread(read_previous, root) for root in roots]
        return json_response({"ok": True, "roots": found})

    return [
        PlayRoute(
            "/workspace/previous", {"GET": (get_previous, None)}, "tavern.v2.workspace_previous"
        )
    ]
