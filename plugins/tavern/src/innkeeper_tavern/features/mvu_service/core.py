"""The shared core of the MVU service: its state, file, facts, session and template lookups,
access checks and the resource record shape (docs/contract/mvu.md#host-service)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import secrets
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from innkeeper_hostapi.mvu import CommandProcessorReceipt, FactListener, UsageHandler
from innkeeper_hostapi.sessions import (
    SessionController,
    SessionEvent,
    SessionHeader,
    SessionNotFound,
    TurnEnd,
)
from innkeeper_tavern.features.mvu_vm import VmPool
from innkeeper_tavern.pure.mvu.ledger import HistoryEntry, InstanceIdentity, Ledger, StateRecord
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.session_bindings import SessionSelectionStore
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection

from .common import (
    LOCAL_AUTHORITY,
    MANAGER_PROVIDER_ID,
    RESOURCE_TYPE,
    AgentsLookup,
    Clock,
    Processor,
    ReplyRun,
    RequestNote,
    Scope,
    SessionsLookup,
    detached,
    event_after,
    log,
    newest_after,
    service_error,
    utc_now,
)
from .leases import LEASE_EXPIRED, LEASE_UNAVAILABLE, LeaseSource, SessionLease
from .store import (
    InstancesFile,
    LegacyResource,
    check_size,
    encode_instances,
    load_facts,
    load_instances,
    load_legacy,
    save_facts,
    save_instances,
    trim_facts,
)
from .templates import ExplicitResource, Template, build_template, explicit_template, parse_explicit


class ServiceCore(ABC):
    """State, persistence, lookups and record shapes shared by every part of
    :class:`~.service.MvuService`.

    The parts call one another only through the abstract methods declared here (each names the
    module that implements it), so every module can be read on its own.
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
        capture_session_lease: LeaseSource | None = None,
    ) -> None:
        self.root = root
        #: ``captureSessionLease(sessionId)`` (:mod:`.leases`); ``None``: writes and seed
        #: operations are denied.
        self.capture_session_lease = capture_session_lease
        self._explicit = tuple(explicit)
        self._resources = resources
        self._selections = selections
        self._sessions = sessions
        self._agents = agents
        self._log = logger or log
        self._clock = clock
        self._lock = asyncio.Lock()
        #: Set by the play workspace: ``await context_lease(session_id)`` is a synchronous
        #: membership check for a play session (``None`` for other sessions), part of every
        #: prompt read's ``checkCurrent``.
        self.context_lease: Callable[[str], Awaitable[Callable[[], bool] | None]] | None = None
        #: Its synchronous form, for ``get_management_defaults``.
        self.context_lease_now: Callable[[str], Callable[[], bool] | None] | None = None
        #: Set by the plugin's composition: ``await consumer_bound(session_id, adapter_id, id)``
        #: says whether that consumer resource (a ``tavern.world-books`` book, a
        #: ``tavern.prompt-templates`` template) is bound to the session. ``None``: no
        #: ``resolvePromptDependency`` caller can be attested, so every one is refused.
        self.consumer_bound: Callable[[str, str, str], Awaitable[bool]] | None = None
        #: Draft openings being installed (:meth:`MvuInstances.install_opening`).
        self._opening_overrides: dict[str, dict[str, Any]] = {}
        #: Answers ``/mvu/snapshot`` in ``greeting`` / ``initial`` mode (set by the openings
        #: package, which holds the play membership checks); ``None``: unsupported.
        self.opening_snapshots: Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]] | None = (
            None
        )
        #: Binds a message scope's ``playthroughId/nodeId/variantId`` to the durable timeline
        #: (set by the openings package; raises ``MvuServiceError``); ``None``: such scopes
        #: are ``MVU_SCOPE_UNSUPPORTED``.
        self.message_membership: Callable[[Mapping[str, Any]], Awaitable[object]] | None = None
        #: Set while a read computes its view (:meth:`_read_view`): commits stay in memory.
        self._previewing = False
        self._doc = InstancesFile()
        self._facts: list[dict[str, Any]] = []
        self._facts_lock = asyncio.Lock()
        #: Request-source placements awaiting their turn's end (:mod:`.request_facts`).
        self._request_notes: dict[tuple[str, int], list[RequestNote]] = {}
        self._legacy: dict[str, LegacyResource] = {}
        self._templates: dict[str, tuple[Any, Template | None]] = {}
        self._processors: dict[str, Processor] = {}
        #: Live VMs of card-declared command processors (:mod:`.processors`).
        self._vms = VmPool()
        self._usage: dict[int, tuple[UsageHandler, str | None]] = {}
        self._observers: dict[int, FactListener] = {}
        self._counter = itertools.count(1)
        #: Bumped by every change that expires leases (processor, usage, unload).
        self._generation = 0
        #: Bumped when usage handlers change (pending decisions are then taken again).
        self._usage_generation = 0
        self._closed = False

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
        self._vms.close()
        self._usage.clear()
        self._observers.clear()

    @property
    def document(self) -> InstancesFile:
        """The committed document (read-only view for tests and tools)."""
        return self._doc

    async def _commit(self, doc: InstancesFile) -> None:
        """Encode, size-check and publish ``doc``; only then make it current."""

        def write() -> None:
            data = encode_instances(doc)
            check_size(data)
            save_instances(self.root, data)

        if not self._previewing:
            await asyncio.to_thread(write)
        self._doc = doc

    @contextlib.asynccontextmanager
    async def _read_view(self, session_id: str | None) -> AsyncIterator[str | None]:
        """Run a read against the instance a first use would allocate, allocating nothing.

        A GET never changes state (issue 19 item 11): the session's instance is planned as its
        first real use (a turn, an update, a seed) would create it, the read sees that plan in
        memory under the lock, and the previous document is restored afterwards; nothing is
        written and no ``instance-created`` fact is recorded. Yields the session's state id.
        """
        async with self._lock:
            saved = self._doc
            self._previewing = True
            try:
                yield None if session_id is None else await self._ensure_instance(session_id)
            finally:
                self._previewing = False
                self._doc = saved

    @staticmethod
    def _with(doc: InstancesFile, **changes: Any) -> InstancesFile:
        return msgspec.structs.replace(doc, **changes)

    async def _record_fact(self, *facts: dict[str, Any]) -> None:
        """Append body-free facts (one file write) and tell observers; a failed save is logged,
        never raised: a committed state change stays committed (docs/contract/mvu.md#facts)."""
        if self._previewing:
            return  # a read's view records nothing
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

    def _controller(self) -> SessionController:
        sessions = self._sessions()
        if sessions is None:
            raise service_error(
                "MVU_SESSIONS_UNAVAILABLE", "the host session controller is absent", 503
            )
        return sessions

    async def _lease(self, session_id: str, *, restore: bool = True) -> SessionLease:
        """Capture the session's lease (before entering the transaction queue: capturing
        awaits host work); ``MVU_SESSION_LEASE_UNAVAILABLE`` without one."""
        source = self.capture_session_lease
        lease = await source(session_id, restore=restore) if source is not None else None
        if lease is None:
            raise service_error(
                LEASE_UNAVAILABLE, "no session lease: writes and seeds are denied", 409
            )
        return lease

    @staticmethod
    def _check_lease(lease: SessionLease, created_at: str | None = None) -> None:
        """Synchronously, after the last await and right before the atomic commit: the lease
        still holds and (given ``created_at``) names the instance's session identity."""
        if not lease.valid() or (created_at is not None and lease.header.created_at != created_at):
            raise service_error(
                LEASE_EXPIRED, "the session changed during the operation; nothing was written", 409
            )

    async def _header(self, session_id: str) -> tuple[SessionHeader, int, bool]:
        try:
            info = await self._controller().inspect(session_id)
        except SessionNotFound:
            raise service_error("MVU_SESSION_NOT_FOUND", "no such session", 404) from None
        return info.header, info.last_seq, info.turn_open

    async def character_template(self, card_id: str) -> Template | None:
        """The card's current initialization template (``None``: no MVU data or no card)."""
        return await self._template(card_id)

    def _source_key(self, card_id: str) -> tuple[Any, ...] | None:
        """The synchronous identity of a card's MVU source: the card file and its linked
        books (``None`` when the card is gone). Any change of those files changes it."""
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
        return (entry.updated_at, entry.sha256, books_key)

    def _read_lease(self, state_id: str, session_id: str | None) -> Callable[[], bool]:
        """The synchronous ``checkCurrent`` of a prompt read of ``state_id``
        (docs/contract/mvu.md#prompt-read-leases): false once the state's revision, any processor or
        usage registration, the owning session's selection or the state's source files (card, linked
        books) change, or the service unloads. The play membership part is added by the caller."""
        generation = self._generation
        record = self._doc.ledger.states.get(state_id)
        revision = record.revision if record is not None else None
        stored = self._doc.templates.get(record.template_id) if record is not None else None
        card_id = stored.character_id if stored is not None else None
        source = self._source_key(card_id) if card_id is not None else None
        selections = self._selections
        selection = selections.generation(session_id) if session_id is not None else None

        def check_current() -> bool:
            state = self._doc.ledger.states.get(state_id)
            return (
                not self._closed
                and self._generation == generation
                and state is not None
                and state.revision == revision
                and (session_id is None or selections.generation(session_id) == selection)
                and (card_id is None or self._source_key(card_id) == source)
            )

        return check_current

    async def _template(self, card_id: str) -> Template | None:
        """The card's template, rebuilt when the card or a linked book changed."""
        key = self._source_key(card_id)
        if key is None:
            return None
        books_key: tuple[tuple[str, str], ...] = key[2]
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
        resource listing it. More than one is ``MVU_AMBIGUOUS``
        (docs/contract/mvu.md#explicit-resources)."""
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
            raise service_error(
                "MVU_AMBIGUOUS", "more than one MVU resource applies to this session", 409
            )
        return (matches[0] if matches else None), selection.character.greeting_index or 0

    def _resources_explicit(self) -> tuple[ExplicitResource, ...]:
        """Configured resources plus definitions granted through ``discover``."""
        discovered = [d for d in self._doc.discovered.values() if d.get("sessionIds")]
        if not discovered:
            return self._explicit
        return self._explicit + tuple(parse_explicit({"resources": discovered}))

    def _may_access(self, doc: InstancesFile, state_id: str, session_id: str) -> bool:
        """Whether ``session_id`` may see ``state_id`` (its own instance or copy, or a shared
        configured resource listing the session)."""
        if self._session_of(doc, state_id) == session_id:
            return True
        return any(r.shared and r.id == state_id and r.matches(session_id) for r in self._explicit)

    async def _events_after(self, session_id: str, after: int) -> list[SessionEvent]:
        """Events with seq > ``after``, oldest first (one pinned snapshot)."""
        out = [event async for event in newest_after(self._controller(), session_id, after)]
        out.reverse()
        return out

    async def _event_at(self, session_id: str, seq: int) -> SessionEvent | None:
        page = await self._controller().page(session_id, before_seq=seq + 1, limit=1)
        if page.events and page.events[0].seq == seq:
            return page.events[0]
        return None

    async def _has_turns(self, session_id: str, after: int = 0) -> bool:
        """Whether a turn of the session ended after seq ``after`` (an open first turn does not
        count: its playthrough has not started yet)."""
        return await event_after(self._controller(), session_id, after, TurnEnd)

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

    def _actual_mode(self) -> str:
        managed = any(p == MANAGER_PROVIDER_ID for _, p in self._usage.values())
        return "managed" if managed else "native"

    def _session_of(self, doc: InstancesFile, state_id: str) -> str | None:
        record = doc.ledger.states.get(state_id)
        if record is not None and record.instance is not None:
            return record.instance.session_id
        return doc.owners.get(state_id)

    def _effective_processor(self, state_id: str, template_id: str) -> Processor | None:
        return self._processors.get(state_id) or self._processors.get(template_id)

    def _card_receipt(self, record: StateRecord) -> CommandProcessorReceipt | None:
        """The receipt of the card declaration initialized for ``record`` (none before its VM
        first initialized; a read never starts a VM)."""
        stored = self._doc.templates.get(record.template_id)
        card_id = stored.character_id if stored is not None else None
        cached = self._templates.get(card_id) if card_id is not None else None
        template = cached[1] if cached is not None else None
        if template is None or template.processor is None:
            return None
        return self._vms.receipt(record.id, template.processor)

    async def _authorize(self, state_id: str, scope: Scope) -> StateRecord:
        """The record of ``state_id`` if ``scope`` may see it (raises otherwise)."""
        doc = self._doc
        record = doc.ledger.states.get(state_id)
        if record is None:
            raise service_error("MVU_NOT_FOUND", "no such MVU resource", 404)
        if scope.session_id is not None:
            if not self._may_access(doc, state_id, scope.session_id):
                raise service_error(
                    "MVU_ACCESS_DENIED", "this session has no access to the resource", 403
                )
            header, _, _ = await self._header(scope.session_id)
            expected = record.instance.session_created_at if record.instance else None
            session = doc.sessions.get(scope.session_id)
            created = expected or (session.created_at if session else header.created_at)
            if header.created_at != created:
                raise service_error(
                    "MVU_SESSION_IDENTITY_CHANGED", "the session identity changed", 409
                )
        return record

    def _legacy_refusal(self, state_id: str) -> None:
        if state_id in self._legacy and state_id not in self._doc.ledger.states:
            raise service_error(
                "MVU_MIGRATION_REQUIRED",
                "this resource lives in the old mvu-state.json and is read-only",
                409,
            )

    def _record_json(
        self,
        record: StateRecord,
        scope: Scope,
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
            out["content"] = detached(content)
        if record.inherited_from is not None:
            out["inheritedFrom"] = dict(record.inherited_from)
        processor = self._effective_processor(record.id, record.template_id)
        receipt = processor.receipt if processor is not None else self._card_receipt(record)
        if receipt is not None:
            out["commandProcessor"] = receipt.to_json()
        return out

    # ------------------------------------------------------------------ implemented by the parts

    @abstractmethod
    async def _ensure_instance(self, session_id: str) -> str | None:
        """The session's active instance, allocated on first use (:mod:`.instances`)."""

    @abstractmethod
    async def _reconcile_locked(self, session_id: str) -> None:
        """Apply the session's completed, unconsidered turns, lock held (:mod:`.turns`)."""

    @abstractmethod
    async def _seed_from_parent(
        self,
        template: Template,
        child: InstanceIdentity,
        parent_id: str,
        at_event_id: int,
        now: str,
    ) -> tuple[Ledger, list[tuple[int, int]]]:
        """Install a fork's instance from its parent's cut, lock held (:mod:`.seeds`)."""

    @abstractmethod
    async def _run_reply(
        self, state_id: str, record: StateRecord, text: str, user_text: str
    ) -> ReplyRun | None:
        """Run a reply through its effective command processor (:mod:`.processors`)."""

    @abstractmethod
    async def checkpoint(
        self, session_id: str, turn: int, claim_seq: int | None = None
    ) -> dict[str, Any] | None:
        """Freeze the pre-turn baseline of ``turn`` (:mod:`.turns`)."""
