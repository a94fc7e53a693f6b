"""Views: ``list``, ``read``, ``history``, ``facts`` and the ``/mvu/snapshot`` read, with the
record shapes of broken and legacy resources (docs/contract/mvu.md#host-service).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from innkeeper_hostapi.catalogs import frozen_json
from innkeeper_hostapi.sessions import AssistantMessage, TurnEnd, UserMessage
from innkeeper_tavern.pure.mvu import ledger as mvu_ledger
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection

from .common import (
    LOCAL_AUTHORITY,
    RESOURCE_TYPE,
    SESSION_FORMAT_VERSION,
    JsonList,
    Scope,
    detached,
    parse_scope,
    service_error,
)
from .core import ServiceCore
from .store import LegacyResource
from .templates import Template


class MvuViews(ServiceCore):
    """Views of :class:`~.service.MvuService`."""

    def _source_error_json(self, template: Template, scope: Scope) -> dict[str, Any]:
        cid = template.character_id
        entry = self._resources.characters.entry(cid) if cid is not None else None
        return {
            "id": template.id,
            "name": entry.name if entry is not None else template.id,
            "type": RESOURCE_TYPE,
            "authority": LOCAL_AUTHORITY,
            "scope": {"authority": LOCAL_AUTHORITY, "sessionId": scope.session_id},
            "revision": None,
            "currentRevision": None,
            "historical": False,
            "versionKey": template.version_key,
            "managementMode": self._actual_mode(),
            "templateId": template.id,
            "instance": None,
            "sourceError": template.source_error,
            "code": "MVU_SOURCE_ERROR",
            "capabilities": {
                "read": False,
                "update": False,
                "copy": False,
                "provideToModel": False,
                "inherit": False,
            },
        }

    def _legacy_json(
        self, item: LegacyResource, scope: Scope, with_content: bool
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": item.id,
            "name": item.id,
            "type": RESOURCE_TYPE,
            "authority": LOCAL_AUTHORITY,
            "scope": {"authority": LOCAL_AUTHORITY},
            "revision": item.revision,
            "currentRevision": item.revision,
            "historical": False,
            "versionKey": None,
            "managementMode": "native",
            "legacy": True,
            "sourceError": item.source_error or "MVU_MIGRATION_REQUIRED",
            "code": "MVU_MIGRATION_REQUIRED",
            "capabilities": {
                "read": True,
                "update": False,
                "copy": False,
                "provideToModel": False,
                "inherit": False,
            },
        }
        if with_content and item.content is not None:
            out["content"] = detached(item.content)
        return out

    async def _historical_revision(self, state_id: str, scope: Scope) -> int:
        assert scope.session_id is not None
        seq = scope.end_event_id
        if scope.message_id is not None:
            found = None
            for event in await self._events_after(scope.session_id, 0):
                data = event.data
                if isinstance(data, (AssistantMessage, UserMessage)) and (
                    data.message_id == scope.message_id
                ):
                    found = event.seq
                    break
            if found is None:
                raise service_error(
                    "MVU_COORDINATE_NOT_FOUND", "no such message in this session", 404
                )
            if seq is not None and seq != found:
                raise service_error("MVU_SCOPE_INVALID", "messageId and endEventId disagree")
            seq = found
        assert seq is not None
        revision = self._revision_at(self._doc, state_id, seq)
        if revision is None:
            raise service_error(
                "MVU_HISTORY_UNAVAILABLE", "no recorded version at this coordinate", 404
            )
        return revision

    async def list(self, *, scope: Mapping[str, Any] | None = None) -> JsonList:
        """Authorized resources without content (``list``, docs/contract/mvu.md#host-service)."""
        parsed = parse_scope(scope)
        if parsed.historical:
            raise service_error("MVU_SCOPE_INVALID", "list takes a current scope")
        out: list[dict[str, Any]] = []
        view_session: str | None = None
        if parsed.session_id is not None:
            template, _ = await self._session_template(parsed.session_id)
            if template is not None and template.source_error is not None:
                # A broken source stays visible as sourceError and runs nothing
                # (docs/contract/mvu.md#identity): the session's template is listed, nothing is
                # allocated.
                out.append(self._source_error_json(template, parsed))
            else:
                view_session = parsed.session_id
        async with self._read_view(view_session):
            doc = self._doc
            for state_id, record in doc.ledger.states.items():
                if parsed.session_id is not None and not self._may_access(
                    doc, state_id, parsed.session_id
                ):
                    continue
                out.append(self._record_json(record, parsed))
        if parsed.session_id is None:
            out.extend(self._legacy_json(item, parsed, False) for item in self._legacy.values())
        return out

    async def read(self, *, id: str, scope: Mapping[str, Any]) -> dict[str, Any] | None:
        """One record with content, or ``None`` (``read``, docs/contract/mvu.md#host-service)."""
        parsed = parse_scope(scope)
        if id in self._legacy and id not in self._doc.ledger.states:
            return self._legacy_json(self._legacy[id], parsed, True)
        async with self._read_view(parsed.session_id):
            if id not in self._doc.ledger.states:
                return None
            record = await self._authorize(id, parsed)
            if not parsed.historical:
                return self._record_json(record, parsed, content=record.content)
            revision = await self._historical_revision(id, parsed)
            entry = self._content_at(self._doc.ledger, id, revision)
            if entry is None:
                raise service_error("MVU_HISTORY_UNAVAILABLE", "that version is not recorded", 404)
            return self._record_json(record, parsed, content=entry.content, revision=revision)

    def bound_items(self, session_id: str, card_id: str | None) -> JsonList:
        """The existing state instances of ``session_id`` whose template is the card
        ``card_id``'s, as ``listBound`` items (no content, no variables, nothing allocated)."""
        if card_id is None:
            return []
        doc = self._doc
        card = self._resources.characters.entry(card_id)
        out: JsonList = []
        for state_id, record in sorted(doc.ledger.states.items()):
            template = doc.templates.get(record.template_id)
            instance = record.instance
            if instance is None or instance.session_id != session_id:
                continue
            if template is None or template.character_id != card_id:
                continue
            identity = {
                "sessionId": instance.session_id,
                "sessionCreatedAt": instance.session_created_at,
                "templateId": instance.template_id,
            }
            out.append(
                {
                    "id": state_id,
                    "adapterId": "mvu",
                    "name": card.name if card is not None else record.template_id,
                    "type": RESOURCE_TYPE,
                    "revision": str(record.revision),
                    "managementMode": doc.stored_modes.get(state_id, template.management_mode),
                    "binding": {
                        "sessionId": session_id,
                        "characterId": card_id,
                        "instance": identity,
                    },
                }
            )
        return out

    async def list_bound(self, *, scope: Mapping[str, Any]) -> dict[str, Any]:
        """``listBound`` (`docs/contract/catalogs.md#bound-resources`): the current
        character's existing instances of the session as ``{items, revision, checkCurrent}``;
        the lease is revoked by any commit, the session's selection and unload."""
        parsed = parse_scope(scope)
        if parsed.session_id is None or parsed.historical:
            raise service_error("MVU_SCOPE_INVALID", "listBound takes a current session scope")
        session_id = parsed.session_id
        await self._header(session_id)  # the session must exist
        selection = await pending_selection(self._selections, session_id, self._sessions())
        doc = self._doc
        generation = self._selections.generation(session_id)
        items = self.bound_items(session_id, selection.character_card_id)

        def check_current() -> bool:
            return (
                not self._closed
                and self._doc is doc
                and self._selections.generation(session_id) == generation
            )

        revision = f"{generation}:{sum(int(i['revision']) for i in items)}:{len(items)}"
        return {"items": frozen_json(items), "revision": revision, "checkCurrent": check_current}

    async def history(
        self, *, id: str, scope: Mapping[str, Any], include_before: bool = False
    ) -> JsonList:
        """Versions oldest first, with the evidence of successes and failures (``history``,
        docs/contract/mvu.md#host-service). Committed versions carry ``committed: true`` and their
        session coordinate ``atEventId``; replies that committed nothing (failed, unchanged,
        skipped) appear as ``committed: false`` rows with the unchanged ``revision``, ``outcome``
        and ``code``."""
        parsed = parse_scope(scope)
        self._legacy_refusal(id)
        await self._authorize(id, parsed)
        doc = self._doc
        coords = dict(doc.coordinates.get(id, []))
        entries = {e.revision: e for e in doc.ledger.history.get(id, [])}
        rows: list[dict[str, Any]] = []
        for item in mvu_ledger.history(doc.ledger, id, include_before=include_before):
            row = dict(item)
            revision = row["revision"]
            assert isinstance(revision, int)
            entry = entries.get(revision)
            row["committed"] = True
            row["atEventId"] = coords.get(revision)
            row["source"] = detached(entry.source) if entry and entry.source else None
            rows.append(row)
        owner = self._session_of(doc, id)
        evidence = doc.applied.get(owner, {}) if owner is not None else {}
        for seq, receipt in evidence.items():
            if receipt.state_id != id or receipt.outcome == "applied":
                continue
            row = {
                "revision": receipt.revision,
                "at": receipt.at,
                "kind": "reply",
                "operationId": None,
                "inherited": False,
                "stat_data": None,
                "committed": False,
                "outcome": receipt.outcome,
                "code": receipt.code,
                "turn": receipt.turn,
                "atEventId": int(seq),
                "source": None,
            }
            if include_before:
                row["beforeAvailable"] = False
            rows.append(row)
        rows.sort(key=lambda r: (str(r["at"]), not r["committed"]))
        return rows

    async def opening_view(self, session_id: str, *, first_checkpoint: bool) -> dict[str, Any]:
        """The opening variables of a session, allocating nothing: its current content before
        the first turn, or the first pre-turn checkpoint's version (``first_checkpoint``; a
        missing checkpoint is ``MVU_HISTORY_UNAVAILABLE``, never the latest variables).
        Answers ``{resourceId, revision, currentRevision, variables}``."""
        async with self._read_view(session_id) as state_id:
            if state_id is None:
                raise service_error("MVU_NOT_FOUND", "the session has no MVU state", 404)
            doc = self._doc
            record = doc.ledger.states[state_id]
            content: Any = record.content
            revision = record.revision
            if first_checkpoint:
                marks = [
                    (int(turn), mark)
                    for turn, mark in doc.checkpoints.get(session_id, {}).items()
                    if mark.state_id == state_id
                ]
                entry = (
                    self._content_at(
                        doc.ledger, state_id, min(marks, key=lambda m: m[0])[1].revision
                    )
                    if marks
                    else None
                )
                if entry is None:
                    raise service_error(
                        "MVU_HISTORY_UNAVAILABLE", "the first pre-turn checkpoint is missing", 404
                    )
                content, revision = entry.content, entry.revision
            return {
                "resourceId": state_id,
                "revision": revision,
                "currentRevision": record.revision,
                "variables": detached(content),
            }

    async def facts(self, *, id: str, scope: Mapping[str, Any]) -> JsonList:
        """Body-free observations of ``id`` (docs/contract/mvu.md#facts), oldest first."""
        parsed = parse_scope(scope)
        if id not in self._legacy:
            await self._authorize(id, parsed)
        return [dict(row) for row in self._facts if row.get("id") == id]

    async def snapshot(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        """``GET /mvu/snapshot``: the version recorded at a durable assistant message (or turn
        end) of a session — ``{version:1, status, scope, revision, currentRevision, variables,
        resourceId}``."""
        if not isinstance(scope, Mapping):
            raise service_error("MVU_SCOPE_INVALID", "scope must be an object")
        mode = scope.get("mode")
        if mode is not None:
            provider = self.opening_snapshots
            if mode not in ("greeting", "initial", "draft") or provider is None:
                raise service_error(
                    "MVU_SCOPE_UNSUPPORTED", f"snapshot mode {str(mode)[:40]!r} is not available"
                )
            return await provider(scope)
        session_id = scope.get("sessionId")
        end = scope.get("endEventId")
        if not isinstance(session_id, str) or not session_id:
            raise service_error("MVU_SCOPE_INVALID", "scope needs sessionId")
        if isinstance(end, bool) or not isinstance(end, int) or end < 1:
            raise service_error("MVU_SCOPE_INVALID", "scope needs a positive endEventId")
        version = scope.get("sessionFormatVersion")
        if version is not None and version != SESSION_FORMAT_VERSION:
            raise service_error(
                "MVU_COORDINATES_MIGRATION_REQUIRED", "coordinates of another log format", 409
            )
        unknown = set(scope) - {
            "sessionId",
            "endEventId",
            "sessionFormatVersion",
            "playthroughId",
            "nodeId",
            "variantId",
        }
        if unknown:
            raise service_error("MVU_SCOPE_INVALID", f"unknown scope field {sorted(unknown)[0]!r}")
        if {"playthroughId", "nodeId", "variantId"} & set(scope):
            # Timeline coordinates are bound to the durable timeline, never taken on trust.
            if self.message_membership is None:
                raise service_error(
                    "MVU_SCOPE_UNSUPPORTED", "timeline message scopes are not available"
                )
            await self.message_membership(scope)
        await self._header(session_id)
        event = await self._event_at(session_id, end)
        if event is None or not isinstance(event.data, (AssistantMessage, TurnEnd)):
            raise service_error("MVU_SCOPE_INVALID", "endEventId is not a durable reply coordinate")
        async with self._read_view(session_id) as state_id:
            if state_id is None:
                raise service_error("MVU_NOT_FOUND", "the session has no MVU state", 404)
            record = self._doc.ledger.states[state_id]
            revision = self._revision_at(self._doc, state_id, end)
            entry = self._content_at(self._doc.ledger, state_id, revision) if revision else None
        if entry is None:
            raise service_error(
                "MVU_HISTORY_UNAVAILABLE", "no recorded version at this coordinate", 404
            )
        return {
            "version": 1,
            "status": "ready",
            "scope": dict(scope),
            "revision": entry.revision,
            "currentRevision": record.revision,
            "variables": detached(entry.content),
            "resourceId": state_id,
        }
