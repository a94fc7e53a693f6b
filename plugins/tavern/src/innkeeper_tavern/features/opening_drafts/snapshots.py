"""``/mvu/snapshot`` in ``greeting`` and ``initial`` mode
(`docs/contract/mvu-cards.md#opening-snapshot`, `docs/contract/mvu-cards.md#bound-greeting` and
`docs/contract/mvu-cards.md#empty-session`).

Both modes name ``{mode, playthroughId, sessionId, characterId, sessionFormatVersion?,
greetingIndex?, selectionToken?}``. The host checks the session's membership in the durable
catalog/timeline, its character selection and the observed selection, and answers the opening
with ``viewIdentity {greetingIndex, selectionToken}`` plus the first-message projection. The
token binds this host instance, the session and its selection generation: any selection change
(A→B→A included) or a restart refuses an old one. It is never a write authorization.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from innkeeper_hostapi.mvu import MvuServiceError
from innkeeper_hostapi.sessions import (
    ApprovalPolicy,
    ModelSelection,
    PermissionPreset,
    SandboxMode,
    SessionEndSeed,
    SessionError,
    SessionEvent,
    SessionTitle,
)
from innkeeper_tavern.features.mvu_service import MvuService
from innkeeper_tavern.features.play import Play
from innkeeper_tavern.features.play.errors import PlayError
from innkeeper_tavern.features.play.schema import tavern_ext
from innkeeper_tavern.features.play.tree import derive_focus, session_ids
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection

from .drafts import Drafts

#: The session log format of this host (`/v2/sessions/:id/coordinates`).
SESSION_FORMAT_VERSION: Final = 4
_KEYS: Final = frozenset(
    {
        "mode",
        "playthroughId",
        "sessionId",
        "characterId",
        "sessionFormatVersion",
        "greetingIndex",
        "selectionToken",
    }
)
_DRAFT_KEYS: Final = frozenset(
    {"mode", "playthroughId", "characterId", "greetingIndex", "selectionToken"}
)
#: The timeline half of a message scope (docs/contract/mvu-cards.md#bubble-binding).
_MESSAGE_KEYS: Final = ("playthroughId", "nodeId", "variantId")
_NAME_MACRO: Final = re.compile(r"\{\{\s*(char|user)\s*\}\}", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class MessageCoordinates:
    """A verified message scope: its timeline's workspace path and whether the message is
    the timeline's active head."""

    timeline_path: str
    head: bool


def _fail(code: str, message: str, status: int = 400) -> MvuServiceError:
    return MvuServiceError(code, message, status)


def _text(scope: Mapping[str, Any], key: str) -> str:
    value = scope.get(key)
    if not isinstance(value, str) or not value or len(value) > 200:
        raise _fail("MVU_SCOPE_INVALID", f"scope.{key} must be a non-empty string")
    return value


def empty_session(events: list[SessionEvent]) -> bool:
    """The exact empty-session rule: only the official initialization events, nothing else
    (no turns, messages, inbox activity, unknown events or inherited history)."""
    for event in events:
        data = event.data
        if isinstance(data, (PermissionPreset, SandboxMode, ApprovalPolicy)):
            continue
        if isinstance(data, ModelSelection):
            if not data.provider or not data.model or data.reasoning_effort == "":
                return False
            continue
        if isinstance(data, SessionTitle):
            if data.source.kind != "user" or data.message_seqs or not data.title:
                return False
            continue
        if isinstance(data, SessionEndSeed):
            continue
        return False
    return True


class OpeningSnapshots:
    """The greeting/initial snapshot reader, over the play workspace and the MVU service."""

    def __init__(self, play: Play, mvu: MvuService) -> None:
        self.play = play
        self.mvu = mvu
        self.resources = play.sessions.resources
        self.selections = play.sessions.selections
        #: The drafts, for ``mode:'draft'`` (set by the package).
        self.drafts: Drafts | None = None
        #: This host instance's key: tokens of an earlier process are never accepted.
        self._key = secrets.token_bytes(32)

    def token(
        self, owner: str, character_id: str, greeting_index: int, generation: int | None = None
    ) -> str:
        """The selection token of a session's current selection generation (or of a draft's
        revision, passed as ``generation``)."""
        if generation is None:
            generation = self.selections.generation(owner)
        message = f"{owner}\0{character_id}\0{greeting_index}\0{generation}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:48]

    async def message_membership(self, scope: Mapping[str, Any]) -> MessageCoordinates:
        """Bind a message scope's ``{playthroughId, nodeId, variantId}`` to the durable
        timeline (docs/contract/mvu-cards.md#bubble-binding): the playthrough is in the catalog,
        the node and the variant are in its timeline, the variant belongs to ``sessionId`` and
        its ``endEventId`` is the scope's. Made-up ids are refused (``403
        MVU_MEMBERSHIP_DENIED``; another reply of that variant ``409
        MVU_COORDINATES_MISMATCH``); the native event evidence is checked by the caller."""
        names = [key for key in _MESSAGE_KEYS if key in scope]
        if len(names) != len(_MESSAGE_KEYS):
            missing = sorted(set(_MESSAGE_KEYS) - set(names))[0]
            raise _fail("MVU_SCOPE_INVALID", f"a timeline message scope needs scope.{missing}")
        playthrough_id = _text(scope, "playthroughId")
        node_id = _text(scope, "nodeId")
        variant_id = _text(scope, "variantId")
        session_id = _text(scope, "sessionId")
        try:
            item = await self.play.playthroughs.find(playthrough_id)
        except PlayError as exc:
            raise _fail(exc.code, exc.message, exc.status) from None
        timeline = item.timeline or {"nodes": []}
        node = next((n for n in timeline["nodes"] if n["id"] == node_id), None)
        if node is None:
            raise _fail("MVU_MEMBERSHIP_DENIED", "the playthrough's timeline has no such node", 403)
        variant = next((v for v in node["variants"] if v["id"] == variant_id), None)
        if variant is None:
            raise _fail("MVU_MEMBERSHIP_DENIED", "the node has no such variant", 403)
        if variant["sessionId"] != session_id:
            raise _fail("MVU_MEMBERSHIP_DENIED", "the variant belongs to another session", 403)
        if variant["endEventId"] != scope.get("endEventId"):
            raise _fail("MVU_COORDINATES_MISMATCH", "endEventId is not this variant's reply", 409)
        focus = derive_focus(timeline)
        head = (focus.session_id, focus.node_id, focus.variant_id) == (
            session_id,
            node_id,
            variant_id,
        )
        return MessageCoordinates(item.row["path"], head)

    async def draft_snapshot(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        """``mode:'draft'``: an unstarted draft's selected opening (no session)."""
        unknown = sorted(set(scope) - _DRAFT_KEYS)
        if unknown:
            raise _fail("MVU_SCOPE_INVALID", f"unknown scope field {unknown[0]!r}")
        playthrough_id = _text(scope, "playthroughId")
        character_id = _text(scope, "characterId")
        observed = scope.get("greetingIndex")
        if isinstance(observed, bool) or not isinstance(observed, int) or observed < 0:
            raise _fail("MVU_SCOPE_INVALID", "scope.greetingIndex must be an integer >= 0")
        token = scope.get("selectionToken")
        if token is not None and not isinstance(token, str):
            raise _fail("MVU_SCOPE_INVALID", "scope.selectionToken must be a string")
        drafts = self.drafts
        assert drafts is not None
        try:
            item = await self.play.playthroughs.find(playthrough_id)
            record = await drafts.get_record(tavern_ext(item.row).get("draftId"))
        except PlayError as exc:
            raise _fail(exc.code, exc.message, exc.status) from None
        if record.playthrough_id != playthrough_id or record.status != "open":
            raise _fail("MVU_MEMBERSHIP_DENIED", "the playthrough has no open draft", 403)
        if record.character_id != character_id:
            raise _fail("MVU_CHARACTER_MISMATCH", "the draft has another character", 409)
        index = record.selection.greeting_index
        current = self.token(record.id, character_id, index, record.revision)
        if observed != index:
            raise _fail("MVU_SELECTION_STALE", "another greeting is selected now", 409)
        if token is not None and not hmac.compare_digest(token, current):
            raise _fail("MVU_SELECTION_STALE", "the draft changed since this view", 409)
        try:
            opening = await drafts.current_opening(record)
        except PlayError as exc:
            raise _fail(exc.code, exc.message, exc.status) from None
        if opening["variables"] is None:
            raise _fail("MVU_NOT_FOUND", "the card carries no MVU variables", 404)
        return {
            "version": 1,
            "status": "ready",
            "scope": dict(scope),
            "draftRevision": record.revision,
            "variables": opening["variables"],
            "edited": opening["edited"],
            "viewIdentity": {"greetingIndex": index, "selectionToken": current},
            "firstMessage": await self._first_message(
                None, character_id, index, record.selection.user_id
            ),
        }

    async def snapshot(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        """``GET /mvu/snapshot?scope=`` for ``mode:'greeting'``, ``'initial'`` and ``'draft'``."""
        mode = scope.get("mode")
        if mode == "draft":
            return await self.draft_snapshot(scope)
        unknown = sorted(set(scope) - _KEYS)
        if unknown:
            raise _fail("MVU_SCOPE_INVALID", f"unknown scope field {unknown[0]!r}")
        playthrough_id = _text(scope, "playthroughId")
        session_id = _text(scope, "sessionId")
        character_id = _text(scope, "characterId")
        version = scope.get("sessionFormatVersion")
        if version is not None and version != SESSION_FORMAT_VERSION:
            raise _fail(
                "MVU_COORDINATES_MIGRATION_REQUIRED", "coordinates of another log format", 409
            )
        observed = scope.get("greetingIndex")
        if observed is not None and (
            isinstance(observed, bool) or not isinstance(observed, int) or observed < 0
        ):
            raise _fail("MVU_SCOPE_INVALID", "scope.greetingIndex must be an integer >= 0")
        token = scope.get("selectionToken")
        if token is not None and not isinstance(token, str):
            raise _fail("MVU_SCOPE_INVALID", "scope.selectionToken must be a string")
        try:
            item = await self.play.playthroughs.find(playthrough_id)
            inspection = await self.play.sessions.inspect(session_id)
        except PlayError as exc:
            raise _fail(exc.code, exc.message, exc.status) from None
        root = item.root_session_id
        members = {root} if root else set()
        if mode == "greeting" and item.timeline is not None:
            members.update(session_ids(item.timeline))
        if session_id not in members:
            raise _fail(
                "MVU_MEMBERSHIP_DENIED",
                "the session is not the playthrough's root"
                + (" or a saved reply session" if mode == "greeting" else ""),
                403,
            )
        started = inspection.turn_open or inspection.last_turn > 0
        if mode == "initial":
            if item.timeline is not None and item.timeline.get("nodes"):
                raise _fail("MVU_INITIAL_CLOSED", "the playthrough's timeline is not empty", 409)
            if started or inspection.header.seed_length > 0:
                raise _fail("MVU_INITIAL_CLOSED", "the session has started", 409)
            try:
                await self.play.sessions.agents().resolve_agent(session_id)
            except (SessionError, PlayError):
                raise _fail(
                    "MVU_SESSION_UNAVAILABLE", "the session cannot be restored", 409
                ) from None
            events, _ = await self.play.sessions.history(session_id)
            if not empty_session(events):
                raise _fail("MVU_INITIAL_CLOSED", "the session's history is not empty", 409)
        controller = self.play.sessions.host_sessions()
        selection = await pending_selection(self.selections, session_id, controller)
        if selection.character_card_id != character_id:
            raise _fail("MVU_CHARACTER_MISMATCH", "the session has another character", 409)
        index = selection.character.greeting_index or 0
        current = self.token(session_id, character_id, index)
        if observed is not None and observed != index:
            raise _fail("MVU_SELECTION_STALE", "another greeting is selected now", 409)
        if token is not None and not hmac.compare_digest(token, current):
            raise _fail("MVU_SELECTION_STALE", "the selection changed since this view", 409)
        view = await self.mvu.opening_view(
            session_id, first_checkpoint=mode == "greeting" and started
        )
        return {
            "version": 1,
            "status": "ready",
            "scope": dict(scope),
            **view,
            "viewIdentity": {"greetingIndex": index, "selectionToken": current},
            "firstMessage": await self._first_message(
                root or session_id, character_id, index, selection.user_id
            ),
        }

    async def _first_message(
        self, root: str | None, character_id: str, index: int, user_id: str | None
    ) -> dict[str, Any]:
        """``getChatMessages(0)`` / ``chat[0]`` / ``message_id:0``: the selected source greeting
        after name macros, and the chat length (root's user/assistant messages + 1)."""
        characters = self.resources.characters
        text = ""
        name = ""
        if characters.entry(character_id) is not None:
            card = (await characters.get(character_id)).body
            greetings = (card.data.first_message, *card.data.alternate_greetings)
            text = greetings[index] if index < len(greetings) else ""
            name = card.name
        user = self.resources.users.entry(user_id) if user_id is not None else None
        names = {"char": name, "user": user.name if user is not None else "User"}
        text = _NAME_MACRO.sub(lambda m: names[m.group(1).lower()], text)
        if root is None:
            return {"messageId": 0, "text": text, "chatLength": 1}
        messages = (await self.play.sessions.messages(root))["messages"]
        durable = sum(1 for m in messages if m.origin.kind in ("user", "assistant"))
        return {"messageId": 0, "text": text, "chatLength": durable + 1}
