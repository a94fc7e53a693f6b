"""``tavernMvu``: MVU state instances, their ledger, turns, seeds and command processors.

spec/MVU.md "Host service" and "Durable history and requests". One :class:`MvuService` owns
``mvu-instances.json`` (an :class:`~.store.InstancesFile` around the pure ledger of
:mod:`innkeeper_tavern.mvu.ledger`). Every write runs under one asyncio lock, builds a new
document without touching the current one, encodes and size-checks it off the event loop and
publishes it atomically; only then does the in-memory document change. A refused or failed save
therefore changes nothing, in memory or on disk.

Turns: a reply is applied when its turn has ended ``completed`` — the last non-interrupted,
non-tool-call assistant message of the turn, once. Application is keyed by session id + the
assistant event's seq and recorded (with the new state) in the same atomic save, and a
per-session watermark says which events were already considered, so neither a replayed
``TURN_ENDED`` nor a host restart applies a reply twice. Inherited events of a fork (seq at or
below its ``seedLength``) are never applied in the child.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeAlias, TypeVar

import msgspec

from innkeeper_hostapi.agents import AgentService
from innkeeper_hostapi.mvu import (
    COMMAND_PROCESSOR_BUDGET_SECONDS,
    CommandProcessor,
    CommandProcessorReceipt,
    CommandProcessorRegistration,
    CommandProcessorSpec,
    FactListener,
    MvuCommandBatch,
    MvuServiceError,
    SeedKind,
    UsageHandler,
)
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    SessionController,
    SessionEvent,
    SessionHeader,
    SessionNotFound,
    TurnEnd,
    TurnStart,
    UserMessage,
    text_of,
)
from innkeeper_tavern.mvu import (
    MvuError,
    MvuFatalError,
    UpdateResult,
    apply_commands,
    apply_reply,
    check_variables,
    initialize_with_schema,
)
from innkeeper_tavern.mvu import ledger as mvu_ledger
from innkeeper_tavern.mvu.ledger import (
    MAX_OPERATION_ID_CHARS,
    HistoryEntry,
    InstanceIdentity,
    Ledger,
    LedgerError,
    StateRecord,
)
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.resources.errors import ResourceError
from innkeeper_tavern.selection import SessionSelectionStore
from innkeeper_tavern.selection.lifecycle import pending_selection

from . import commands as command_view
from .store import (
    AppliedRecord,
    CheckpointRecord,
    InstancesFile,
    LegacyResource,
    ModeReceipt,
    PendingSeed,
    SessionRecord,
    TemplateRecord,
    check_size,
    encode_instances,
    load_facts,
    load_instances,
    load_legacy,
    save_facts,
    save_instances,
    trim_facts,
)
from .templates import (
    ExplicitResource,
    Template,
    build_template,
    character_mvu_id,
    explicit_template,
    opening,
    parse_explicit,
)

#: A list of JSON records (an alias: the service has a method named ``list``).
JsonList: TypeAlias = list[dict[str, Any]]

_T = TypeVar("_T")

log = logging.getLogger("innkeeper.plugin.tavern.mvu")

#: ``type`` of every MVU resource record (spec/MVU.md ``validateConfig``: ``type:'mvu-state'``).
RESOURCE_TYPE: Final = "mvu-state"
#: The only accepted authority (spec/MVU.md "Host service": "Only local authority is accepted").
LOCAL_AUTHORITY: Final = "local"
#: Provider id of the optional manager (spec/MVU.md ``registerUsage``).
MANAGER_PROVIDER_ID: Final = "dsh-memory-manager"
#: Supported strategy chains (spec/MVU.md "Host service": "Supported chains").
STORE_TRIGGER: Final = "assistant_message_committed"
STORE_CHAIN: Final = ("parse_mvu_update", "validate_update", "apply_update")
RETRIEVE_TRIGGER: Final = "before_model_request"
RETRIEVE_CHAIN: Final = ("read_content", "render_state_and_update_instructions", "provide_to_model")
#: Events read per page while scanning a session for completed turns.
SCAN_PAGE: Final = 1000
#: Times a reply is re-run when its processor was replaced during the run (spec/MVU.md: a
#: revoked registration never persists a receipt that consumes the reply).
MAX_PROCESSOR_RERUNS: Final = 3
#: Captured seeds awaiting installation (each holds a frozen state and its history, so they
#: count against the 32 MiB ledger; spec/MVU.md gives no number).
MAX_PENDING_SEEDS: Final = 64
#: Characters of a copied resource id.
MAX_RESOURCE_ID_CHARS: Final = 200
#: Session format version the coordinates in this service refer to (docs/sessions.md).
SESSION_FORMAT_VERSION: Final = 4

Clock = Callable[[], str]
SessionsLookup = Callable[[], SessionController | None]
AgentsLookup = Callable[[], AgentService | None]

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sha(value: Any) -> str:
    return hashlib.sha256(_ENCODER.encode(value)).hexdigest()


def _detached(value: Any) -> Any:
    """A deep, JSON-only copy (callers can never change stored content)."""
    return msgspec.json.decode(_ENCODER.encode(value))


def _error(code: str, message: str, status: int = 400) -> MvuServiceError:
    return MvuServiceError(code, message, status)


async def _off(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run a ledger operation off the event loop (they encode and hash up to 32 MiB)."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_RESOURCE_ID_CHARS


def _is_variables(value: object) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("stat_data"), dict)


def _is_sync_callable(value: object) -> bool:
    return callable(value) and not inspect.iscoroutinefunction(value)


def _close_awaitable(value: object) -> bool:
    """True (after closing a coroutine) when a processor returned an awaitable."""
    if inspect.iscoroutine(value):
        value.close()
    return inspect.isawaitable(value)


def _check_operation_id(value: object) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_OPERATION_ID_CHARS:
        raise _error("MVU_INVALID_OPERATION", "operationId must be 1-200 characters")


def _ledger_error(exc: MvuError) -> MvuServiceError:
    status = {
        "MVU_REVISION_CONFLICT": 409,
        "MVU_OPERATION_CONFLICT": 409,
        "MVU_NOT_FOUND": 404,
        "MVU_LEDGER_TOO_LARGE": 507,
        "MVU_SEED_CONFLICT": 409,
    }.get(exc.code, 400)
    return MvuServiceError(exc.code, exc.message, status)


@dataclass(slots=True)
class _Processor:
    target: str
    fn: CommandProcessor
    generation: int
    receipt: CommandProcessorReceipt


@dataclass(frozen=True, slots=True)
class _Scope:
    session_id: str | None
    message_id: str | None
    end_event_id: int | None

    @property
    def historical(self) -> bool:
        return self.message_id is not None or self.end_event_id is not None


def parse_scope(scope: Mapping[str, Any] | None, *, require_session: bool = False) -> _Scope:
    """Check ``{authority:'local', sessionId?, messageId?, endEventId?}``."""
    if scope is None:
        scope = {"authority": LOCAL_AUTHORITY}
    if not isinstance(scope, Mapping):
        raise _error("MVU_SCOPE_INVALID", "scope must be an object")
    if scope.get("authority", LOCAL_AUTHORITY) != LOCAL_AUTHORITY:
        raise _error("MVU_SCOPE_INVALID", "only local authority is accepted")
    unknown = set(scope) - {"authority", "sessionId", "messageId", "endEventId"}
    if unknown:
        raise _error("MVU_SCOPE_INVALID", f"unknown scope field {sorted(unknown)[0]!r}")
    session_id = scope.get("sessionId")
    if session_id is not None and (not isinstance(session_id, str) or not session_id):
        raise _error("MVU_SCOPE_INVALID", "sessionId must be a non-empty string")
    if require_session and session_id is None:
        raise _error("MVU_SCOPE_INVALID", "this scope needs {authority:'local', sessionId}")
    message_id = scope.get("messageId")
    if message_id is not None and (not isinstance(message_id, str) or not message_id):
        raise _error("MVU_SCOPE_INVALID", "messageId must be a non-empty string")
    end = scope.get("endEventId")
    if end is not None and (isinstance(end, bool) or not isinstance(end, int) or end < 1):
        raise _error("MVU_SCOPE_INVALID", "endEventId must be a positive integer")
    if (message_id is not None or end is not None) and session_id is None:
        raise _error("MVU_SCOPE_INVALID", "historical coordinates need a sessionId")
    return _Scope(session_id, message_id, end)


class MvuService:
    """The ``tavernMvu`` service (implements :class:`innkeeper_hostapi.mvu.TavernMvuService`).

    ``sessions``/``agents`` resolve the host's controllers at call time. ``clock`` is injected
    so tests are deterministic.
    """

    def __init__(
        self,
        root: Path,
        *,
        resources: TavernResources,
        selections: SessionSelectionStore,
        sessions: SessionsLookup,
        agents: AgentsLookup,
        logger: logging.Logger | None = None,
        clock: Clock = utc_now,
        explicit: Sequence[ExplicitResource] = (),
    ) -> None:
        self.root = root
        self._explicit = tuple(explicit)
        self._resources = resources
        self._selections = selections
        self._sessions = sessions
        self._agents = agents
        self._log = logger or log
        self._clock = clock
        self._lock = asyncio.Lock()
        self._doc = InstancesFile()
        self._facts: list[dict[str, Any]] = []
        self._facts_lock = asyncio.Lock()
        self._legacy: dict[str, LegacyResource] = {}
        self._templates: dict[str, tuple[Any, Template | None]] = {}
        self._processors: dict[str, _Processor] = {}
        self._usage: dict[int, tuple[UsageHandler, str | None]] = {}
        self._observers: dict[int, FactListener] = {}
        self._counter = itertools.count(1)
        #: Bumped by every change that expires leases (processor, usage, unload).
        self._generation = 0
        #: Bumped when usage handlers change (pending decisions are then taken again).
        self._usage_generation = 0
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Load the files (off the event loop). A corrupt ``mvu-instances.json`` raises."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._doc = await asyncio.to_thread(load_instances, self.root)
        facts = await asyncio.to_thread(load_facts, self.root, self._log)
        self._facts = facts.rows
        legacy = await asyncio.to_thread(load_legacy, self.root)
        self._legacy = {item.id: item for item in legacy}

    def close(self) -> None:
        """Invalidate leases and processor registrations (the service is unloading)."""
        self._closed = True
        self._generation += 1
        self._processors.clear()
        self._usage.clear()
        self._observers.clear()

    @property
    def document(self) -> InstancesFile:
        """The committed document (read-only view for tests and tools)."""
        return self._doc

    # ------------------------------------------------------------------ persistence

    async def _commit(self, doc: InstancesFile) -> None:
        """Encode, size-check and publish ``doc``; only then make it current."""

        def write() -> None:
            data = encode_instances(doc)
            check_size(data)
            save_instances(self.root, data)

        await asyncio.to_thread(write)
        self._doc = doc

    @staticmethod
    def _with(doc: InstancesFile, **changes: Any) -> InstancesFile:
        return msgspec.structs.replace(doc, **changes)

    async def _record_fact(self, *facts: dict[str, Any]) -> None:
        """Append body-free facts (one file write) and tell observers; a failed save is logged,
        never raised (spec/MVU.md: "Optional fact persistence failure ... does not turn a
        successful state commit into failure")."""
        rows_in = [
            {"eventId": f"mvu-fact-{secrets.token_hex(8)}", "at": self._clock(), **fact}
            for fact in facts
        ]
        async with self._facts_lock:
            rows, data = await asyncio.to_thread(trim_facts, [*self._facts, *rows_in])
            try:
                await asyncio.to_thread(save_facts, self.root, data)
            except OSError:
                self._log.warning("saving mvu-facts.json failed; facts kept in memory only")
            self._facts = rows
        for fact in rows_in:
            for listener in list(self._observers.values()):
                try:
                    result = listener(dict(fact))
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    self._log.exception("an MVU fact observer failed")

    # ------------------------------------------------------------------ sessions and templates

    def _controller(self) -> SessionController:
        sessions = self._sessions()
        if sessions is None:
            raise _error("MVU_SESSIONS_UNAVAILABLE", "the host session controller is absent", 503)
        return sessions

    async def _header(self, session_id: str) -> tuple[SessionHeader, int, bool]:
        try:
            info = await self._controller().inspect(session_id)
        except SessionNotFound:
            raise _error("MVU_SESSION_NOT_FOUND", "no such session", 404) from None
        return info.header, info.last_seq, info.turn_open

    async def _template(self, card_id: str) -> Template | None:
        """The card's template, rebuilt when the card or a linked book changed."""
        entry = self._resources.characters.entry(card_id)
        if entry is None:
            return None
        try:
            book_ids = self._resources.world_book_ids("character", card_id)
        except ResourceError:
            book_ids = []
        books_key = tuple(
            (bid, e.updated_at)
            for bid in book_ids
            if (e := self._resources.world_books.entry(bid)) is not None
        )
        key = (entry.updated_at, entry.sha256, books_key)
        cached = self._templates.get(card_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            card = (await self._resources.characters.get(card_id)).body
            linked = []
            for bid, _ in books_key:
                doc = (await self._resources.world_books.get(bid)).body
                linked.append((doc.name, doc.book))
        except ResourceError:
            return None
        template = await asyncio.to_thread(build_template, card_id, card, linked)
        self._templates[card_id] = (key, template)
        return template

    async def _session_template(self, session_id: str) -> tuple[Template | None, int]:
        """The one template that applies to the session: its bound card's, or a configured
        resource listing it. More than one is ``MVU_AMBIGUOUS`` (spec/MVU.md "Discovery,
        configuration and identity": "Multiple resources matching a bubble produce
        MVU_AMBIGUOUS")."""
        selection = await pending_selection(self._selections, session_id, self._sessions())
        card_id = selection.character_card_id
        matches: list[Template] = []
        if card_id is not None:
            template = await self._template(card_id)
            if template is not None:
                matches.append(template)
        for resource in self._resources_explicit():
            if resource.matches(session_id):
                card = (
                    await self._template(resource.character_id) if resource.character_id else None
                )
                matches.append(explicit_template(resource, card))
        if len(matches) > 1:
            raise _error("MVU_AMBIGUOUS", "more than one MVU resource applies to this session", 409)
        return (matches[0] if matches else None), selection.character.greeting_index or 0

    def _may_access(self, doc: InstancesFile, state_id: str, session_id: str) -> bool:
        """Whether ``session_id`` may see ``state_id`` (its own instance or copy, or a shared
        configured resource listing the session)."""
        if self._session_of(doc, state_id) == session_id:
            return True
        return any(r.shared and r.id == state_id and r.matches(session_id) for r in self._explicit)

    async def _ensure_shared(
        self, template: Template, session_id: str, created_at: str, last_seq: int
    ) -> str:
        """The shared state of a configured ``sharing:'shared'`` resource (lock held)."""
        doc = self._doc
        state_id = template.id
        session = doc.sessions.get(session_id) or SessionRecord(
            created_at=created_at, scanned_through=last_seq
        )
        if state_id in doc.ledger.states and state_id in session.state_ids:
            return state_id
        if template.initial is None:
            raise _error("MVU_SOURCE_ERROR", template.source_error or "template unavailable", 409)
        ledger = doc.ledger
        templates = doc.templates
        if state_id not in ledger.states:
            now = self._clock()
            body = dict(template.initial)
            digest = _sha(body)
            record = StateRecord(
                id=state_id,
                template_id=template.id,
                instance=None,
                content=body,
                content_sha256=digest,
                revision=1,
                created_at=now,
                updated_at=now,
                management_mode="native",
            )
            entry = HistoryEntry(1, now, "initial", body, digest, None, None)
            ledger = msgspec.structs.replace(
                ledger,
                states={**ledger.states, state_id: record},
                history={**ledger.history, state_id: [entry]},
            )
            templates = {
                **templates,
                template.id: TemplateRecord(
                    id=template.id,
                    character_id=template.character_id,
                    version_key=template.version_key,
                    discovered_at=now,
                    management_mode=template.management_mode,
                ),
            }
        session = msgspec.structs.replace(session, state_ids=[*session.state_ids, state_id])
        await self._commit(
            self._with(
                doc,
                ledger=ledger,
                templates=templates,
                sessions={**doc.sessions, session_id: session},
            )
        )
        return state_id

    async def _events_after(self, session_id: str, after: int) -> list[SessionEvent]:
        """Events with seq > ``after``, oldest first (one pinned snapshot)."""
        controller = self._controller()
        out: list[SessionEvent] = []
        before: int | None = None
        through: int | None = None
        while True:
            page = await controller.page(
                session_id, before_seq=before, limit=SCAN_PAGE, through_seq=through
            )
            through = page.through_seq
            done = False
            for event in page.events:
                if event.seq <= after:
                    done = True
                    break
                out.append(event)
            if done or not page.has_more or page.next_before_seq is None:
                break
            before = page.next_before_seq
        out.reverse()
        return out

    async def _event_at(self, session_id: str, seq: int) -> SessionEvent | None:
        page = await self._controller().page(session_id, before_seq=seq + 1, limit=1)
        if page.events and page.events[0].seq == seq:
            return page.events[0]
        return None

    # ------------------------------------------------------------------ coordinates

    def _revision_at(self, doc: InstancesFile, state_id: str, seq: int) -> int | None:
        best: int | None = None
        for revision, at in doc.coordinates.get(state_id, []):
            if at <= seq and (best is None or revision > best):
                best = revision
        return best

    @staticmethod
    def _content_at(ledger: Ledger, state_id: str, revision: int) -> HistoryEntry | None:
        for entry in ledger.history.get(state_id, []):
            if entry.revision == revision:
                return entry
        return None

    # ------------------------------------------------------------------ instances

    async def _ensure_instance(self, session_id: str) -> str | None:
        """The session's active instance, allocated on first use (lock held)."""
        header, last_seq, _ = await self._header(session_id)
        if header.delegation_depth > 0:
            return None
        template, greeting_index = await self._session_template(session_id)
        if template is None:
            return None
        if template.shared:
            return await self._ensure_shared(template, session_id, header.created_at, last_seq)
        doc = self._doc
        identity = InstanceIdentity(template.id, session_id, header.created_at)
        state_id = mvu_ledger.instance_id(identity)
        session = doc.sessions.get(session_id)
        if state_id in doc.ledger.states and session is not None and state_id in session.state_ids:
            return state_id
        if session is not None and session.created_at != header.created_at:
            raise _error("MVU_SESSION_IDENTITY_CHANGED", "the session identity changed", 409)
        if session is not None and session.blocked:
            raise _error("MVU_SEED_PENDING", session.blocked, 409)
        if any(
            p.target_session_id == session_id and p.installed_in is None
            for p in doc.pending_seeds.values()
        ):
            raise _error("MVU_SEED_PENDING", "a captured seed awaits installation here", 409)
        if template.initial is None:
            raise _error("MVU_SOURCE_ERROR", template.source_error or "template unavailable", 409)
        now = self._clock()
        ledger = doc.ledger
        coordinates = dict(doc.coordinates)
        parent = header.parent
        if state_id in ledger.states:
            pass  # allocated for this session before (selection switched back)
        elif parent is not None and header.seed_length > 0:
            ledger, coords = await self._seed_from_parent(
                template, identity, parent.session_id, parent.at_event_id, now
            )
            coordinates[state_id] = coords
        else:
            started = await self._has_turns(session_id)
            try:
                content = (
                    template.initial
                    if started or parent is not None
                    else await asyncio.to_thread(opening, template, greeting_index)
                )
                ledger, _ = await _off(
                    mvu_ledger.create_instance, ledger, identity, content, now=now
                )
            except MvuError as exc:
                raise _error(exc.code, exc.message, 409) from None
            coordinates[state_id] = [(1, last_seq if started else 0)]
        if session is None:
            # Replies before the instance existed are never replayed into it, except a fork's
            # own replies when its state is seeded before any of its turns ended.
            boundary = header.seed_length
            fresh_fork = parent is not None and not await self._has_turns(session_id, boundary)
            session = SessionRecord(
                created_at=header.created_at,
                scanned_through=boundary if fresh_fork else last_seq,
                seed_length=boundary,
            )
        session = msgspec.structs.replace(session, state_ids=[*session.state_ids, state_id])
        templates = dict(doc.templates)
        if template.id not in templates:
            templates[template.id] = TemplateRecord(
                id=template.id,
                character_id=template.character_id,
                version_key=template.version_key,
                discovered_at=now,
                management_mode=template.management_mode,
            )
        new = self._with(
            doc,
            ledger=ledger,
            coordinates=coordinates,
            sessions={**doc.sessions, session_id: session},
            templates=templates,
        )
        await self._commit(new)
        await self._record_fact(
            {
                "id": state_id,
                "phase": "completed",
                "sessionId": session_id,
                "detail": "instance-created",
            }
        )
        return state_id

    async def _has_turns(self, session_id: str, after: int = 0) -> bool:
        """Whether a turn of the session ended after seq ``after`` (an open first turn does not
        count: its playthrough has not started yet)."""
        controller = self._controller()
        before: int | None = None
        through: int | None = None
        while True:  # newest first: a long log usually answers on its first page
            page = await controller.page(
                session_id, before_seq=before, limit=SCAN_PAGE, through_seq=through
            )
            through = page.through_seq
            for event in page.events:
                if event.seq <= after:
                    return False
                if isinstance(event.data, TurnEnd):
                    return True
            if not page.has_more or page.next_before_seq is None:
                return False
            before = page.next_before_seq

    async def _seed_from_parent(
        self,
        template: Template,
        child: InstanceIdentity,
        parent_id: str,
        at_event_id: int,
        now: str,
    ) -> tuple[Ledger, list[tuple[int, int]]]:
        """Install the child from the parent's version current at ``at_event_id`` (lock held).

        The parent is allocated if needed (a fresh parent gets its opening) and its completed
        turns are reconciled first, so a reply already in its log is part of the cut; a version
        committed after the cut never is. A parent whose state cannot be read refuses the
        child's allocation rather than guessing a baseline.
        """
        parent_header, _, _ = await self._header(parent_id)
        parent_identity = InstanceIdentity(template.id, parent_id, parent_header.created_at)
        parent_state = mvu_ledger.instance_id(parent_identity)
        await self._reconcile_locked(parent_id)
        doc = self._doc
        ledger = doc.ledger
        revision = self._revision_at(doc, parent_state, at_event_id)
        if parent_state not in ledger.states or revision is None:
            # The parent had no state at the cut: the child starts from the template (its
            # baseline is never guessed from the parent's later state).
            assert template.initial is not None
            ledger, _ = await _off(
                mvu_ledger.create_instance, ledger, child, template.initial, now=now
            )
            return ledger, [(1, 0)]
        seed = mvu_ledger.capture_seed(
            ledger, parent_state, ticket=f"fork:{child.session_id}", revision=revision
        )
        assert seed is not None
        try:
            ledger, record = await _off(mvu_ledger.install_seed, ledger, seed, child, now=now)
        except MvuError as exc:
            raise _ledger_error(exc) from None
        inherited = [(r, a) for r, a in doc.coordinates.get(parent_state, []) if r <= revision]
        return ledger, [*inherited, (record.revision, at_event_id)]

    # ------------------------------------------------------------------ turns

    async def reconcile(self, session_id: str) -> None:
        """Apply every completed, not yet considered turn of ``session_id`` in order."""
        async with self._lock:
            await self._reconcile_locked(session_id)

    async def _reconcile_locked(self, session_id: str) -> None:
        doc = self._doc
        session = doc.sessions.get(session_id)
        if session is None:
            if await self._ensure_instance(session_id) is None:
                return
            session = self._doc.sessions[session_id]
        events = await self._events_after(session_id, session.scanned_through)
        candidates: dict[int, SessionEvent] = {}
        safe = session.scanned_through
        open_turn = False
        for event in events:
            data = event.data
            if isinstance(data, TurnStart):
                open_turn = True
                candidates.pop(data.turn, None)
            elif isinstance(data, AssistantMessage):
                # The last assistant message of the turn that is neither interrupted nor a
                # tool call (spec/MVU.md "Durable history and requests").
                if not data.interrupted and not data.tool_calls:
                    candidates[data.turn] = event
            elif isinstance(data, TurnEnd):
                open_turn = False
                chosen = candidates.pop(data.turn, None)
                if data.reason.kind == "completed" and chosen is not None:
                    consumed = await self._apply_locked(session_id, chosen, event.seq)
                    if not consumed:
                        # A registration changed under the reply: it stays unconsumed and
                        # nothing after it is applied before it.
                        break
            if not open_turn:
                safe = event.seq
        current = self._doc.sessions.get(session_id)
        if current is not None and safe > current.scanned_through:
            updated = msgspec.structs.replace(current, scanned_through=safe)
            await self._commit(
                self._with(self._doc, sessions={**self._doc.sessions, session_id: updated})
            )

    async def _apply_locked(self, session_id: str, event: SessionEvent, end_seq: int) -> bool:
        """Apply one reply and record its receipt; ``False`` when it must stay unconsumed (a
        usage or processor registration kept changing while it ran)."""
        data = event.data
        assert isinstance(data, AssistantMessage)
        key = str(event.seq)
        if key in self._doc.applied.get(session_id, {}):
            return True
        state_id = await self._ensure_instance(session_id)
        if state_id is None:
            return True
        record = self._doc.ledger.states[state_id]
        text = text_of(data.content)
        base = {
            "id": state_id,
            "sessionId": session_id,
            "turn": data.turn,
            "turnKind": "assistant-reply",
            "messageSeq": event.seq,
        }
        started = {**base, "phase": "started", "revision": record.revision}
        outcome, code, result, processor = "skipped", None, None, None
        for _ in range(MAX_PROCESSOR_RERUNS):
            usage_generation = self._usage_generation
            decision = await self._manager_decision(state_id, session_id, data.turn, text)
            if usage_generation == self._usage_generation:
                break
        else:
            return False
        if decision is not None:
            code = decision
        else:
            ran = await self._run_reply(state_id, record, text)
            if ran is None:
                return False
            result, processor = ran
            if result.fatal is not None:
                outcome, code = "failed", result.fatal.code
            else:
                outcome = "applied" if result.modified else "unchanged"
        doc = self._doc
        ledger = doc.ledger
        revision = record.revision
        coordinates = doc.coordinates
        if outcome == "applied":
            assert result is not None
            try:
                ledger, receipt = await _off(
                    mvu_ledger.update,
                    ledger,
                    state_id,
                    result.variables,
                    expected_revision=record.revision,
                    operation_id=f"reply:{session_id}:{event.seq}",
                    now=self._clock(),
                    kind="reply",
                    source={
                        "sessionId": session_id,
                        "messageId": data.message_id,
                        "messageSeq": event.seq,
                        "turn": data.turn,
                    },
                )
                revision = receipt.revision
                coordinates = {
                    **coordinates,
                    state_id: [*coordinates.get(state_id, []), (revision, event.seq)],
                }
            except MvuError as exc:
                outcome, code, ledger = "failed", exc.code, doc.ledger
        applied = AppliedRecord(
            state_id=state_id,
            turn=data.turn,
            outcome=outcome,
            at=self._clock(),
            revision_before=record.revision,
            revision=revision,
            code=code,
            diagnostics=len(result.diagnostics) if result is not None else 0,
            processor=processor,
        )
        session = doc.sessions[session_id]
        session = msgspec.structs.replace(
            session, scanned_through=max(session.scanned_through, end_seq)
        )
        receipts = {**doc.applied, session_id: {**doc.applied.get(session_id, {}), key: applied}}
        new = self._with(
            doc,
            ledger=ledger,
            coordinates=coordinates,
            applied=receipts,
            sessions={**doc.sessions, session_id: session},
        )
        try:
            await self._commit(new)
        except LedgerError as exc:
            # The state does not fit: keep the previous file and revision, record the refusal.
            applied = msgspec.structs.replace(
                applied, outcome="failed", code=exc.code, revision=record.revision
            )
            receipts = {
                **doc.applied,
                session_id: {**doc.applied.get(session_id, {}), key: applied},
            }
            fallback = self._with(
                doc, applied=receipts, sessions={**doc.sessions, session_id: session}
            )
            try:
                await self._commit(fallback)
            except LedgerError:
                self._log.warning("MVU ledger full: reply %s of a session left unapplied", key)
                return True
            outcome, code, revision = "failed", exc.code, record.revision
        phase = {"applied": "applied", "failed": "failed"}.get(outcome, "skipped")
        fact = {**base, "phase": phase, "revision": revision}
        if outcome == "applied":
            fact["detail"] = "state-committed"
        elif code is not None:
            fact["detail"] = code
        await self._record_fact(started, fact, {**base, "phase": "completed", "revision": revision})
        return True

    async def _manager_decision(
        self, state_id: str, session_id: str, turn: int, text: str
    ) -> str | None:
        """``None`` to proceed, or the skip code. Managed execution without an allowing
        decision fails closed (spec/MVU.md "Host service")."""
        managers = [h for h, provider in self._usage.values() if provider == MANAGER_PROVIDER_ID]
        if not managers:
            return None
        request = {
            "id": state_id,
            "trigger": STORE_TRIGGER,
            "scope": {"authority": LOCAL_AUTHORITY, "sessionId": session_id},
            "event": {
                "sessionId": session_id,
                "turn": turn,
                "text": text,
                "containsMvuUpdate": "_." in text or "<" in text,
            },
        }
        for handler in managers:
            try:
                decision = await handler(request)
            except Exception:
                self._log.exception("an MVU usage handler failed")
                return "MVU_MANAGER_FAILED"
            if decision is None or decision.get("enabled") is not True:
                return "MVU_MANAGER_DENIED"
        return None

    async def _run_reply(
        self, state_id: str, record: StateRecord, text: str
    ) -> tuple[UpdateResult, str | None] | None:
        """Run the reply, through the effective command processor when there is one.

        ``None`` when the processor was replaced or disposed during every attempt: a revoked
        registration never persists a receipt that consumes the reply (spec/MVU.md "Source
        precommit command Helpers")."""
        for _ in range(MAX_PROCESSOR_RERUNS):
            processor = self._effective_processor(state_id, record.template_id)
            if processor is None:
                return await asyncio.to_thread(apply_reply, record.content, text), None
            result = await self._run_processor(processor, state_id, record, text)
            if self._effective_processor(state_id, record.template_id) is processor:
                return result, processor.receipt.registration_id
        return None

    async def _run_processor(
        self, processor: _Processor, state_id: str, record: StateRecord, text: str
    ) -> UpdateResult:
        def failed(code: str, message: str) -> UpdateResult:
            return UpdateResult(
                dict(record.content), False, [], fatal=MvuFatalError(message, code=code)
            )

        try:
            prepared = await asyncio.to_thread(command_view.prepare, text)
        except MvuFatalError as fatal:
            return UpdateResult(dict(record.content), False, [], fatal=fatal)
        batch = MvuCommandBatch(
            state_id=state_id,
            variables=_detached(record.content),
            commands=prepared.views(),
            message_content=text,
            recoverable=tuple(r.offer for r in prepared.recoveries),
        )
        try:
            output = await asyncio.wait_for(
                asyncio.to_thread(processor.fn, batch), timeout=COMMAND_PROCESSOR_BUDGET_SECONDS
            )
        except TimeoutError:
            return failed("MVU_PROCESSOR_TIMEOUT", "the command processor overran its budget")
        except Exception as exc:
            self._log.warning("MVU command processor raised %s", type(exc).__name__)
            return failed("MVU_PROCESSOR_FAILED", "the command processor raised")
        if _close_awaitable(output):
            return failed("MVU_PROCESSOR_FAILED", "async command processors are rejected")
        try:
            chosen = command_view.select(prepared, output)
        except command_view.ProcessorOutputRejected as exc:
            return failed(exc.code, str(exc))
        except MvuFatalError as fatal:
            return UpdateResult(dict(record.content), False, [], fatal=fatal)
        return await asyncio.to_thread(
            lambda: apply_commands(record.content, chosen, extract_issues=prepared.issues)
        )

    def _effective_processor(self, state_id: str, template_id: str) -> _Processor | None:
        return self._processors.get(state_id) or self._processors.get(template_id)

    async def checkpoint(
        self, session_id: str, turn: int, claim_seq: int | None = None
    ) -> dict[str, Any] | None:
        """Freeze the pre-turn baseline of ``turn`` (spec/MVU.md ``checkpoint``): the first
        call records the current version after reconciling earlier turns; later calls (later
        steps) return the same record. ``None`` when the session has no MVU state."""
        async with self._lock:
            state_id = await self._ensure_instance(session_id)
            if state_id is None:
                return None
            await self._reconcile_locked(session_id)
            doc = self._doc
            existing = doc.checkpoints.get(session_id, {}).get(str(turn))
            if existing is None:
                record = doc.ledger.states[state_id]
                existing = CheckpointRecord(
                    state_id=state_id,
                    revision=record.revision,
                    content_sha256=record.content_sha256,
                    at=self._clock(),
                    claim_seq=claim_seq,
                )
                per_session = {**doc.checkpoints.get(session_id, {}), str(turn): existing}
                await self._commit(
                    self._with(doc, checkpoints={**doc.checkpoints, session_id: per_session})
                )
            return {"sessionId": session_id, "turn": turn, **msgspec.to_builtins(existing)}

    # ------------------------------------------------------------------ records

    def _actual_mode(self) -> str:
        managed = any(p == MANAGER_PROVIDER_ID for _, p in self._usage.values())
        return "managed" if managed else "native"

    def _session_of(self, doc: InstancesFile, state_id: str) -> str | None:
        record = doc.ledger.states.get(state_id)
        if record is not None and record.instance is not None:
            return record.instance.session_id
        return doc.owners.get(state_id)

    def _record_json(
        self,
        record: StateRecord,
        scope: _Scope,
        *,
        content: dict[str, Any] | None = None,
        revision: int | None = None,
    ) -> dict[str, Any]:
        doc = self._doc
        template = doc.templates.get(record.template_id)
        name = record.template_id
        if template is not None and template.character_id is not None:
            entry = self._resources.characters.entry(template.character_id)
            if entry is not None:
                name = entry.name
        wire_scope: dict[str, Any] = {"authority": LOCAL_AUTHORITY}
        if scope.session_id is not None:
            wire_scope["sessionId"] = scope.session_id
        if scope.message_id is not None:
            wire_scope["messageId"] = scope.message_id
        if scope.end_event_id is not None:
            wire_scope["endEventId"] = scope.end_event_id
        out: dict[str, Any] = {
            "id": record.id,
            "name": name,
            "type": RESOURCE_TYPE,
            "authority": LOCAL_AUTHORITY,
            "scope": wire_scope,
            "revision": revision if revision is not None else record.revision,
            "currentRevision": record.revision,
            "historical": scope.historical,
            "versionKey": template.version_key if template is not None else None,
            "managementMode": self._actual_mode(),
            "storedManagementMode": doc.stored_modes.get(
                record.id, template.management_mode if template is not None else "native"
            ),
            "templateId": record.template_id,
            "instance": None
            if record.instance is None
            else {
                "sessionId": record.instance.session_id,
                "sessionCreatedAt": record.instance.session_created_at,
                "templateId": record.instance.template_id,
            },
        }
        if content is not None:
            out["content"] = _detached(content)
        if record.inherited_from is not None:
            out["inheritedFrom"] = dict(record.inherited_from)
        processor = self._effective_processor(record.id, record.template_id)
        if processor is not None:
            out["commandProcessor"] = processor.receipt.to_json()
        return out

    def _source_error_json(self, template: Template, scope: _Scope) -> dict[str, Any]:
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
        self, item: LegacyResource, scope: _Scope, with_content: bool
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
            out["content"] = _detached(item.content)
        return out

    async def _authorize(self, state_id: str, scope: _Scope) -> StateRecord:
        """The record of ``state_id`` if ``scope`` may see it (raises otherwise)."""
        doc = self._doc
        record = doc.ledger.states.get(state_id)
        if record is None:
            raise _error("MVU_NOT_FOUND", "no such MVU resource", 404)
        if scope.session_id is not None:
            if not self._may_access(doc, state_id, scope.session_id):
                raise _error("MVU_ACCESS_DENIED", "this session has no access to the resource", 403)
            header, _, _ = await self._header(scope.session_id)
            expected = record.instance.session_created_at if record.instance else None
            session = doc.sessions.get(scope.session_id)
            created = expected or (session.created_at if session else header.created_at)
            if header.created_at != created:
                raise _error("MVU_SESSION_IDENTITY_CHANGED", "the session identity changed", 409)
        return record

    async def _historical_revision(self, state_id: str, scope: _Scope) -> int:
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
                raise _error("MVU_COORDINATE_NOT_FOUND", "no such message in this session", 404)
            if seq is not None and seq != found:
                raise _error("MVU_SCOPE_INVALID", "messageId and endEventId disagree")
            seq = found
        assert seq is not None
        revision = self._revision_at(self._doc, state_id, seq)
        if revision is None:
            raise _error("MVU_HISTORY_UNAVAILABLE", "no recorded version at this coordinate", 404)
        return revision

    # ------------------------------------------------------------------ service methods

    async def list(self, *, scope: Mapping[str, Any] | None = None) -> JsonList:
        """Authorized resources without content (spec/MVU.md ``list``)."""
        parsed = parse_scope(scope)
        if parsed.historical:
            raise _error("MVU_SCOPE_INVALID", "list takes a current scope")
        out: list[dict[str, Any]] = []
        if parsed.session_id is not None:
            template, _ = await self._session_template(parsed.session_id)
            if template is not None and template.source_error is not None:
                # spec/MVU.md: "Parsing errors remain visible as sourceError and prevent
                # execution" — the session's template is listed, nothing is allocated.
                out.append(self._source_error_json(template, parsed))
            else:
                async with self._lock:
                    await self._ensure_instance(parsed.session_id)
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
        """One record with content, or ``None`` (spec/MVU.md ``read``)."""
        parsed = parse_scope(scope)
        if id in self._legacy and id not in self._doc.ledger.states:
            return self._legacy_json(self._legacy[id], parsed, True)
        if parsed.session_id is not None:
            async with self._lock:
                await self._ensure_instance(parsed.session_id)
        if id not in self._doc.ledger.states:
            return None
        record = await self._authorize(id, parsed)
        if parsed.historical:
            revision = await self._historical_revision(id, parsed)
            entry = self._content_at(self._doc.ledger, id, revision)
            if entry is None:
                raise _error("MVU_HISTORY_UNAVAILABLE", "that version is not recorded", 404)
            return self._record_json(record, parsed, content=entry.content, revision=revision)
        return self._record_json(record, parsed, content=record.content)

    def _legacy_refusal(self, state_id: str) -> None:
        if state_id in self._legacy and state_id not in self._doc.ledger.states:
            raise _error(
                "MVU_MIGRATION_REQUIRED",
                "this resource lives in the old mvu-state.json and is read-only",
                409,
            )

    async def update(
        self,
        *,
        id: str,
        content: Mapping[str, Any],
        expected_revision: int,
        operation_id: str,
        scope: Mapping[str, Any],
    ) -> dict[str, Any]:
        """CAS edit of the current content (spec/MVU.md ``update``)."""
        parsed = parse_scope(scope)
        self._legacy_refusal(id)
        if parsed.historical:
            raise _error("MVU_HISTORICAL_READ_ONLY", "historical scopes cannot be edited", 409)
        if not _is_variables(content):
            raise _error("MVU_CONTENT_INVALID", "content must be a variables object with stat_data")
        if not _is_int(expected_revision):
            raise _error("MVU_CONTENT_INVALID", "expectedRevision must be an integer")
        _check_operation_id(operation_id)
        async with self._lock:
            record = await self._authorize(id, parsed)
            owner = self._session_of(self._doc, id)
            agents = self._agents()
            if owner is not None and agents is not None and agents.is_running(owner):
                raise _error("MVU_TURN_RUNNING", "the session is running a turn", 409)
            candidate = await asyncio.to_thread(self._candidate, record, dict(content))
            doc = self._doc
            try:
                ledger, receipt = await _off(
                    mvu_ledger.update,
                    doc.ledger,
                    id,
                    candidate,
                    expected_revision=expected_revision,
                    operation_id=operation_id,
                    now=self._clock(),
                    kind="edit",
                    source={"sessionId": parsed.session_id} if parsed.session_id else None,
                )
            except MvuError as exc:
                raise _ledger_error(exc) from None
            if ledger is not doc.ledger:
                coordinates = doc.coordinates
                if receipt.changed:
                    at = 0
                    if owner is not None:
                        _, at, _ = await self._header(owner)
                    coordinates = {
                        **coordinates,
                        id: [*coordinates.get(id, []), (receipt.revision, at)],
                    }
                try:
                    await self._commit(self._with(doc, ledger=ledger, coordinates=coordinates))
                except LedgerError as exc:
                    raise _ledger_error(exc) from None
                if receipt.changed:
                    fact = {
                        "id": id,
                        "phase": "applied",
                        "detail": "state-committed",
                        "revision": receipt.revision,
                        "turnKind": "edit",
                    }
                    if parsed.session_id:
                        fact["sessionId"] = parsed.session_id
                    await self._record_fact(fact)
            current = self._doc.ledger.states[id]
            return {
                "receipt": {
                    "operationId": receipt.operation_id,
                    "id": id,
                    "revisionBefore": receipt.revision_before,
                    "revision": receipt.revision,
                    "changed": receipt.changed,
                    "at": receipt.at,
                },
                "resource": self._record_json(current, parsed, content=current.content),
            }

    @staticmethod
    def _candidate(record: StateRecord, content: dict[str, Any]) -> dict[str, Any]:
        """The edited variables as the source schema accepts them (transformed once).

        "source schema cannot be removed/replaced": the current ``mvu_schema`` descriptor and
        the generated native ``schema`` are kept; a different one is refused.
        """
        current = record.content
        out = dict(content)
        for key in ("mvu_schema", "schema"):
            if key in current:
                if key in out and out[key] != current[key]:
                    raise _error("MVU_SCHEMA_OWNED", f"{key} belongs to the source; keep it")
                out[key] = current[key]
            elif key in out and key == "mvu_schema":
                raise _error("MVU_SCHEMA_OWNED", "a schema cannot be added by an edit")
        descriptor = out.get("mvu_schema")
        try:
            if isinstance(descriptor, dict):
                validated = initialize_with_schema(out["stat_data"], descriptor)
                out["stat_data"] = validated["stat_data"]
            check_variables(out)
        except MvuError as exc:
            raise _error(exc.code, exc.message) from None
        return out

    async def copy(self, *, id: str, new_id: str, scope: Mapping[str, Any]) -> dict[str, Any]:
        """A new manual resource with the same content and access scope (spec/MVU.md
        ``copy``); existing ids are rejected."""
        parsed = parse_scope(scope)
        self._legacy_refusal(id)
        if not _is_id(new_id):
            raise _error("MVU_ID_INVALID", "newId must be 1-200 characters")
        async with self._lock:
            record = await self._authorize(id, parsed)
            doc = self._doc
            if new_id in doc.ledger.states or new_id in self._legacy or new_id in doc.templates:
                raise _error("MVU_ID_EXISTS", "that id is taken", 409)
            now = self._clock()
            copied = StateRecord(
                id=new_id,
                template_id=record.template_id,
                instance=None,
                content=record.content,
                content_sha256=record.content_sha256,
                revision=1,
                created_at=now,
                updated_at=now,
                inherited_from={"id": id, "revision": record.revision, "copy": True},
            )
            entry = HistoryEntry(
                1,
                now,
                "initial",
                record.content,
                record.content_sha256,
                None,
                None,
                source={"copiedFrom": id, "revision": record.revision},
            )
            ledger = msgspec.structs.replace(
                doc.ledger,
                states={**doc.ledger.states, new_id: copied},
                history={**doc.ledger.history, new_id: [entry]},
            )
            owners = dict(doc.owners)
            owner = self._session_of(doc, id)
            if owner is not None:
                owners[new_id] = owner
            coordinates = {**doc.coordinates, new_id: [(1, 0)]}
            try:
                await self._commit(
                    self._with(doc, ledger=ledger, owners=owners, coordinates=coordinates)
                )
            except LedgerError as exc:
                raise _ledger_error(exc) from None
            return self._record_json(copied, parsed, content=copied.content)

    async def history(
        self, *, id: str, scope: Mapping[str, Any], include_before: bool = False
    ) -> JsonList:
        """Versions oldest first (spec/MVU.md ``history``: "source versions and success/failure
        evidence"). Committed versions carry ``committed: true`` and their session coordinate
        ``atEventId``; replies that committed nothing (failed, unchanged, skipped) appear as
        ``committed: false`` rows with the unchanged ``revision``, ``outcome`` and ``code``."""
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
            row["source"] = _detached(entry.source) if entry and entry.source else None
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

    async def facts(self, *, id: str, scope: Mapping[str, Any]) -> JsonList:
        """Body-free observations of ``id`` (spec/MVU.md ``facts``), oldest first."""
        parsed = parse_scope(scope)
        if id not in self._legacy:
            await self._authorize(id, parsed)
        return [dict(row) for row in self._facts if row.get("id") == id]

    async def set_management_mode(
        self,
        *,
        id: str,
        mode: str,
        expected_revision: int,
        operation_id: str,
        scope: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Save the stored preference with CAS and idempotency (spec/MVU.md
        ``setManagementMode``); actual ownership follows the manager registration."""
        parsed = parse_scope(scope)
        self._legacy_refusal(id)
        if mode not in ("native", "managed"):
            raise _error("MVU_MODE_INVALID", "mode must be native or managed")
        _check_operation_id(operation_id)
        async with self._lock:
            record = await self._authorize(id, parsed)
            doc = self._doc
            request = _sha(["mode", id, mode, expected_revision])
            previous = doc.mode_receipts.get(id, {}).get(operation_id)
            if previous is not None:
                if previous.request_sha256 != request:
                    raise _error("MVU_OPERATION_CONFLICT", "operationId reused", 409)
                receipt = previous
            else:
                if expected_revision != record.revision:
                    raise _error(
                        "MVU_REVISION_CONFLICT",
                        f"expected revision {expected_revision}, current is {record.revision}",
                        409,
                    )
                receipt = ModeReceipt(
                    request_sha256=request,
                    state_id=id,
                    mode=mode,
                    revision=record.revision,
                    at=self._clock(),
                )
                receipts = {
                    **doc.mode_receipts,
                    id: {**doc.mode_receipts.get(id, {}), operation_id: receipt},
                }
                try:
                    await self._commit(
                        self._with(
                            doc,
                            stored_modes={**doc.stored_modes, id: mode},
                            mode_receipts=receipts,
                        )
                    )
                except LedgerError as exc:
                    raise _ledger_error(exc) from None
            return {
                "operationId": operation_id,
                "id": id,
                "revision": receipt.revision,
                "managementMode": self._actual_mode(),
                "storedManagementMode": receipt.mode,
            }

    async def register_command_processor(
        self, spec: CommandProcessorSpec
    ) -> CommandProcessorRegistration:
        """Make ``spec.source`` the effective processor of ``spec.id`` (spec/MVU.md
        ``registerCommandProcessor``). A newer registration replaces an older one; the
        returned disposer removes this registration only."""
        if self._closed:
            raise _error("MVU_UNAVAILABLE", "the MVU service is unloading", 503)
        if not _is_id(spec.id):
            raise _error("MVU_ID_INVALID", "a processor needs a resource id")
        fn = spec.source
        if not _is_sync_callable(fn):
            raise _error("MVU_PROCESSOR_INVALID", "a processor is a synchronous callable")
        module = getattr(fn, "__module__", None) or "?"
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        source = f"{module}:{name}"
        code = getattr(fn, "__code__", None)
        digest = hashlib.sha256(
            source.encode() + (code.co_code if code is not None else b"")
        ).hexdigest()
        self._generation += 1
        generation = next(self._counter)
        receipt = CommandProcessorReceipt(
            registration_id=f"mvu-processor-{generation}-{secrets.token_hex(4)}",
            source=source,
            sha256=digest,
        )
        processor = _Processor(spec.id, fn, generation, receipt)
        self._processors[spec.id] = processor

        async def dispose() -> None:
            if self._processors.get(spec.id) is processor:
                del self._processors[spec.id]
                self._generation += 1

        return CommandProcessorRegistration(receipt, dispose)

    def register_usage(
        self, handler: UsageHandler, *, provider_id: str | None = None
    ) -> Callable[[], None]:
        """Register a usage decision handler (spec/MVU.md ``registerUsage``); a handler with
        ``provider_id='dsh-memory-manager'`` makes execution managed until disposed."""
        token = next(self._counter)
        self._usage[token] = (handler, provider_id)
        self._generation += 1
        self._usage_generation += 1

        def dispose() -> None:
            if self._usage.pop(token, None) is not None:
                self._generation += 1
                self._usage_generation += 1

        return dispose

    def observe(self, listener: FactListener) -> Callable[[], None]:
        """Receive every fact as it is recorded (spec/MVU.md ``observe``)."""
        token = next(self._counter)
        self._observers[token] = listener
        return lambda: self._observers.pop(token, None) and None

    def validate_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Check a ``type:'mvu-state'`` configuration (spec/MVU.md ``validateConfig``)."""
        errors: list[str] = []
        if config.get("type") != RESOURCE_TYPE:
            errors.append("type must be 'mvu-state'")
        unknown = set(config) - {"type", "store", "retrieve"}
        errors.extend(f"unknown field {key!r}" for key in sorted(unknown))
        for part, trigger, chain in (
            ("store", STORE_TRIGGER, STORE_CHAIN),
            ("retrieve", RETRIEVE_TRIGGER, RETRIEVE_CHAIN),
        ):
            value = config.get(part)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                errors.append(f"{part} must be an object")
                continue
            extra = set(value) - {"trigger", "strategy"}
            errors.extend(f"{part}: unsupported parameter {key!r}" for key in sorted(extra))
            if value.get("trigger", trigger) != trigger:
                errors.append(f"{part}.trigger must be {trigger!r}")
            strategy = value.get("strategy", list(chain))
            if not isinstance(strategy, list):
                errors.append(f"{part}.strategy must be an array")
                continue
            names: list[Any] = []
            for step in strategy:
                if isinstance(step, Mapping):
                    if set(step) != {"operation"}:
                        errors.append(f"{part}.strategy: only {{operation}} entries")
                    names.append(step.get("operation"))
                else:
                    names.append(step)
            if names and tuple(names) != chain:
                errors.append(f"{part}.strategy must be {list(chain)}")
        return {"ok": not errors, "errors": errors}

    async def discover(
        self, *, definition: Mapping[str, Any], session_id: str | None = None
    ) -> dict[str, Any] | None:
        """Trusted discovery (spec/MVU.md ``discover``): a stable template identity with a
        native default, and an explicit session grant.

        * ``{characterId}``: the card's template (``None`` without MVU data). A card applies to
          the sessions that bind it; ``granted`` says whether ``session_id`` does.
        * ``{id, initial | characterId, managementMode?, sharing?}``: a host-defined template
          (the shape of a configured ``mvu.resources[]`` entry). ``session_id`` grants it to
          that session (persisted); without one it grants nothing. A configured id is refused.
        """
        if "id" in definition:
            return await self._discover_definition(definition, session_id)
        character_id = definition.get("characterId")
        if not isinstance(character_id, str) or not character_id:
            raise _error("MVU_DEFINITION_INVALID", "discover takes {characterId} or {id, ...}")
        template = await self._template(character_id)
        if template is None:
            return None
        stored = await self._store_template(template)
        out: dict[str, Any] = {
            "id": template.id,
            "characterId": character_id,
            "versionKey": template.version_key,
            "storedManagementMode": stored.management_mode,
            "managementMode": self._actual_mode(),
            "sourceError": template.source_error,
        }
        if session_id is not None:
            selection = await pending_selection(self._selections, session_id, self._sessions())
            out["sessionId"] = session_id
            out["granted"] = selection.character_card_id == character_id
        return out

    async def _store_template(self, template: Template) -> TemplateRecord:
        async with self._lock:
            doc = self._doc
            stored = doc.templates.get(template.id)
            if stored is None:
                stored = TemplateRecord(
                    id=template.id,
                    character_id=template.character_id,
                    version_key=template.version_key,
                    discovered_at=self._clock(),
                    management_mode=template.management_mode,
                )
                try:
                    await self._commit(
                        self._with(doc, templates={**doc.templates, template.id: stored})
                    )
                except LedgerError as exc:
                    raise _ledger_error(exc) from None
            return stored

    async def _discover_definition(
        self, definition: Mapping[str, Any], session_id: str | None
    ) -> dict[str, Any]:
        raw = dict(definition)
        if "sessionIds" in raw:
            raise _error("MVU_DEFINITION_INVALID", "grants come from sessionId, not sessionIds")
        resource_id = raw.get("id")
        if any(r.id == resource_id for r in self._explicit):
            raise _error("MVU_ID_EXISTS", "that id is configured by the host", 409)
        if session_id is not None:
            await self._header(session_id)
        async with self._lock:
            doc = self._doc
            previous = doc.discovered.get(str(resource_id))
            granted = list(previous.get("sessionIds", [])) if previous is not None else []
            if (
                previous is not None
                and {k: v for k, v in previous.items() if k != "sessionIds"} != raw
            ):
                raise _error("MVU_DEFINITION_CONFLICT", "that id has another definition", 409)
            if session_id is not None and session_id not in granted:
                granted.append(session_id)
            try:
                (resource,) = parse_explicit(
                    {"resources": [{**raw, "sessionIds": granted or ["-"]}]}
                )
            except ValueError as exc:
                raise _error("MVU_DEFINITION_INVALID", str(exc)) from None
            stored = {**raw, "sessionIds": granted}
            if previous != stored:
                try:
                    await self._commit(
                        self._with(doc, discovered={**doc.discovered, resource.id: stored})
                    )
                except LedgerError as exc:
                    raise _ledger_error(exc) from None
        card = await self._template(resource.character_id) if resource.character_id else None
        template = explicit_template(resource, card)
        record = await self._store_template(template)
        out: dict[str, Any] = {
            "id": template.id,
            "characterId": template.character_id,
            "versionKey": template.version_key,
            "storedManagementMode": record.management_mode,
            "managementMode": self._actual_mode(),
            "sourceError": template.source_error,
            "sessionIds": granted,
        }
        if session_id is not None:
            out["sessionId"] = session_id
            out["granted"] = True
        return out

    def _resources_explicit(self) -> tuple[ExplicitResource, ...]:
        """Configured resources plus definitions granted through ``discover``."""
        discovered = [d for d in self._doc.discovered.values() if d.get("sessionIds")]
        if not discovered:
            return self._explicit
        return self._explicit + tuple(parse_explicit({"resources": discovered}))

    # ------------------------------------------------------------------ seeds

    async def capture_session_seed(
        self,
        *,
        session_id: str,
        kind: SeedKind,
        at_event_id: int,
        prefix_end_event_id: int | None = None,
        target_session_id: str | None = None,
    ) -> str | None:
        """Freeze a source state for a new session (spec/MVU.md ``captureSessionSeed``).

        * ``fork``: the version current at ``at_event_id``;
        * ``reply-swipe``: ``at_event_id`` is the replaced reply; its turn's pre-turn checkpoint;
        * ``request-retry``: ``at_event_id`` is the durable user event of the aborted turn; its
          turn's checkpoint.

        Swipes and retries need ``prefix_end_event_id`` (a later one: the target is a fork
        there) or ``target_session_id`` (a root one: a preassigned empty session).
        """
        if kind not in ("fork", "reply-swipe", "request-retry"):
            raise _error("MVU_SEED_INVALID", "kind is fork, reply-swipe or request-retry")
        if not _is_int(at_event_id) or at_event_id < 0:
            raise _error("MVU_SEED_INVALID", "atEventId must be a non-negative integer")
        if kind != "fork" and prefix_end_event_id is None and target_session_id is None:
            raise _error(
                "MVU_SEED_INVALID", "swipes and retries need prefixEndEventId or targetSessionId"
            )
        async with self._lock:
            state_id = await self._ensure_instance(session_id)
            if state_id is None:
                return None
            await self._reconcile_locked(session_id)
            doc = self._doc
            if kind == "fork":
                revision = self._revision_at(doc, state_id, at_event_id)
            else:
                event = await self._event_at(session_id, at_event_id)
                data = event.data if event is not None else None
                wanted = AssistantMessage if kind == "reply-swipe" else UserMessage
                if not isinstance(data, wanted) or data.turn is None:
                    raise _error(
                        "MVU_SEED_EVIDENCE_MISSING",
                        f"atEventId is not the {'reply' if kind == 'reply-swipe' else 'request'}"
                        " of a turn",
                        409,
                    )
                checkpoint = doc.checkpoints.get(session_id, {}).get(str(data.turn))
                if checkpoint is None or checkpoint.state_id != state_id:
                    raise _error("MVU_SEED_EVIDENCE_MISSING", "that turn has no checkpoint", 409)
                revision = checkpoint.revision
            if revision is None:
                raise _error("MVU_SEED_EVIDENCE_MISSING", "no version at that coordinate", 409)
            waiting = sum(1 for p in doc.pending_seeds.values() if p.installed_in is None)
            if waiting >= MAX_PENDING_SEEDS:
                raise _error(
                    "MVU_SEED_LIMIT",
                    f"{MAX_PENDING_SEEDS} captured seeds await installation; install them first",
                    409,
                )
            ticket = f"mvu-seed-{secrets.token_hex(16)}"
            seed = mvu_ledger.capture_seed(doc.ledger, state_id, ticket=ticket, revision=revision)
            if seed is None:
                raise _error("MVU_SEED_EVIDENCE_MISSING", "that version is not recorded", 409)
            record = doc.ledger.states[state_id]
            pending = PendingSeed(
                seed=seed,
                kind=kind,
                source_session_id=session_id,
                template_id=record.template_id,
                at_event_id=at_event_id,
                prefix_end_event_id=prefix_end_event_id,
                target_session_id=target_session_id,
            )
            try:
                await self._commit(
                    self._with(doc, pending_seeds={**doc.pending_seeds, ticket: pending})
                )
            except LedgerError as exc:
                raise _ledger_error(exc) from None
            return ticket

    async def install_session_seed(self, *, ticket: str, session_id: str) -> dict[str, Any]:
        """Install a captured seed into the created session (spec/MVU.md
        ``installSessionSeed``): the child's identity and parent are checked; the same
        ticket/target is idempotent and a conflicting use is rejected."""
        async with self._lock:
            doc = self._doc
            pending = doc.pending_seeds.get(ticket)
            if pending is None:
                raise _error("MVU_SEED_NOT_FOUND", "unknown seed ticket", 404)
            if pending.installed_in is not None and pending.installed_in != session_id:
                raise _error("MVU_SEED_CONFLICT", "the ticket was installed elsewhere", 409)
            if pending.target_session_id is not None and pending.target_session_id != session_id:
                raise _error("MVU_SEED_CONFLICT", "the ticket names another target", 409)
            header, last_seq, _ = await self._header(session_id)
            if pending.installed_in == session_id:
                # Idempotent replay: the installed instance, whatever happened to it since.
                child_id = doc.ledger.seeds.get(ticket)
                child = doc.ledger.states.get(child_id) if child_id is not None else None
                if child is None:
                    raise _error("MVU_SEED_CONFLICT", "the installed instance is gone", 409)
                return self._record_json(
                    child, _Scope(session_id, None, None), content=child.content
                )
            cut = pending.prefix_end_event_id
            if pending.kind == "fork":
                cut = pending.at_event_id
            if pending.target_session_id is None:
                parent = header.parent
                if (
                    parent is None
                    or parent.session_id != pending.source_session_id
                    or (parent.at_event_id != cut)
                ):
                    raise _error(
                        "MVU_SEED_TARGET_INVALID", "the session is not the seed's fork target", 409
                    )
            elif header.parent is not None or await self._has_turns(session_id):
                raise _error("MVU_SEED_TARGET_INVALID", "a root target must be a new session", 409)
            identity = InstanceIdentity(pending.template_id, session_id, header.created_at)
            try:
                ledger, record = await _off(
                    mvu_ledger.install_seed, doc.ledger, pending.seed, identity, now=self._clock()
                )
            except MvuError as exc:
                raise _ledger_error(exc) from None
            if ledger is not doc.ledger:
                source_state = pending.seed.source_id
                inherited = [
                    (r, a)
                    for r, a in doc.coordinates.get(source_state, [])
                    if r <= pending.seed.revision
                ]
                boundary = header.seed_length
                session = doc.sessions.get(session_id) or SessionRecord(
                    created_at=header.created_at,
                    scanned_through=boundary if header.parent is not None else last_seq,
                    seed_length=boundary,
                )
                if record.id not in session.state_ids:
                    session = msgspec.structs.replace(
                        session, state_ids=[*session.state_ids, record.id]
                    )
                new = self._with(
                    doc,
                    ledger=ledger,
                    coordinates={
                        **doc.coordinates,
                        record.id: [*inherited, (record.revision, boundary)],
                    },
                    sessions={**doc.sessions, session_id: session},
                    pending_seeds={
                        **doc.pending_seeds,
                        # Installed: keep the ticket's identity, drop the frozen copy.
                        ticket: msgspec.structs.replace(
                            pending,
                            installed_in=session_id,
                            seed=msgspec.structs.replace(pending.seed, content={}, history=[]),
                        ),
                    },
                )
                try:
                    await self._commit(new)
                except LedgerError as exc:
                    raise _ledger_error(exc) from None
            scope = _Scope(session_id, None, None)
            return self._record_json(record, scope, content=record.content)

    # ------------------------------------------------------------------ prompt use

    async def resolve_prompt_dependency(
        self,
        *,
        scope: Mapping[str, Any],
        event: Mapping[str, Any],
        id: str | None = None,
    ) -> dict[str, Any] | None:
        """Whole variables for prompt use (spec/MVU.md "Prompt Template dependency reads").

        ``event.turn`` reads that turn's durable pre-turn checkpoint (frozen now if this is the
        first read of the turn). Every registered usage handler must allow the read, or the
        result is ``None``. ``checkCurrent()`` is synchronous and turns false when the state
        revision, the active instance or any registration changes, or the service unloads.
        """
        parsed = parse_scope(scope, require_session=True)
        if parsed.historical:
            raise _error("MVU_SCOPE_INVALID", "prompt reads take a current scope")
        if not isinstance(event, Mapping):
            raise _error("MVU_SCOPE_INVALID", "event must be an object")
        session_id = parsed.session_id
        assert session_id is not None
        turn = event.get("turn")
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
            raise _error("MVU_SCOPE_INVALID", "event.turn must be an integer")
        async with self._lock:
            active = await self._ensure_instance(session_id)
        state_id = id if id is not None else active
        if state_id is None or state_id not in self._doc.ledger.states:
            return None
        record = await self._authorize(state_id, parsed)
        for handler, _provider in list(self._usage.values()):
            decision = await handler(
                {
                    "id": state_id,
                    "trigger": RETRIEVE_TRIGGER,
                    "scope": dict(scope),
                    "event": {k: v for k, v in event.items() if k != "text"},
                }
            )
            if decision is None or decision.get("enabled") is not True:
                return None
        content: dict[str, Any] = record.content
        revision = record.revision
        if turn is not None and state_id == active:
            checkpoint = await self.checkpoint(session_id, turn)
            if checkpoint is not None:
                revision = int(checkpoint["revision"])
                entry = self._content_at(self._doc.ledger, state_id, revision)
                if entry is None:
                    return None
                content = entry.content
        generation = self._generation
        current_revision = self._doc.ledger.states[state_id].revision

        def check_current() -> bool:
            state = self._doc.ledger.states.get(state_id)
            return (
                not self._closed
                and self._generation == generation
                and state is not None
                and state.revision == current_revision
            )

        return {
            "id": state_id,
            "adapterId": "tavern.mvu",
            "content": _detached(content),
            "revision": revision,
            "configRevision": None,
            "checkCurrent": check_current,
        }

    def get_management_defaults(
        self, *, id: str, scope: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """Source defaults for a manager (spec/MVU.md ``getManagementDefaults``)."""
        parse_scope(scope)
        record = self._doc.ledger.states.get(id)
        if record is None:
            return None
        generation = self._generation
        revision = record.revision

        def check_current() -> bool:
            state = self._doc.ledger.states.get(id)
            return (
                not self._closed
                and self._generation == generation
                and state is not None
                and state.revision == revision
            )

        return {
            "protocolVersion": 1,
            "revision": revision,
            "configuration": {
                "type": RESOURCE_TYPE,
                "store": {"trigger": STORE_TRIGGER, "strategy": list(STORE_CHAIN)},
                "retrieve": {"trigger": RETRIEVE_TRIGGER, "strategy": list(RETRIEVE_CHAIN)},
            },
            "scopePolicy": "source-bound",
            "checkCurrent": check_current,
        }

    # ------------------------------------------------------------------ snapshot (HTTP)

    async def snapshot(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        """``GET /mvu/snapshot``: the version recorded at a durable assistant message (or turn
        end) of a session — ``{version:1, status, scope, revision, currentRevision, variables,
        resourceId}``."""
        if not isinstance(scope, Mapping):
            raise _error("MVU_SCOPE_INVALID", "scope must be an object")
        mode = scope.get("mode")
        if mode is not None:
            raise _error(
                "MVU_SCOPE_UNSUPPORTED", "greeting/initial snapshot modes are not available yet"
            )
        session_id = scope.get("sessionId")
        end = scope.get("endEventId")
        if not isinstance(session_id, str) or not session_id:
            raise _error("MVU_SCOPE_INVALID", "scope needs sessionId")
        if isinstance(end, bool) or not isinstance(end, int) or end < 1:
            raise _error("MVU_SCOPE_INVALID", "scope needs a positive endEventId")
        version = scope.get("sessionFormatVersion")
        if version is not None and version != SESSION_FORMAT_VERSION:
            raise _error(
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
            raise _error("MVU_SCOPE_INVALID", f"unknown scope field {sorted(unknown)[0]!r}")
        await self._header(session_id)
        event = await self._event_at(session_id, end)
        if event is None or not isinstance(event.data, (AssistantMessage, TurnEnd)):
            raise _error("MVU_SCOPE_INVALID", "endEventId is not a durable reply coordinate")
        async with self._lock:
            state_id = await self._ensure_instance(session_id)
        if state_id is None:
            raise _error("MVU_NOT_FOUND", "the session has no MVU state", 404)
        record = self._doc.ledger.states[state_id]
        revision = self._revision_at(self._doc, state_id, end)
        entry = self._content_at(self._doc.ledger, state_id, revision) if revision else None
        if entry is None:
            raise _error("MVU_HISTORY_UNAVAILABLE", "no recorded version at this coordinate", 404)
        return {
            "version": 1,
            "status": "ready",
            "scope": dict(scope),
            "revision": entry.revision,
            "currentRevision": record.revision,
            "variables": _detached(entry.content),
            "resourceId": state_id,
        }


__all__ = [
    "LOCAL_AUTHORITY",
    "MANAGER_PROVIDER_ID",
    "RESOURCE_TYPE",
    "MvuService",
    "character_mvu_id",
    "parse_scope",
    "utc_now",
]
