"""Play sessions over the host's own sessions (`docs/contract/play.md#play-sessions`,
`docs/contract/sessions.md#messages` and `docs/contract/play.md#coordinates`;
`docs/play.md#play-sessions`).

Create, branch, user input, paged message reads and coordinates. Session ids, coordinates and
host failures map to the stable ``PLAY_*`` codes; a fork of a session with an open turn is
``409 PLAY_FORK_UNAVAILABLE``. Nothing here writes the timeline: clients compose that.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_hostapi.agents import AgentService, PromptReceipt
from innkeeper_hostapi.messages import (
    derive_messages,
    failed_turn,
    has_open_turn,
    stopped_request,
)
from innkeeper_hostapi.mvu import MvuServiceError, SeedKind, TavernMvuService
from innkeeper_hostapi.sessions import (
    MAX_PAGE_LIMIT,
    SESSION_FORMAT_VERSION,
    CoordinateOutOfRange,
    DerivedMessage,
    InvalidSessionArgument,
    SessionController,
    SessionError,
    SessionEvent,
    SessionInspection,
    SessionNotFound,
    TextBlock,
    TurnConflict,
)
from innkeeper_tavern.features.group_play.turns import Speaker, speakers_of
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection
from innkeeper_tavern.state.session_bindings.model import valid_session_id
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

from .errors import (
    PLAY_BRANCH_COPY_FAILED,
    PLAY_BRANCH_INPUT_RESET_FAILED,
    PLAY_COORDINATES_INVALID,
    PLAY_COORDINATES_MIGRATION_REQUIRED,
    PLAY_FORK_UNAVAILABLE,
    PLAY_HISTORY_CURSOR_STALLED,
    PLAY_HOST_ERROR,
    PLAY_HOST_UNAVAILABLE,
    PLAY_NOTHING_TO_CONTINUE,
    PLAY_REQUEST_ID_CONFLICT,
    PLAY_REQUEST_RECORD_FAILED,
    PLAY_SESSION_INVALID,
    PLAY_SESSION_NOT_FOUND,
    PLAY_STATE_SOURCE_INVALID,
    PLAY_TURN_OPEN,
    PlayError,
    bad_body,
)
from .oplog import Operation
from .requests import RequestEntry, RequestLedger, find_splice, text_sha256
from .workspace import PlayWorkspace

#: Longest user-message text (characters); the route's body limit bounds it too.
MAX_USER_TEXT_CHARS: Final = 1_000_000
#: Longest ``requestId`` (accepted ids are remembered durably, :mod:`.requests`).
MAX_REQUEST_ID_CHARS: Final = 128
MAX_SAFE_INTEGER: Final = 2**53 - 1

#: ``(parent, child, atEventId)`` after a branch copied the selection (import lineage).
BranchCopier = Callable[[str, str, int], Awaitable[None]]
#: ``(child)``: undo what a :data:`BranchCopier` wrote for a branch that failed.
BranchUndoer = Callable[[str], Awaitable[None]]
#: ``(source, child, replyEventId)``: a reply swipe's branch was made (group play keeps the
#: replaced reply's speaker for the child's first turn).
SwipeHook = Callable[[str, str, int], Awaitable[None]]


def check_session_id(value: object) -> str:
    """A syntactically valid session id, or 400 ``PLAY_SESSION_INVALID``."""
    if not valid_session_id(value):
        raise PlayError(400, PLAY_SESSION_INVALID, "not a valid session id")
    assert isinstance(value, str)
    return value


def host_problem(exc: SessionError) -> PlayError:
    """Map a host session error to the play codes (`docs/play.md#play-sessions`)."""
    if isinstance(exc, SessionNotFound):
        return PlayError(404, PLAY_SESSION_NOT_FOUND, "the session does not exist")
    if isinstance(exc, CoordinateOutOfRange):
        return PlayError(400, PLAY_COORDINATES_INVALID, exc.message)
    if isinstance(exc, InvalidSessionArgument):
        return PlayError(400, PLAY_SESSION_INVALID, exc.message)
    if isinstance(exc, TurnConflict):
        return PlayError(409, PLAY_FORK_UNAVAILABLE, "the session has an open turn")
    return PlayError(502, exc.code.upper().replace("-", "_") or PLAY_HOST_ERROR, exc.message)


def _turn_kind_problem(exc: SessionError) -> PlayError:
    """A refused continue/impersonate: the turn is busy, or there is nothing to continue."""
    if isinstance(exc, TurnConflict):
        return PlayError(409, PLAY_TURN_OPEN, exc.message)
    if exc.code == "nothing-to-continue":
        return PlayError(409, PLAY_NOTHING_TO_CONTINUE, exc.message)
    return host_problem(exc)


def _safe_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SAFE_INTEGER


def _obj(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_body("the request body must be a JSON object")
    return body


def _only(body: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        raise bad_body(f"unknown field {extra[0]!r}")


def parse_state_source(value: object, *, source_session: str | None) -> tuple[SeedKind, int] | None:
    """``stateSource:{sessionId, beforeReplyEventId | beforeUserEventId}`` → (seed kind, seq)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise PlayError(400, PLAY_STATE_SOURCE_INVALID, "stateSource must be an object")
    _only(value, {"sessionId", "beforeReplyEventId", "beforeUserEventId"})
    if value.get("sessionId") != source_session or source_session is None:
        raise PlayError(
            400, PLAY_STATE_SOURCE_INVALID, "stateSource.sessionId must be the source session"
        )
    reply, user = value.get("beforeReplyEventId"), value.get("beforeUserEventId")
    if (reply is None) == (user is None):
        raise PlayError(
            400,
            PLAY_STATE_SOURCE_INVALID,
            "stateSource needs exactly one of beforeReplyEventId and beforeUserEventId",
        )
    seq = reply if reply is not None else user
    if not _safe_int(seq) or seq == 0:
        raise PlayError(
            400, PLAY_STATE_SOURCE_INVALID, "stateSource event ids are positive integers"
        )
    assert isinstance(seq, int)
    return ("reply-swipe" if reply is not None else "request-retry"), seq


class PlaySessions:
    """The session half of the v2 play surface."""

    def __init__(
        self,
        *,
        workspace: PlayWorkspace,
        selections: SessionSelectionStore,
        resources: TavernResources,
        sessions: Callable[[], SessionController | None],
        agents: Callable[[], AgentService | None],
        mvu: Callable[[], TavernMvuService | None],
        logger: logging.Logger,
        data_dir: Path,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.workspace = workspace
        self.selections = selections
        self.resources = resources
        self.host_sessions = sessions
        self._agents = agents
        self._mvu = mvu
        self._log = logger
        self._now = now
        self.branch_copiers: list[BranchCopier] = []
        self.branch_undoers: list[BranchUndoer] = []
        self.swipe_hooks: list[SwipeHook] = []
        self.requests = RequestLedger(data_dir, logger)

    # -- host access ---------------------------------------------------------------------------
    def controller(self) -> SessionController:
        controller = self.host_sessions()
        if controller is None:
            raise PlayError(501, PLAY_HOST_UNAVAILABLE, "the host has no session controller")
        return controller

    def agents(self) -> AgentService:
        agents = self._agents()
        if agents is None:
            raise PlayError(501, PLAY_HOST_UNAVAILABLE, "the host has no agents")
        return agents

    async def inspect(self, session_id: object) -> SessionInspection:
        sid = check_session_id(session_id)
        try:
            return await self.controller().inspect(sid)
        except SessionError as exc:
            raise host_problem(exc) from None

    # -- create ------------------------------------------------------------------------------
    async def create(self, body: object, op: Operation) -> dict[str, Any]:
        """``POST /sessions``: a new empty session in the bound workspace."""
        data = _obj(body)
        _only(data, {"selectionFromSessionId", "stateSource", "title"})
        source = data.get("selectionFromSessionId")
        if source is not None:
            await self.inspect(source)
        state = parse_state_source(data.get("stateSource"), source_session=source)
        title = data.get("title")
        if title is not None and (not isinstance(title, str) or not title.strip()):
            raise bad_body("title must be a non-blank string")
        # Bound only once the body is valid: a refused request leaves no binding behind.
        binding = await self.workspace.ensure()
        op.stage("request.validated")
        selection = None
        if source is not None:
            selection = await pending_selection(self.selections, source, self.controller())
            if title is None and selection.character_card_id is not None:
                entry = self.resources.characters.entry(selection.character_card_id)
                if entry is not None:
                    title = f"{entry.name} {self._now().strftime('%Y-%m-%d %H:%M')}"
        op.stage("host.session.create.begin")
        try:
            header = await self.controller().create(
                title=title[:512] if isinstance(title, str) else None,
                workspace_id=binding.workspace_id,
            )
        except SessionError as exc:
            raise host_problem(exc) from None
        op.session_id = header.id
        op.stage("host.session.created")
        if selection is not None:
            op.stage("selection.copy.begin")
            await self.selections.set(header.id, selection)
            op.stage("selection.copy.committed")
        else:
            op.stage("selection.copy.skipped")
        if state is not None:
            assert isinstance(source, str)
            await self._seed(source, state, target=header.id, prefix_end=None, op=op)
        return {"ok": True, "sessionId": header.id, "title": header.title}

    async def _seed(
        self,
        source: str,
        state: tuple[SeedKind, int],
        *,
        target: str,
        prefix_end: int | None,
        op: Operation,
    ) -> None:
        """Freeze the source's pre-turn MVU state and install it into ``target``."""
        mvu = self._mvu()
        if mvu is None:
            op.stage("state.seed.skipped")
            return
        kind, seq = state
        op.stage("state.seed.begin")
        try:
            ticket = await mvu.capture_session_seed(
                session_id=source,
                kind=kind,
                at_event_id=seq,
                prefix_end_event_id=prefix_end,
                target_session_id=None if prefix_end is not None else target,
            )
            if ticket is not None:
                await mvu.install_session_seed(ticket=ticket, session_id=target)
        except MvuServiceError as exc:
            raise PlayError(exc.status, exc.code, exc.message) from None
        op.stage("state.seed.installed" if ticket is not None else "state.seed.none")

    # -- branch ------------------------------------------------------------------------------
    async def branch(self, session_id: object, body: object, op: Operation) -> dict[str, Any]:
        """``POST /sessions/:id/branch``: fork at ``atEventId``, reset input, copy bindings."""
        data = _obj(body)
        _only(data, {"atEventId", "sessionFormatVersion", "stateSource"})
        inspection = await self.inspect(session_id)
        source = inspection.header.id
        at = data.get("atEventId")
        if not _safe_int(at):
            raise PlayError(400, PLAY_COORDINATES_INVALID, "atEventId must be an integer >= 0")
        assert isinstance(at, int)
        check_format(data, inspection.meta.version)
        if at > inspection.last_seq:
            raise PlayError(400, PLAY_COORDINATES_INVALID, "atEventId is past the session's log")
        state = parse_state_source(data.get("stateSource"), source_session=source)
        if state is not None and state[1] <= at:
            raise PlayError(
                400, PLAY_STATE_SOURCE_INVALID, "the stateSource event must come after atEventId"
            )
        if inspection.turn_open:
            raise PlayError(409, PLAY_FORK_UNAVAILABLE, "the session has an open turn")
        op.stage("request.validated")
        op.stage("host.fork.begin")
        try:
            child = await self.controller().fork(source, at)
        except SessionError as exc:
            raise host_problem(exc) from None
        op.session_id = child.id
        op.stage("host.forked")
        # Forks copy no queued or steering input (the host rebuilds a fork's inbox only from its
        # own splices); verify the child holds exactly the inherited prefix and nothing after.
        try:
            child_state = await self.controller().inspect(child.id)
        except SessionError:
            child_state = None
        if child_state is None or child_state.last_seq != at or child_state.turn_open:
            raise PlayError(
                502, PLAY_BRANCH_INPUT_RESET_FAILED, "the branch's input could not be verified"
            )
        op.stage("input.reset.verified")
        try:
            op.stage("selection.copy.begin")
            selection = await pending_selection(self.selections, source, self.controller())
            await self.selections.set(child.id, selection)
            op.stage("selection.copy.committed")
            for copier in list(self.branch_copiers):
                await copier(source, child.id, at)
        except PlayError:  # a limit of its own (e.g. 413 PLAY_STORAGE_LIMIT), kept as it is
            await self._undo_copy(child.id, op)
            raise
        except Exception as exc:
            self._log.warning("branch copy failed: %s", type(exc).__name__)
            await self._undo_copy(child.id, op)
            raise PlayError(
                502, PLAY_BRANCH_COPY_FAILED, "copying the branch's bindings failed"
            ) from None
        if state is not None:
            await self._seed(source, state, target=child.id, prefix_end=at, op=op)
            if state[0] == "reply-swipe":
                for hook in list(self.swipe_hooks):
                    await hook(source, child.id, state[1])
        return {"ok": True, "sessionId": child.id}

    async def _undo_copy(self, child: str, op: Operation) -> None:
        """Drop the failed branch's selection and every copier's binding: the forked host
        session stays (the host keeps every session) but nothing Tavern-side refers to it."""
        for undo in [self.selections.delete_session, *self.branch_undoers]:
            try:
                await undo(child)
            except Exception as exc:
                self._log.warning("branch rollback step failed: %s", type(exc).__name__)
        op.stage("branch.rolled_back")

    # -- user message ------------------------------------------------------------------------
    async def user_message(self, session_id: object, body: object, op: Operation) -> dict[str, Any]:
        """``POST /sessions/:id/user-message``: queue ``text`` as the next user input.

        An optional ``requestId`` is accepted once per session: a replay answers the first
        acceptance again without sending anything, across restarts (:mod:`.requests`).
        """
        data = _obj(body)
        _only(data, {"text", "requestId"})
        inspection = await self.inspect(session_id)
        sid = inspection.header.id
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise bad_body("text must be a non-blank string")
        if len(text) > MAX_USER_TEXT_CHARS:
            raise bad_body(f"text is longer than {MAX_USER_TEXT_CHARS} characters")
        request_id = data.get("requestId")
        if request_id is not None and (
            not isinstance(request_id, str)
            or not request_id.strip()
            or len(request_id) > MAX_REQUEST_ID_CHARS
        ):
            raise bad_body(
                f"requestId must be a non-blank string of at most {MAX_REQUEST_ID_CHARS} chars"
            )
        op.stage("request.validated")
        if request_id is None:
            receipt = await self._prompt(sid, text)
            op.stage("host.prompt.accepted")
            return self._answer(
                sid, None, receipt.item_id, receipt.splice_seq, receipt.started_turn
            )
        async with self.requests.lock(sid):
            return await self._accept_once(sid, text, request_id, op)

    # -- continue / impersonate -----------------------------------------------------------
    async def continue_reply(
        self, session_id: object, body: object, op: Operation
    ) -> dict[str, Any]:
        """``POST /sessions/:id/continue``: a turn that extends the last assistant reply
        (docs/sessions.md "Turn kinds"); answered when it starts."""
        _only(_obj(body), set())
        sid = (await self.inspect(session_id)).header.id
        try:
            turn = await self.agents().continue_reply(sid)
        except SessionError as exc:
            raise _turn_kind_problem(exc) from None
        op.stage("host.continue.started")
        return {"ok": True, "sessionId": sid, "turn": turn}

    async def impersonate(self, session_id: object, body: object, op: Operation) -> dict[str, Any]:
        """``POST /sessions/:id/impersonate``: the model writes the player's next message;
        answered with its text when the turn ends. Nothing is added to the chat."""
        _only(_obj(body), set())
        sid = (await self.inspect(session_id)).header.id
        try:
            done = await self.agents().impersonate(sid)
        except SessionError as exc:
            raise _turn_kind_problem(exc) from None
        op.stage("host.impersonate.ended")
        reason = {"kind": done.reason, "code": done.code, "message": done.message}
        return {
            "ok": True,
            "sessionId": sid,
            "turn": done.turn,
            "text": done.text,
            "reason": reason,
        }

    async def _prompt(self, sid: str, text: str) -> PromptReceipt:
        try:
            return await self.agents().prompt(sid, text, "queue")
        except SessionError as exc:
            raise host_problem(exc) from None

    @staticmethod
    def _answer(
        sid: str,
        request_id: str | None,
        item_id: str | None,
        splice_seq: int | None,
        started: bool,
        *,
        replayed: bool = False,
    ) -> dict[str, Any]:
        return {
            "ok": True,
            "sessionId": sid,
            "accepted": True,
            "requestId": request_id,
            "itemId": item_id,
            "spliceSeq": splice_seq,
            "startedTurn": started,
            "replayed": replayed,
        }

    async def _accept_once(
        self, sid: str, text: str, request_id: str, op: Operation
    ) -> dict[str, Any]:
        """Send ``text`` under ``request_id`` at most once (durable ledger: :mod:`.requests`)."""
        digest = text_sha256(text)
        entry = await self.requests.get(sid, request_id)
        if entry is not None and entry.text_sha256 != digest:
            raise PlayError(
                409, PLAY_REQUEST_ID_CONFLICT, "requestId was accepted with another text"
            )
        if entry is not None and entry.state == "pending":
            entry = await self._settle(sid, entry)
        if entry is not None and entry.state == "accepted":
            op.stage("host.prompt.replayed")
            return self._answer(
                sid, request_id, entry.item_id, entry.splice_seq, entry.started_turn, replayed=True
            )
        if entry is None:
            inspection = await self.inspect(sid)
            entry = RequestEntry(
                request_id=request_id,
                text_sha256=digest,
                after_seq=inspection.last_seq,
                state="pending",
            )
            await self._record(sid, entry)
        op.stage("request.recorded")
        try:
            receipt = await self._prompt(sid, text)
        except PlayError:
            with contextlib.suppress(OSError):
                await self.requests.drop(sid, request_id)
            raise
        op.stage("host.prompt.accepted")
        accepted = msgspec.structs.replace(
            entry,
            state="accepted",
            item_id=receipt.item_id,
            splice_seq=receipt.splice_seq,
            started_turn=receipt.started_turn,
        )
        try:
            await self.requests.put(sid, accepted)
        except OSError as exc:  # the pending entry settles from the log on a replay
            self._log.warning("request ledger update failed: %s", type(exc).__name__)
        return self._answer(
            sid, request_id, receipt.item_id, receipt.splice_seq, receipt.started_turn
        )

    async def _record(self, sid: str, entry: RequestEntry) -> None:
        try:
            await self.requests.put(sid, entry)
        except OSError as exc:
            self._log.warning("request ledger write failed: %s", type(exc).__name__)
            raise PlayError(
                500, PLAY_REQUEST_RECORD_FAILED, "the request could not be recorded; nothing sent"
            ) from None

    async def _settle(self, sid: str, entry: RequestEntry) -> RequestEntry:
        """A ``pending`` entry left by a crash: accepted when the host's log holds its splice,
        else still pending (the prompt never became durable and is sent now)."""
        found = await find_splice(self.controller(), sid, entry)
        if found is None:
            return entry
        settled = msgspec.structs.replace(
            entry, state="accepted", splice_seq=found[0], item_id=found[1], started_turn=False
        )
        await self._record(sid, settled)
        return settled

    async def was_accepted(self, session_id: str, request_id: str) -> bool:
        """Whether ``request_id`` reached ``session_id`` (the durable ledger, settled against
        the host's log after a crash)."""
        entry = await self.requests.get(session_id, request_id)
        if entry is None:
            return False
        if entry.state == "accepted":
            return True
        return await find_splice(self.controller(), session_id, entry) is not None

    # -- reads ---------------------------------------------------------------------------------
    async def history(self, session_id: str) -> tuple[list[SessionEvent], int]:
        """Every event (oldest first) from one pinned snapshot, paging until ``hasMore`` is
        false; an empty page, an illegal seq or a cursor that does not advance is ``502
        PLAY_HISTORY_CURSOR_STALLED``."""
        controller = self.controller()
        pages: list[tuple[SessionEvent, ...]] = []
        before: int | None = None
        through: int | None = None
        while True:
            try:
                page = await controller.page(
                    session_id, before_seq=before, limit=MAX_PAGE_LIMIT, through_seq=through
                )
            except SessionError as exc:
                raise host_problem(exc) from None
            if through is None:
                through = page.through_seq
            if page.events:
                pages.append(page.events)
            if not page.has_more:
                break
            oldest = page.events[-1].seq if page.events else None
            following = page.next_before_seq
            if (
                oldest is None
                or following is None
                or oldest < 1
                or following > oldest
                or (before is not None and following >= before)
            ):
                raise PlayError(
                    502, PLAY_HISTORY_CURSOR_STALLED, "the history cursor did not advance"
                )
            before = following
        events = [event for page_events in reversed(pages) for event in reversed(page_events)]
        return events, through or 0

    async def messages(self, session_id: object, *, display_bodies: bool = False) -> dict[str, Any]:
        """``GET /sessions/:id/messages``; with ``display_bodies`` (``?bodies=display``) the
        messages a chat never shows (``system`` and ``context`` origins) keep their metadata but
        not their bodies, and no message repeats its text in ``content``."""
        inspection = await self.inspect(session_id)
        events, through = await self.history(inspection.header.id)
        stopped = stopped_request(events)
        failed = failed_turn(events)
        incomplete = has_open_turn(events)
        # Structs are encoded as they are (no intermediate dict copy of every message); the
        # events go as soon as the messages are derived (bodies are shared, not copied).
        messages: list[Any] = derive_messages(events)
        speakers = speakers_of(events)
        del events
        if display_bodies:
            messages = [_for_display(m) for m in messages]
        if speakers:  # a group chat: each reply names its speaker (docs/groups.md)
            messages = [_with_speaker(m, speakers) for m in messages]
        return {
            "ok": True,
            "sessionId": inspection.header.id,
            "messages": messages,
            "incompleteTurn": incomplete,
            "throughSeq": through,
            "sessionFormatVersion": inspection.meta.version,
            "migratedFromV2": False,
            "stoppedRequest": stopped,
            # The last turn when it failed (the model server unreachable, a refused key…):
            # its code and the server's reason, so the chat can say why and offer a retry.
            "failedTurn": failed,
        }

    async def coordinates(self, session_id: object) -> dict[str, Any]:
        """``GET /sessions/:id/coordinates``: the session's format, no bodies."""
        inspection = await self.inspect(session_id)
        return {
            "ok": True,
            "sessionFormatVersion": inspection.meta.version,
            "migratedFromV2": False,
        }


def check_format(data: dict[str, Any], version: int) -> None:
    """``sessionFormatVersion`` of saved coordinates: absent means "this host's current format"
    (every session here is native format 4); ``null`` or a non-integer is 400
    ``PLAY_COORDINATES_INVALID``; another version is 409 ``PLAY_COORDINATES_MIGRATION_REQUIRED``."""
    if "sessionFormatVersion" not in data:
        return
    value = data["sessionFormatVersion"]
    if not _safe_int(value):
        raise PlayError(
            400, PLAY_COORDINATES_INVALID, "sessionFormatVersion must be an integer >= 0"
        )
    if value != version or value != SESSION_FORMAT_VERSION:
        raise PlayError(
            409,
            PLAY_COORDINATES_MIGRATION_REQUIRED,
            f"the coordinates use session format {value}; this session uses format {version}",
        )


def _with_speaker(message: Any, speakers: dict[int, Speaker]) -> Any:
    """An assistant message of a group turn with ``speaker: {characterId, name}``."""
    out = message if isinstance(message, dict) else None
    role = out["role"] if out is not None else message.role
    turn = out.get("turn") if out is not None else message.turn
    if role != "assistant" or turn not in speakers:
        return message
    if out is None:
        out = msgspec.to_builtins(message)
    out["speaker"] = speakers[turn].wire()
    return out


#: Origins a chat never shows (`docs/contract/sessions.md#messages`).
_UNSHOWN: Final = frozenset({"system", "context"})


def _for_display(message: DerivedMessage) -> dict[str, Any] | DerivedMessage:
    """``message`` as ``?bodies=display`` answers it: a hidden origin without its body
    (``text: ""``, ``content: []``, ``bodyOmitted: true``); a shown one without ``content`` when
    that holds text only (``text`` is then the whole body), else unchanged."""
    if message.origin.kind in _UNSHOWN:
        out: dict[str, Any] = msgspec.to_builtins(
            msgspec.structs.replace(message, text="", content=())
        )
        out["bodyOmitted"] = True
        return out
    if not all(isinstance(block, TextBlock) for block in message.content):
        return message
    out = msgspec.to_builtins(msgspec.structs.replace(message, content=()))
    del out["content"]
    return out
