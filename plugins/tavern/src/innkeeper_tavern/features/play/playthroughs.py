"""Playthroughs: focus, availability, character relink and session detach
(`docs/contract/play.md#v2-surface`, `docs/contract/play.md#availability`,
`docs/contract/play.md#lifecycle` and `docs/contract/resources.md#missing-cards`).

A playthrough is a row of the root ``catalog.json`` whose ``path`` names its ``timeline.json``.
Every write here is a managed-document CAS update that replays its intent on a conflict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from innkeeper_hostapi.sessions import SessionController, SessionError, SessionNotFound
from innkeeper_tavern.state.resources.errors import ResourceError

from .errors import (
    PLAY_CATALOG_INVALID,
    PLAY_CATALOG_UNAVAILABLE,
    PLAY_CHARACTER_NOT_FOUND,
    PLAY_DETACH_NOT_FOUND,
    PLAY_FOCUS_PATH_REQUIRED,
    PLAY_FOCUS_UNAVAILABLE,
    PLAY_PLAYTHROUGH_INVALID,
    PLAY_PLAYTHROUGH_NOT_FOUND,
    PLAY_RELINK_CONFLICT,
    PlayError,
    bad_body,
)
from .oplog import Operation
from .schema import TAVERN_EXT, safe_segment, tavern_ext, text_field
from .session_index import TimelineSessionIndex
from .sessions import PlaySessions, check_session_id
from .tree import clear_import_context, derive_focus, detach_session, session_ids

#: The catalog of playthroughs, at the workspace root.
CATALOG_PATH: Final = "catalog.json"
#: Raised by the v1 relinker when no workspace is bound: the tombstone stays.
CHARACTER_RELINK_DEFERRED: Final = "CHARACTER_RELINK_DEFERRED"
CHARACTER_PLAYTHROUGH_DETACH_REQUIRED: Final = "CHARACTER_PLAYTHROUGH_DETACH_REQUIRED"


@dataclass(frozen=True, slots=True)
class Playthrough:
    """A catalog row with its timeline (``None`` when missing or unreadable)."""

    row: dict[str, Any]
    timeline: dict[str, Any] | None

    @property
    def id(self) -> str:
        value: str = self.row["id"]
        return value

    @property
    def root_session_id(self) -> str | None:
        root = tavern_ext(self.row).get("rootSessionId")
        return root if isinstance(root, str) else None

    def sessions(self) -> list[str]:
        """Root first, then every session the timeline references."""
        found: dict[str, None] = {}
        if self.root_session_id:
            found[self.root_session_id] = None
        if self.timeline is not None:
            for sid in session_ids(self.timeline):
                found.setdefault(sid, None)
        return list(found)


def check_playthrough_id(value: object) -> str:
    if not safe_segment(value):
        raise PlayError(400, PLAY_PLAYTHROUGH_INVALID, "not a valid playthrough id")
    assert isinstance(value, str)
    return value


class Playthroughs:
    """Catalog-level operations."""

    def __init__(self, play_sessions: PlaySessions, *, logger: logging.Logger) -> None:
        """Share the play sessions' workspace, selection store, resources and host access."""
        self.workspace = play_sessions.workspace
        self.selections = play_sessions.selections
        self.resources = play_sessions.resources
        self._sessions: Callable[[], SessionController | None] = play_sessions.host_sessions
        self._log = logger
        self._index = TimelineSessionIndex(self.workspace.leases)

    # -- reads -------------------------------------------------------------------------------
    async def catalog(self) -> tuple[str, dict[str, Any]]:
        """The catalog (revision, document); missing is 409 ``PLAY_CATALOG_UNAVAILABLE``."""
        try:
            found = await self.workspace.read_optional(CATALOG_PATH)
        except PlayError as exc:
            if exc.code == PLAY_CATALOG_INVALID:
                raise
            raise PlayError(409, PLAY_CATALOG_UNAVAILABLE, "the catalog cannot be read") from None
        if found is None or found.document is None or found.revision is None:
            raise PlayError(409, PLAY_CATALOG_UNAVAILABLE, "the workspace has no catalog.json")
        return found.revision, found.document

    async def timeline(self, row: dict[str, Any]) -> dict[str, Any] | None:
        try:
            found = await self.workspace.read_optional(row["path"])
        except PlayError:
            return None
        return None if found is None else found.document

    async def find(self, playthrough_id: object) -> Playthrough:
        pid = check_playthrough_id(playthrough_id)
        _, doc = await self.catalog()
        row = next((r for r in doc["playthroughs"] if r["id"] == pid), None)
        if row is None:
            raise PlayError(404, PLAY_PLAYTHROUGH_NOT_FOUND, "no playthrough has this id")
        return Playthrough(row, await self.timeline(row))

    async def all(self) -> list[Playthrough]:
        """Every playthrough of the catalog (none when there is no catalog)."""
        try:
            _, doc = await self.catalog()
        except PlayError as exc:
            if exc.code == PLAY_CATALOG_UNAVAILABLE:
                return []
            raise
        return [Playthrough(row, await self.timeline(row)) for row in doc["playthroughs"]]

    async def focus(self, playthrough_id: object) -> dict[str, Any]:
        """``GET /playthroughs/:id/focus``."""
        pid = check_playthrough_id(playthrough_id)
        _, doc = await self.catalog()
        row = next((r for r in doc["playthroughs"] if r["id"] == pid), None)
        if row is None:
            raise PlayError(404, PLAY_PLAYTHROUGH_NOT_FOUND, "no playthrough has this id")
        try:
            found = await self.workspace.read_optional(row["path"])
        except PlayError:
            found = None
        if found is None or found.document is None:
            raise PlayError(
                409, PLAY_FOCUS_UNAVAILABLE, "the playthrough's timeline is missing or invalid"
            )
        focus = derive_focus(found.document)
        session_id = focus.session_id
        if session_id is None:
            session_id = Playthrough(row, None).root_session_id
        return {
            "ok": True,
            "playthroughId": pid,
            "sessionId": session_id,
            "nodeId": focus.node_id,
            "variantId": focus.variant_id,
        }

    async def focus_by_path(self, path: str | None) -> dict[str, Any]:
        """``GET /focus?path=`` (compatibility): the focus session of an explicit timeline."""
        if path is None or not path.strip():
            raise PlayError(400, PLAY_FOCUS_PATH_REQUIRED, "pass ?path= of a timeline.json")
        found = await self.workspace.read(path)
        if found.document is None or not found.path.endswith("timeline.json"):
            raise PlayError(400, PLAY_FOCUS_PATH_REQUIRED, "path must name a timeline.json")
        focus = derive_focus(found.document)
        return {
            "ok": True,
            "sessionId": focus.session_id,
            "nodeId": focus.node_id,
            "variantId": focus.variant_id,
        }

    # -- availability --------------------------------------------------------------------------
    async def availability(self, playthrough_id: object) -> dict[str, Any]:
        """``GET /playthroughs/:id/availability``: strict absence check, no writes."""
        item = await self.find(playthrough_id)
        status, reason, ids = await self.classify(item)
        out: dict[str, Any] = {
            "ok": True,
            "id": item.id,
            "status": status,
            "sessionIds": ids,
            "workspaceScope": self.workspace.scope(),
        }
        if reason is not None:
            out["reason"] = reason
        return out

    async def classify(
        self, item: Playthrough, *, ignore_archive: bool = False
    ) -> tuple[str, str | None, list[str]]:
        """``(status, reason, sessionIds)``: invalid only when every reference is confirmed
        missing through ``inspect``; anything uncertain is unavailable. Archived runs are
        ``protected`` unless ``ignore_archive`` (cleanup inspects them too)."""
        ids = item.sessions()
        if not ignore_archive and "archivedAt" in tavern_ext(item.row):
            return "protected", "archived", ids
        if item.timeline is None:
            found = None
            try:
                found = await self.workspace.read_optional(item.row["path"])
            except PlayError:
                return "unavailable", "timeline-invalid", ids
            if found is None:
                return "unavailable", "timeline-missing", ids
        if not ids:
            return "empty", None, ids
        controller = self._sessions()
        if controller is None:
            return "unavailable", "sessions-unavailable", ids
        workspace_id = self.workspace.require().workspace_id
        missing = 0
        foreign = 0
        for sid in ids:
            try:
                inspection = await controller.inspect(sid)
            except SessionNotFound:
                missing += 1
                continue
            except SessionError:
                return "unavailable", "session-read-failed", ids
            if inspection.header.workspace_id not in (None, workspace_id):
                foreign += 1
        if missing == len(ids):
            return "invalid", "sessions-missing", ids
        if missing + foreign == len(ids):
            return "unavailable", "other-workspace", ids
        return "available", None, ids

    # -- detach ----------------------------------------------------------------------------------
    async def detach(self, playthrough_id: object, body: object, op: Operation) -> dict[str, Any]:
        """``POST /playthroughs/:id/detach-session``: computed from the tree, CAS-committed."""
        if not isinstance(body, dict) or set(body) - {"sessionId"}:
            raise bad_body("the body is {sessionId}")
        sid = check_session_id(body.get("sessionId"))
        item = await self.find(playthrough_id)
        op.stage("request.validated")
        if item.timeline is None:
            raise PlayError(
                409, PLAY_FOCUS_UNAVAILABLE, "the playthrough's timeline is missing or invalid"
            )
        if sid not in item.sessions():
            raise PlayError(
                404, PLAY_DETACH_NOT_FOUND, "the session is not part of this playthrough"
            )
        result: dict[str, Any] = {}

        def cut(doc: dict[str, Any] | None) -> dict[str, Any] | None:
            if doc is None:
                raise PlayError(409, PLAY_FOCUS_UNAVAILABLE, "the timeline disappeared")
            detached = detach_session(doc, sid)
            result["removed"] = detached.removed_variant_ids
            result["descendants"] = detached.descendant_session_ids
            if item.root_session_id == sid:
                clear_import_context(detached.document)
            return detached.document if detached.document != doc else None

        op.stage("mutation.begin")
        timeline_revision, _ = await self.workspace.update(item.row["path"], cut)
        op.stage("timeline.committed")
        catalog_revision = None
        if item.root_session_id == sid:

            def unroot(doc: dict[str, Any] | None) -> dict[str, Any] | None:
                if doc is None:
                    raise PlayError(409, PLAY_CATALOG_UNAVAILABLE, "the catalog disappeared")
                for row in doc["playthroughs"]:
                    if row["id"] == item.id:
                        tavern = tavern_ext(row)
                        tavern.pop("rootSessionId", None)
                        tavern.pop("importContextPath", None)
                return doc

            catalog_revision, _ = await self.workspace.update(CATALOG_PATH, unroot)
            op.stage("catalog.committed")
        return {
            "ok": True,
            "playthroughId": item.id,
            "sessionId": sid,
            "removedVariantIds": list(result.get("removed", ())),
            "descendantSessionIds": list(result.get("descendants", ())),
            "timelineRevision": timeline_revision,
            "catalogRevision": catalog_revision,
        }

    # -- relink ----------------------------------------------------------------------------------
    def _card(self, character_id: object) -> tuple[str, dict[str, Any]]:
        if (
            not isinstance(character_id, str)
            or self.resources.characters.entry(character_id) is None
        ):
            raise PlayError(404, PLAY_CHARACTER_NOT_FOUND, "the character card does not exist")
        entry = self.resources.characters.entry(character_id)
        assert entry is not None
        snapshot: dict[str, Any] = {"characterId": character_id, "characterName": entry.name[:200]}
        sha = entry.summary.get("sha256")
        if isinstance(sha, str) and len(sha) == 64:
            snapshot["characterSha256"] = sha
        return character_id, snapshot

    async def _move(
        self,
        items: list[Playthrough],
        previous: set[str | None],
        target: str,
        snapshot: dict[str, Any],
    ) -> int:
        """Move ``items`` and their sessions to ``target`` in one catalog CAS write and one
        batch of selection writes; roll the catalog back if the batch fails."""
        sessions: dict[str, None] = {}
        for item in items:
            for sid in item.sessions():
                sessions.setdefault(sid, None)
        updates = {}
        for sid in sessions:
            current = self.selections.stored(sid)
            bound = current.character_card_id if current is not None else None
            if bound not in previous and bound != target:
                raise PlayError(
                    409,
                    PLAY_RELINK_CONFLICT,
                    f"session {sid} is bound to another card; detach it first",
                )
            base = current if current is not None else self.selections.defaults()
            updates[sid] = msgspec.structs.replace(base, character_card_id=target)
        ids = {item.id for item in items}
        before: dict[str, Any] = {}

        def relink(doc: dict[str, Any] | None) -> dict[str, Any] | None:
            if doc is None:
                raise PlayError(409, PLAY_CATALOG_UNAVAILABLE, "the catalog disappeared")
            before["doc"] = {"playthroughs": [dict(r) for r in doc["playthroughs"]]}
            for row in doc["playthroughs"]:
                if row["id"] in ids:
                    ext = row.setdefault("ext", {})
                    ext.setdefault(TAVERN_EXT, {}).update(snapshot)
            return doc

        catalog_before = await self.workspace.read_optional(CATALOG_PATH)
        revision, _ = await self.workspace.update(CATALOG_PATH, relink)
        try:
            await self.selections.set_many(updates)
        except Exception:
            if catalog_before is not None and revision is not None:
                self._log.warning("relink: session batch failed; rolling the catalog back")
                await self.workspace.write(CATALOG_PATH, catalog_before.content, expected=revision)
            raise
        return len(updates)

    async def relink_character(
        self, playthrough_id: object, body: object, op: Operation
    ) -> dict[str, Any]:
        """``POST /playthroughs/:id/relink-character``: this playthrough and its sessions only."""
        if not isinstance(body, dict) or set(body) - {"characterId"}:
            raise bad_body("the body is {characterId}")
        target, snapshot = self._card(body.get("characterId"))
        item = await self.find(playthrough_id)
        op.stage("request.validated")
        old = tavern_ext(item.row).get("characterId")
        moved = await self._move(
            [item], {None, old if isinstance(old, str) else None}, target, snapshot
        )
        op.stage("mutation.committed")
        return {
            "ok": True,
            "playthroughId": item.id,
            "characterId": target,
            "relinkedSessionCount": moved,
        }

    async def relink_missing(self, previous_id: str, target_id: str) -> tuple[int, int]:
        """The v1 ``POST /characters/relink`` relinker: every playthrough of the missing card."""
        if self.workspace.binding is None:
            self._log.info(
                "relink of missing card %s deferred: no play workspace bound", previous_id
            )
            raise ResourceError(
                409,
                CHARACTER_RELINK_DEFERRED,
                "no play workspace is bound; bind one and relink again (the missing card is kept)",
            )
        target, snapshot = self._card(target_id)
        items = [p for p in await self.all() if tavern_ext(p.row).get("characterId") == previous_id]
        if not items:
            return 0, 0
        moved = await self._move(items, {None, previous_id}, target, snapshot)
        return len(items), moved

    # -- v1 character-selection guard ---------------------------------------------------------
    @staticmethod
    def _claims(row: dict[str, Any], requested: str | None) -> bool:
        """Whether the row's playthrough belongs to a card other than ``requested``."""
        expected = tavern_ext(row).get("characterId")
        return isinstance(expected, str) and expected != requested

    async def _read_timeline(self, path: str) -> dict[str, Any] | None:
        return await self.timeline({"path": path})

    async def selection_conflicts(self, session_id: str, requested: str | None) -> None:
        """409 ``CHARACTER_PLAYTHROUGH_DETACH_REQUIRED`` when ``session_id`` belongs to a
        playthrough of another card (nothing is written)."""
        if self.workspace.binding is None:
            return
        try:
            _, doc = await self.catalog()
        except PlayError:
            return  # a missing or corrupt catalog claims no session
        rows = [r for r in doc["playthroughs"] if self._claims(r, requested)]
        if not rows:
            return
        # Only the timelines written since the last check are read (the index covers all rows).
        named = await self._index.sessions(
            self.workspace.require().root_path,
            [r["path"] for r in doc["playthroughs"]],
            self._read_timeline,
        )
        conflicts = []
        for row in rows:
            item = Playthrough(row, None)
            if session_id != item.root_session_id and session_id not in named[row["path"]]:
                continue
            item = Playthrough(row, await self.timeline(row))
            expected = tavern_ext(row).get("characterId")
            descendants = 0
            if item.timeline is not None:
                descendants = len(detach_session(item.timeline, session_id).descendant_session_ids)
            conflicts.append(
                {
                    "playthroughId": item.id,
                    "playthroughTitle": text_field(item.row, "title"),
                    "sessionId": session_id,
                    "expectedCharacterId": expected,
                    "requestedCharacterId": requested,
                    "descendantSessionCount": descendants,
                }
            )
        if conflicts:
            raise PlayError(
                409,
                CHARACTER_PLAYTHROUGH_DETACH_REQUIRED,
                "the session belongs to a playthrough of another character; detach it first",
                details={"conflicts": conflicts},
            )
