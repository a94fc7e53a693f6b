"""Opening drafts (`docs/contract/openings.md#opening-drafts`; `docs/contract/loader.md#templates`):
a new playthrough's opening, edited without any host session until its first accepted send.

A draft is a catalog row without ``rootSessionId`` (so availability and archive see it) plus a
:class:`~.records.DraftRecord`. Every change holds the draft's lock and checks
``expectedRevision``; the catalog is updated through the workspace's CAS-with-replay.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from innkeeper_hostapi.sessions import SessionError
from innkeeper_tavern.features.play.errors import PLAY_CHARACTER_NOT_FOUND, PlayError, bad_body
from innkeeper_tavern.features.play.oplog import Operation
from innkeeper_tavern.features.play.playthroughs import CATALOG_PATH, Playthroughs
from innkeeper_tavern.features.play.schema import TAVERN_EXT, safe_posix_path, safe_segment
from innkeeper_tavern.features.play.sessions import (
    MAX_REQUEST_ID_CHARS,
    MAX_USER_TEXT_CHARS,
    PlaySessions,
    host_problem,
)
from innkeeper_tavern.features.play.workspace import encode_document
from innkeeper_tavern.state.session_bindings.model import (
    CharacterOptions,
    Selection,
    SelectionInvalid,
    check_selection,
    valid_resource_id,
)

from .inputs import (
    CREATE_KEYS,
    DRAFT_CHARACTER_IMMUTABLE,
    DRAFT_GREETING_INVALID,
    DRAFT_INVALID,
    DRAFT_MATERIALIZED,
    DRAFT_NOT_FOUND,
    DRAFT_OPERATION_CONFLICT,
    DRAFT_PREPARING,
    DRAFT_READ_FAILED,
    DRAFT_REVISION_CONFLICT,
    DRAFT_TOO_LARGE,
    MAX_OPERATION_ID_CHARS,
    MAX_SOURCE_CHARS,
    PUT_KEYS,
    SELECTION_KEYS,
    check_draft_id,
    expected_revision,
    json_object,
    now,
    only_keys,
    optional_id,
    text_sha256,
)
from .records import (
    DraftRecord,
    DraftSelection,
    DraftStore,
    Materialization,
    OpeningValue,
)

#: ``(characterId, greetingIndex) -> (opening, templateVersion)`` of a generated opening, or
#: ``None`` when the card carries no MVU data (wired to the MVU service by the package).
OpeningSource = Callable[[str, int], Awaitable[tuple[OpeningValue, str] | None]]
#: ``(selection, variables) -> prompt``: the first request a session bound to the selection
#: would send, with those opening variables (:func:`.prompt.draft_prompt`).
DraftPrompt = Callable[[Selection, Any], Awaitable[dict[str, Any]]]
#: ``(characterId, greetingIndex, variables) -> variables`` as the card's schema accepts an
#: edit of that greeting's opening (raises a 4xx :class:`PlayError` otherwise).
OpeningCheck = Callable[[str, int, dict[str, Any]], Awaitable[dict[str, Any]]]


class Drafts:
    """The draft operations behind ``/v2/drafts``."""

    def __init__(
        self,
        store: DraftStore,
        playthroughs: Playthroughs,
        sessions: PlaySessions,
        *,
        openings: OpeningSource,
        check: OpeningCheck,
        logger: logging.Logger,
    ) -> None:
        self.store = store
        self.playthroughs = playthroughs
        self.sessions = sessions
        self.resources = sessions.resources
        self.selections = sessions.selections
        self._openings = openings
        self._check = check
        self._log = logger
        #: ``(record, sessionId)`` hooks run after the selection is bound (opening variables).
        self.prepare_hooks: list[Callable[[DraftRecord, str], Awaitable[None]]] = []
        #: Renders the preview's ``prompt`` (wired by the package; ``None``: no prompt).
        self.prompt: DraftPrompt | None = None

    # -- helpers -------------------------------------------------------------------------------
    async def get_record(self, draft_id: object) -> DraftRecord:
        did = check_draft_id(draft_id)
        record = await self.store.load(did)
        if record is None:
            raise PlayError(404, DRAFT_NOT_FOUND, "no opening draft has this id")
        return record

    async def _greeting_count(self, character_id: str) -> int:
        """``first_mes`` plus the alternate greetings, from the card's index entry."""
        entry = self.resources.characters.entry(character_id)
        if entry is None:
            raise PlayError(404, PLAY_CHARACTER_NOT_FOUND, "the character does not exist")
        count = entry.summary.get("greetingCount")
        if isinstance(count, int) and count >= 1:
            return count
        card = (await self.resources.characters.get(character_id)).body
        return 1 + len(card.data.alternate_greetings)

    def _selection(self, value: object, current: DraftSelection, greetings: int) -> DraftSelection:
        data = json_object(value)
        only_keys(data, SELECTION_KEYS)
        index = data.get("greetingIndex", current.greeting_index)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < greetings:
            raise PlayError(
                400, DRAFT_GREETING_INVALID, f"greetingIndex must be 0..{greetings - 1}"
            )
        books = data.get("worldBookIds", list(current.world_book_ids))
        if not isinstance(books, list):
            raise bad_body("selection.worldBookIds must be an array", DRAFT_INVALID)
        selected = DraftSelection(
            greeting_index=index,
            preset_id=optional_id(data.get("presetId", current.preset_id), "presetId"),
            user_id=optional_id(data.get("userId", current.user_id), "userId"),
            world_book_ids=tuple(books),
        )
        try:
            check_selection(Selection(world_book_ids=selected.world_book_ids))
        except SelectionInvalid as exc:
            raise bad_body(exc.message, DRAFT_INVALID) from None
        return selected

    async def _save(
        self, record: DraftRecord, edits: dict[str, OpeningValue] | None = None
    ) -> DraftRecord:
        try:
            return await self.store.save(record, edits)
        except ValueError:
            raise PlayError(413, DRAFT_TOO_LARGE, "the draft record would be too large") from None

    async def opening_value(self, record: DraftRecord) -> tuple[int, OpeningValue | None, bool]:
        """``(greetingIndex, opening, edited)`` of the selected greeting: the player's saved
        edit, else generated from the card as it is now (never stored: a changed card
        regenerates it; ``None`` when the card carries no MVU data)."""
        index = record.selection.greeting_index
        kept = record.openings.get(str(index))
        if kept is not None:
            try:
                return index, await self.store.load_edit(record.id, str(index), kept), True
            except (OSError, msgspec.DecodeError):
                self._log.warning("opening draft %s: an edited opening is unreadable", record.id)
                raise PlayError(
                    500, DRAFT_READ_FAILED, "the greeting's edited opening cannot be read"
                ) from None
        generated = await self._openings(record.character_id, index)
        return index, (generated[0] if generated is not None else None), False

    async def current_opening(self, record: DraftRecord) -> dict[str, Any]:
        """``{greetingIndex, variables, edited}`` of the selected greeting."""
        index, value, edited = await self.opening_value(record)
        variables = await asyncio.to_thread(lambda: value.variables) if value is not None else None
        return {"greetingIndex": index, "variables": variables, "edited": edited}

    async def view(self, record: DraftRecord) -> dict[str, Any]:
        """``{ok, draft, playthrough}`` (``playthrough`` is ``null`` when the row is gone)."""
        row = None
        try:
            item = await self.playthroughs.find(record.playthrough_id)
            row = item.row
        except PlayError:
            row = None
        index, value, edited = await self.opening_value(record)
        return {
            "ok": True,
            "draft": record.view(),
            "playthrough": row,
            # The opening's JSON as encoded once (a switch never re-encodes a large opening).
            "opening": {
                "greetingIndex": index,
                "variables": msgspec.Raw(value.raw) if value is not None else None,
                "edited": edited,
            },
        }

    # -- create --------------------------------------------------------------------------------
    async def create(self, body: object, op: Operation) -> dict[str, Any]:
        """``POST /drafts``: a record and a catalog row without ``rootSessionId``."""
        data = json_object(body)
        only_keys(data, CREATE_KEYS)
        character_id = data.get("characterId")
        if not valid_resource_id(character_id):
            raise bad_body("characterId must be a resource id", DRAFT_INVALID)
        assert isinstance(character_id, str)
        source = data.get("source")
        if source is not None and (
            not isinstance(source, str)
            or not source
            or len(source) > MAX_SOURCE_CHARS
            or not source.isprintable()
        ):
            raise bad_body(f"source must be 1-{MAX_SOURCE_CHARS} printable characters")
        greetings = await self._greeting_count(character_id)
        # A draft that names no persona or preset starts with the global default persona and
        # preset, as a new session would (docs/prompt-assembly.md "Session selections").
        defaults = self.selections.defaults()
        start = DraftSelection(user_id=defaults.user_id, preset_id=defaults.preset_id)
        selection = self._selection(data.get("selection", {}), start, greetings)
        preset = optional_id(data.get("assemblyPresetId"), "assemblyPresetId")
        entry = self.resources.characters.entry(character_id)
        assert entry is not None
        # Bound only once the body is valid: a refused request leaves no binding behind.
        await self.sessions.workspace.ensure()
        op.stage("request.validated")
        token = secrets.token_hex(16)
        created = now()
        record = DraftRecord(
            id=f"draft-{token}",
            playthrough_id=f"opening-{token}",
            character_id=character_id,
            character_sha256=entry.sha256,
            created_at=created,
            updated_at=created,
            source=source,
            selection=selection,
            assembly_preset_id=preset,
        )
        await self.current_opening(record)  # a greeting the card's schema rejects fails here
        await self._save(record)
        op.stage("draft.saved")
        ext: dict[str, Any] = {"characterName": entry.name[:200], "characterSha256": entry.sha256}
        if safe_segment(character_id):
            ext["characterId"] = character_id
        row = {
            "id": record.playthrough_id,
            "path": f"openings/{record.playthrough_id}/timeline.json",
            "title": entry.name[:200],
            "lastOpenedAt": created,
            "ext": {TAVERN_EXT: {**ext, "draftId": record.id}},
        }

        def add(doc: dict[str, Any] | None) -> dict[str, Any]:
            doc = doc if doc is not None else {"playthroughs": [], "ext": {}}
            doc["playthroughs"].append(row)
            return doc

        # An empty timeline first, so the unstarted draft reads as a healthy, empty playthrough
        # (availability "empty", never archived as unopenable).
        await self.sessions.workspace.write(
            row["path"], encode_document({"nodes": [], "ext": {}}), expected=None
        )
        op.stage("timeline.created")
        await self.sessions.workspace.update(CATALOG_PATH, add)
        op.stage("catalog.committed")
        return await self.view(record)

    # -- get / put -----------------------------------------------------------------------------
    async def get(self, draft_id: object) -> dict[str, Any]:
        """``GET /drafts/:id``."""
        return await self.view(await self.get_record(draft_id))

    def _editable(self, record: DraftRecord, expected: int) -> None:
        if record.status == "preparing":
            raise PlayError(409, DRAFT_PREPARING, "the draft's first send is being prepared")
        if record.status == "materialized":
            raise PlayError(409, DRAFT_MATERIALIZED, "the draft already has its session")
        if record.revision != expected:
            raise PlayError(
                409, DRAFT_REVISION_CONFLICT, f"the draft is at revision {record.revision}"
            )

    async def put(self, draft_id: object, body: object, op: Operation) -> dict[str, Any]:
        """``PUT /drafts/:id``: selection, preset, variables, import context or a reset."""
        did = check_draft_id(draft_id)
        data = json_object(body)
        if "characterId" in data or "character" in data:
            raise PlayError(400, DRAFT_CHARACTER_IMMUTABLE, "a draft's character never changes")
        only_keys(data, PUT_KEYS)
        expected = expected_revision(data)
        async with self.store.lock(did):
            record = await self.get_record(did)
            self._editable(record, expected)
            changes: dict[str, Any] = {}
            if "selection" in data:
                greetings = await self._greeting_count(record.character_id)
                changes["selection"] = self._selection(
                    data["selection"], record.selection, greetings
                )
            if "assemblyPresetId" in data:
                changes["assembly_preset_id"] = optional_id(
                    data["assemblyPresetId"], "assemblyPresetId"
                )
            if "importContextRef" in data:
                ref = data["importContextRef"]
                if ref is not None and not safe_posix_path(ref, suffix="import-context.json"):
                    raise bad_body(
                        "importContextRef must be null or a workspace path ending in "
                        "/import-context.json",
                        DRAFT_INVALID,
                    )
                changes["import_context_ref"] = ref
            reset = data.get("resetVariables", False)
            if not isinstance(reset, bool):
                raise bad_body("resetVariables must be a boolean", DRAFT_INVALID)
            variables = data.get("variables")
            if variables is not None and not isinstance(variables, dict):
                raise bad_body("variables must be an object", DRAFT_INVALID)
            if reset and variables is not None:
                raise bad_body("pass either variables or resetVariables", DRAFT_INVALID)
            op.stage("request.validated")
            updated = msgspec.structs.replace(record, **changes)
            key = str(updated.selection.greeting_index)
            openings = dict(updated.openings)
            edits: dict[str, OpeningValue] = {}
            if reset:
                openings.pop(key, None)
            elif variables is not None:
                generated = await self._openings(
                    record.character_id, updated.selection.greeting_index
                )
                checked = await self._check(
                    record.character_id, updated.selection.greeting_index, variables
                )
                try:
                    ref, edits[key] = self.store.edit(checked)
                except ValueError:
                    raise PlayError(
                        413, DRAFT_TOO_LARGE, "the edited opening would be too large"
                    ) from None
                openings[key] = msgspec.structs.replace(
                    ref, template_version=generated[1] if generated is not None else None
                )
            updated = msgspec.structs.replace(
                updated, openings=openings, revision=record.revision + 1, updated_at=now()
            )
            await self.opening_value(updated)  # the selected opening exists (or 409)
            updated = await self._save(updated, edits)
            op.stage("draft.saved")
        return await self.view(updated)

    # -- preview -------------------------------------------------------------------------------
    async def preview(self, draft_id: object, body: object) -> dict[str, Any]:
        """``POST /drafts/:id/preview``: the opening as it stands; no session, no model."""
        data = json_object(body)
        only_keys(data, frozenset({"expectedRevision", "preset"}))
        expected = expected_revision(data)
        preset = optional_id(data.get("preset"), "preset")
        record = await self.get_record(draft_id)
        self._editable(record, expected)
        index = record.selection.greeting_index
        if self.resources.characters.entry(record.character_id) is None:
            raise PlayError(404, PLAY_CHARACTER_NOT_FOUND, "the character does not exist")
        card = (await self.resources.characters.get(record.character_id)).body
        greetings = (card.data.first_message, *card.data.alternate_greetings)
        if index >= len(greetings):
            raise PlayError(409, DRAFT_GREETING_INVALID, "the card no longer has this greeting")
        index, value, edited = await self.opening_value(record)
        variables = await asyncio.to_thread(lambda: value.variables) if value is not None else None
        preset_id = (
            preset
            if "preset" in data
            else (record.assembly_preset_id or record.selection.preset_id)
        )
        preview = {
            "scope": "opening-draft",
            "draftId": record.id,
            "draftRevision": record.revision,
            "pendingInputsIncluded": False,
            "characterId": record.character_id,
            "characterName": card.name,
            "greetingIndex": index,
            "greeting": greetings[index],
            "presetId": preset_id,
            "userId": record.selection.user_id,
            "worldBookIds": list(record.selection.world_book_ids),
            "variables": variables,
            "variablesEdited": edited,
            "messages": [{"role": "assistant", "text": greetings[index]}]
            if greetings[index]
            else [],
        }
        if self.prompt is not None:
            selection = session_selection(record, preset_id)
            preview["prompt"] = await self.prompt(selection, variables)
        return {"ok": True, "preview": preview}

    # -- materialize ---------------------------------------------------------------------------
    async def materialize(self, draft_id: object, body: object, op: Operation) -> dict[str, Any]:
        """``POST /drafts/:id/materialize``: reserve one session for the first send.

        Idempotent by ``operationId``: a replay answers the same ``{sessionId, requestId}``."""
        did = check_draft_id(draft_id)
        data = json_object(body)
        only_keys(data, frozenset({"expectedRevision", "operationId", "text"}))
        expected = expected_revision(data)
        operation_id = data.get("operationId")
        if (
            not isinstance(operation_id, str)
            or not operation_id.strip()
            or len(operation_id) > MAX_OPERATION_ID_CHARS
        ):
            raise bad_body(
                f"operationId must be a non-blank string of at most {MAX_OPERATION_ID_CHARS}",
                DRAFT_INVALID,
            )
        text = data.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_USER_TEXT_CHARS:
            raise bad_body("text must be a non-blank string", DRAFT_INVALID)
        digest = text_sha256(text)
        async with self.store.lock(did):
            record = await self.get_record(did)
            done = record.materialize
            if done is not None and done.operation_id == operation_id:
                if done.text_sha256 != digest:
                    raise PlayError(
                        409, DRAFT_OPERATION_CONFLICT, "operationId was used with another text"
                    )
                if done.session_id is not None and record.status == "materialized":
                    op.stage("draft.materialize.replayed")
                    return await self._receipt(done)
            elif done is not None and record.status == "preparing":
                raise PlayError(409, DRAFT_PREPARING, "the draft's first send is being prepared")
            elif done is not None:
                raise PlayError(409, DRAFT_MATERIALIZED, "the draft already has its session")
            elif record.revision != expected:
                raise PlayError(
                    409, DRAFT_REVISION_CONFLICT, f"the draft is at revision {record.revision}"
                )
            op.stage("request.validated")
            request_id = (
                "draft-"
                + hashlib.sha256(f"{record.id}\0{operation_id}".encode()).hexdigest()[
                    : MAX_REQUEST_ID_CHARS // 4
                ]
            )
            reservation = done or Materialization(
                operation_id=operation_id, request_id=request_id, text_sha256=digest
            )
            record = msgspec.structs.replace(
                record,
                status="preparing",
                materialize=reservation,
                last_input=text,
                updated_at=now(),
            )
            await self._save(record)  # the durable reservation, before any host session
            op.stage("draft.reserved")
            record = await self._prepare_session(record, op)
        return await self._receipt(record.materialize)

    async def _admitted(self, session_id: str, request_id: str) -> bool:
        """Whether the first send reached the session (its request id was accepted, or the
        session has a turn: the memory of accepted ids does not survive a restart)."""
        if await self.sessions.was_accepted(session_id, request_id):
            return True
        inspection = await self.sessions.inspect(session_id)
        return inspection.turn_open or inspection.last_turn > 0

    async def _receipt(self, done: Materialization | None) -> dict[str, Any]:
        assert done is not None and done.session_id is not None
        accepted = await self._admitted(done.session_id, done.request_id)
        return {
            "ok": True,
            "sessionId": done.session_id,
            "requestId": done.request_id,
            "accepted": accepted,
        }

    async def _prepare_session(self, record: DraftRecord, op: Operation) -> DraftRecord:
        reservation = record.materialize
        assert reservation is not None
        binding = self.sessions.workspace.require()
        session_id = reservation.session_id
        if session_id is None:
            entry = self.resources.characters.entry(record.character_id)
            title = entry.name[:512] if entry is not None else None
            try:
                header = await self.sessions.controller().create(
                    title=title, workspace_id=binding.workspace_id
                )
            except SessionError as exc:
                raise host_problem(exc) from None
            session_id = header.id
            op.session_id = session_id
            reservation = msgspec.structs.replace(reservation, session_id=session_id)
            record = msgspec.structs.replace(record, materialize=reservation)
            await self._save(record)
            op.stage("host.session.created")
        selection = session_selection(
            record, record.assembly_preset_id or record.selection.preset_id
        )
        await self.selections.set(session_id, selection)
        op.stage("selection.committed")
        for hook in list(self.prepare_hooks):
            await hook(record, session_id)
        await self._set_root(record.playthrough_id, session_id)
        op.stage("catalog.committed")
        record = msgspec.structs.replace(record, status="materialized", updated_at=now())
        await self._save(record)
        op.stage("draft.materialized")
        return record

    async def _set_root(self, playthrough_id: str, session_id: str | None) -> None:
        def mutate(doc: dict[str, Any] | None) -> dict[str, Any] | None:
            if doc is None:
                return None
            for row in doc["playthroughs"]:
                if row["id"] == playthrough_id:
                    ext = row.setdefault("ext", {}).setdefault(TAVERN_EXT, {})
                    if session_id is None:
                        ext.pop("rootSessionId", None)
                    else:
                        ext["rootSessionId"] = session_id
                    return doc
            return None

        await self.sessions.workspace.update(CATALOG_PATH, mutate)

    # -- cancel --------------------------------------------------------------------------------
    async def cancel(self, draft_id: object, body: object, op: Operation) -> dict[str, Any]:
        """``POST /drafts/:id/cancel``: release a blank reservation (the draft reopens with
        ``lastInput``) or stop an admitted session keeping its history."""
        did = check_draft_id(draft_id)
        data = json_object(body)
        only_keys(data, frozenset())
        async with self.store.lock(did):
            record = await self.get_record(did)
            done = record.materialize
            op.stage("request.validated")
            if done is None:
                return {**await self.view(record), "released": False, "stopped": False}
            sid = done.session_id
            admitted = False
            if sid is not None:
                admitted = await self._admitted(sid, done.request_id)
            if admitted:
                assert sid is not None
                try:
                    stopped = await self.sessions.agents().cancel(sid)
                except SessionError as exc:
                    raise host_problem(exc) from None
                op.stage("host.turn.cancelled" if stopped else "host.turn.idle")
                return {**await self.view(record), "released": False, "stopped": stopped}
            if sid is not None:
                await self.selections.delete_session(sid)
                await self._set_root(record.playthrough_id, None)
            record = msgspec.structs.replace(
                record,
                status="open",
                materialize=None,
                revision=record.revision + 1,
                updated_at=now(),
                released_session_ids=(*record.released_session_ids, *([sid] if sid else [])),
            )
            await self._save(record)
            op.stage("draft.released")
        return {**await self.view(record), "released": True, "stopped": False}


def session_selection(record: DraftRecord, preset_id: str | None) -> Selection:
    """The selection the draft's session is bound to (``preset_id``: the preset it uses)."""
    sel = record.selection
    return Selection(
        preset_id=preset_id,
        character_card_id=record.character_id,
        user_id=sel.user_id,
        world_book_ids=sel.world_book_ids,
        character=CharacterOptions(greeting_index=sel.greeting_index),
    )
