"""Starting a group playthrough (docs/groups.md "Group playthroughs").

``POST /groups/{id}/playthroughs`` does on the server what a client composes for one character
(docs/play.md "Composing a playthrough"): a host session in the bound play workspace (the
default one bound first when none is), its selection (the first member's card as the session's
card — its ``[initvar]`` book seeds the playthrough's MVU state — the given or default preset
and persona), the group binding, an empty ``timeline.json`` and the catalog row, in that order.
The row's ``ext.pmpDshTavern`` names the group (``groupId``, ``groupName``) beside the usual
character fields, so a client lists it as a group playthrough.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from innkeeper_hostapi.sessions import SessionError
from innkeeper_tavern.features.play import Play
from innkeeper_tavern.features.play.errors import PlayError, bad_body
from innkeeper_tavern.features.play.oplog import Operation
from innkeeper_tavern.features.play.playthroughs import CATALOG_PATH
from innkeeper_tavern.features.play.schema import TAVERN_EXT, safe_segment
from innkeeper_tavern.features.play.sessions import host_problem
from innkeeper_tavern.features.play.workspace import encode_document
from innkeeper_tavern.pure.groups.model import Group
from innkeeper_tavern.state.session_bindings.model import valid_resource_id

from .turns import GroupPlay

START_KEYS: Final = frozenset({"presetId", "userId", "title"})
MAX_TITLE_CHARS: Final = 200
#: A group without a stored member's card cannot be played.
GROUP_NO_MEMBERS: Final = "GROUP_NO_MEMBERS"


def _optional_id(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not valid_resource_id(value):
        raise bad_body(f"{key} must be a resource id")
    assert isinstance(value, str)
    return value


async def start_playthrough(
    play: Play, groups: GroupPlay, group: Group, body: object, op: Operation
) -> dict[str, Any]:
    """Create the playthrough; answers ``{ok, sessionId, playthrough}`` (the catalog row)."""
    if not isinstance(body, dict):
        raise bad_body("the request body must be a JSON object")
    extra = sorted(set(body) - START_KEYS)
    if extra:
        raise bad_body(f"unknown field {extra[0]!r}")
    preset_id = _optional_id(body, "presetId")
    user_id = _optional_id(body, "userId")
    title = body.get("title")
    if title is not None and (
        not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE_CHARS
    ):
        raise bad_body(f"title must be 1-{MAX_TITLE_CHARS} characters")
    members = await groups.members(group)
    if not members:
        raise PlayError(409, GROUP_NO_MEMBERS, "none of the group's members has a stored card")
    sessions = play.sessions
    binding = await sessions.workspace.ensure()
    op.stage("request.validated")
    name = title.strip() if isinstance(title, str) else group.name[:MAX_TITLE_CHARS]
    try:
        header = await sessions.controller().create(title=name, workspace_id=binding.workspace_id)
    except SessionError as exc:
        raise host_problem(exc) from None
    sid = header.id
    op.session_id = sid
    op.stage("host.session.created")
    first = members[0]
    defaults = sessions.selections.defaults()
    selection = msgspec.structs.replace(
        defaults,
        character_card_id=first.character_id,
        preset_id=preset_id if preset_id is not None else defaults.preset_id,
        user_id=user_id if user_id is not None else defaults.user_id,
    )
    await sessions.selections.set(sid, selection)
    op.stage("selection.committed")
    await groups.bind(sid, group.id)
    op.stage("group.bound")
    token = secrets.token_hex(16)
    playthrough_id = f"group-{token}"
    ext: dict[str, Any] = {
        "characterName": first.name[:200],
        "rootSessionId": sid,
        "groupId": group.id,
        "groupName": group.name[:200],
    }
    if safe_segment(first.character_id):
        ext["characterId"] = first.character_id
    row = {
        "id": playthrough_id,
        "path": f"groups/{playthrough_id}/timeline.json",
        "title": name,
        "lastOpenedAt": _iso_now(),
        "ext": {TAVERN_EXT: ext},
    }
    await sessions.workspace.write(
        row["path"], encode_document({"nodes": [], "ext": {}}), expected=None
    )
    op.stage("timeline.created")

    def add(doc: dict[str, Any] | None) -> dict[str, Any]:
        doc = doc if doc is not None else {"playthroughs": [], "ext": {}}
        doc["playthroughs"].append(row)
        return doc

    await sessions.workspace.update(CATALOG_PATH, add)
    op.stage("catalog.committed")
    return {"ok": True, "sessionId": sid, "playthrough": row}


def _iso_now() -> str:
    moment = datetime.now(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["GROUP_NO_MEMBERS", "start_playthrough"]
