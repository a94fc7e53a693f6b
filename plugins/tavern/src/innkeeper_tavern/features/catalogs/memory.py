"""``tavernMemorySources``: `docs/contract/catalogs.md#bound-resources`.

Adapters: ``world-book`` (standalone books and cards' embedded books), ``template`` (session
templates, :mod:`.template_source`; inline preset prompts are not resources) and ``mvu`` (MVU
state instances, present while ``tavernMvu`` is).

- ``list(adapter_id)`` / ``read(adapter_id, id, scope?)``: global management reads (``read``
  carries content; ``list`` metadata only); ``read`` with a session ``scope`` also reads a book
  bound only in that session (an opening world book).
- ``list_bound(scope={sessionId, authority:'local'})``: the resources the session actually binds,
  as a deeply immutable ``{items, revision, checkCurrent}`` — the current character's embedded
  book, the effectively selected standalone books (session, persona, preset and card relations in
  the loader's order, each once) and the existing MVU instances of the session whose template is
  the current character's, plus the session's opening world books for its current card and
  greeting (``type: 'session-opening-world-book'``, never visible to another session), and the
  session template its configuration was applied from while it still holds
  (``type: 'session-template'``). Items
  are ``{id, adapterId, name, type, revision, managementMode, binding}`` (+
  ``enabled``/``sourceError`` where they apply): no content, no variables. Nothing is scanned
  beyond the selected ids, nothing is activated or allocated.

``checkCurrent()`` (synchronous) is revoked by the session's selection generation, the session
instance (a new agent), a change of any listed source (its index fingerprint; the relation files'
and the MVU document's revisions) and unload.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Protocol, TypeAlias

import msgspec

from innkeeper_hostapi import HttpProblem
from innkeeper_hostapi.catalogs import MEMORY_SOURCES_PROTOCOL, CheckCurrent, frozen_json
from innkeeper_hostapi.sessions import SessionController
from innkeeper_tavern.features.mvu_service.service import MvuService
from innkeeper_tavern.features.prompt_profile.adapters import compose_world_books, embedded_book_id
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection
from innkeeper_tavern.state.session_bindings.model import Selection
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

WORLD_BOOK_ADAPTER: Final = "world-book"
MVU_ADAPTER: Final = "mvu"
MEMORY_SOURCE_INVALID: Final = "MEMORY_SOURCE_INVALID"
MEMORY_SOURCE_NOT_FOUND: Final = "MEMORY_SOURCE_NOT_FOUND"
MEMORY_SOURCES_UNAVAILABLE: Final = "MEMORY_SOURCES_UNAVAILABLE"

#: Aliases (the service has a method named ``list``).
Items: TypeAlias = list[dict[str, Any]]
Versions: TypeAlias = list[Any]
Ids: TypeAlias = list[str]


class BoundSource(Protocol):
    """More session-bound world books (the opening world books): metadata items of the
    session's current ones, and a revision that changes whenever they may."""

    async def bound_items(self, session_id: str, selection: Selection) -> Items: ...

    async def read_bound(
        self, session_id: str, selection: Selection, resource_id: str
    ) -> dict[str, Any] | None: ...

    @property
    def revision(self) -> Any: ...


class MemoryAdapter(Protocol):
    """A further adapter (the session templates): its global list/read, its items bound to a
    session and what a lease on those items compares."""

    @property
    def adapter_id(self) -> str: ...

    async def list(self) -> Items: ...

    async def read(self, resource_id: str) -> dict[str, Any] | None: ...

    async def bound_items(self, session_id: str, selection: Selection) -> Items: ...

    def version(self, session_id: str) -> Any: ...


def frozen_items(items: Items) -> tuple[Mapping[str, Any], ...]:
    """Deeply immutable items."""
    return tuple(frozen_json(item) for item in items)


class MemorySources:
    """The ``tavernMemorySources`` service of one plugin load."""

    protocol_version: Final = MEMORY_SOURCES_PROTOCOL

    def __init__(
        self,
        resources: TavernResources,
        selections: SessionSelectionStore,
        sessions: Callable[[], SessionController | None],
        mvu: Callable[[], MvuService | None],
        agents: Callable[[str], int],
    ) -> None:
        self._resources = resources
        self._selections = selections
        self._sessions = sessions
        self._mvu = mvu
        self._agents = agents
        self._closed = False
        #: Session-bound world books beyond the selection's (registered by their owners).
        self.bound_sources: list[BoundSource] = []
        #: Adapters beyond world books and MVU, by id (``template``).
        self.extra_adapters: dict[str, MemoryAdapter] = {}

    def close(self) -> None:
        """Unload: later calls fail, every lease is revoked."""
        self._closed = True

    def _alive(self) -> None:
        if self._closed:
            raise HttpProblem(503, MEMORY_SOURCES_UNAVAILABLE, "memory sources were unloaded")

    def adapters(self) -> Sequence[str]:
        """``world-book`` always, the registered extra adapters (``template``), and ``mvu``
        while the MVU service is present."""
        own = (WORLD_BOOK_ADAPTER, *self.extra_adapters)
        return (*own, MVU_ADAPTER) if self._mvu() else own

    def _adapter(self, adapter_id: object) -> str:
        if adapter_id not in self.adapters():
            raise HttpProblem(
                400, MEMORY_SOURCE_INVALID, f"adapterId must be one of {', '.join(self.adapters())}"
            )
        return str(adapter_id)

    # ------------------------------------------------------------------ management

    async def list(self, *, adapter_id: str) -> Sequence[Mapping[str, Any]]:
        """Every global resource of one adapter, metadata only."""
        self._alive()
        adapter = self._adapter(adapter_id)
        if adapter in self.extra_adapters:
            return frozen_items(await self.extra_adapters[adapter].list())
        if adapter == WORLD_BOOK_ADAPTER:
            entries = sorted(self._resources.world_books.entries(), key=lambda e: e.id)
            return frozen_items([self._book_item(e.id, e.name, e.sha256, None) for e in entries])
        mvu = self._mvu()
        records = await mvu.list(scope={"authority": "local"}) if mvu else []
        return frozen_items([_mvu_item(r, None) for r in records])

    async def read(self, *, adapter_id: str, id: str, scope: object = None) -> Mapping[str, Any]:
        """One global resource with its content; with a session ``scope`` also a book bound
        only in that session (an opening world book of its current card and greeting)."""
        self._alive()
        adapter = self._adapter(adapter_id)
        if adapter in self.extra_adapters:
            extra = await self.extra_adapters[adapter].read(id)
            if extra is None:
                raise HttpProblem(404, MEMORY_SOURCE_NOT_FOUND, f"no such {adapter} resource")
            return frozen_items([extra])[0]
        if adapter == WORLD_BOOK_ADAPTER and scope is not None:
            session_id = self._scope_session(scope)
            sessions = self._sessions()
            selection = await pending_selection(self._selections, session_id, sessions)
            for bound in list(self.bound_sources):
                found = await bound.read_bound(session_id, selection, id)
                if found is not None:
                    return frozen_items([found])[0]
        if adapter == WORLD_BOOK_ADAPTER:
            entry = self._resources.world_books.entry(id)
            if entry is None:
                raise HttpProblem(404, MEMORY_SOURCE_NOT_FOUND, "no such world book")
            record = await self._resources.world_books.get(id)
            item = dict(self._book_item(id, entry.name, entry.sha256, None))
            item["content"] = msgspec.to_builtins(record.body)
            return frozen_items([item])[0]
        mvu = self._mvu()
        found = await mvu.read(id=id, scope={"authority": "local"}) if mvu else None
        if found is None:
            raise HttpProblem(404, MEMORY_SOURCE_NOT_FOUND, "no such MVU resource")
        return frozen_items([{**_mvu_item(found, None), "content": found.get("content")}])[0]

    # ------------------------------------------------------------------ session view

    async def list_bound(
        self, *, scope: object, adapter_id: str | None = None
    ) -> Mapping[str, Any]:
        """``{items, revision, checkCurrent}`` of the session's bound resources; ``adapter_id``
        narrows the items to that adapter's (the same shape, for a manager that forwards to one
        adapter; the lease is the same)."""
        self._alive()
        only = self._adapter(adapter_id) if adapter_id is not None else None
        session_id = self._scope_session(scope)
        sessions = self._sessions()
        if sessions is None:
            raise HttpProblem(
                503, MEMORY_SOURCES_UNAVAILABLE, "the host sessions service is absent"
            )
        try:
            created_at = (await sessions.inspect(session_id)).header.created_at
        except LookupError:
            raise HttpProblem(404, MEMORY_SOURCE_NOT_FOUND, "session does not exist") from None
        selection = await pending_selection(self._selections, session_id, sessions)
        self._alive()
        items: Items = []
        res = self._resources
        card_id = selection.character_card_id
        card = res.characters.entry(card_id) if card_id is not None else None
        if card is not None and card.summary.get("hasCharacterBook"):
            own = {"sessionId": session_id, "characterId": card.id, "origins": ["embedded"]}
            items.append(
                self._book_item(embedded_book_id(card.id), card.name, card.sha256, own, True)
            )
        books = compose_world_books(
            selection.world_book_ids,
            self._relation("user", selection.user_id),
            self._relation("preset", selection.preset_id),
            self._relation("character", card.id if card is not None else None),
        )
        for book_id in books.effective_ids:
            entry = res.world_books.entry(book_id)
            if entry is None:
                continue
            origins = list(books.binding_sources.get(book_id, ()))
            binding: dict[str, Any] = {"sessionId": session_id, "origins": origins}
            items.append(self._book_item(book_id, entry.name, entry.sha256, binding))
        for bound in list(self.bound_sources):
            items.extend(await bound.bound_items(session_id, selection))
        for extra in list(self.extra_adapters.values()):
            items.extend(await extra.bound_items(session_id, selection))
        items.extend(self._bound_mvu(session_id, card.id if card is not None else None))
        watched = (card_id, books.effective_ids)
        captured = self._versions(session_id, created_at, *watched)
        mvu = self._mvu()
        mvu_doc = mvu.document if mvu is not None else None
        if only is not None:
            items = [item for item in items if item["adapterId"] == only]
        listed = frozen_items(items)
        digest = hashlib.sha256(msgspec.json.encode([captured, items])).hexdigest()[:32]

        def check_current() -> bool:
            if self._closed or self._versions(session_id, created_at, *watched) != captured:
                return False
            current = self._mvu()
            return (current.document if current is not None else None) is mvu_doc

        check: CheckCurrent = check_current
        return MappingProxyType({"items": listed, "revision": digest, "checkCurrent": check})

    @staticmethod
    def _scope_session(scope: object) -> str:
        """The ``sessionId`` of a ``{sessionId, authority:'local'}`` scope (400 otherwise)."""
        if not isinstance(scope, Mapping) or scope.get("authority", "local") != "local":
            raise HttpProblem(400, MEMORY_SOURCE_INVALID, "scope must be {sessionId, authority}")
        session_id = scope.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise HttpProblem(400, MEMORY_SOURCE_INVALID, "scope.sessionId must be a string")
        return session_id

    def _relation(self, kind: Any, owner: str | None) -> Ids:
        if owner is None:
            return []
        try:
            return self._resources.world_book_ids(kind, owner)
        except ResourceError:  # the owner is gone: it binds nothing
            return []

    def _bound_mvu(self, session_id: str, card_id: str | None) -> Items:
        mvu = self._mvu()
        return mvu.bound_items(session_id, card_id) if mvu is not None else []

    def _book_item(
        self,
        book_id: str,
        name: str,
        sha256: str,
        binding: Mapping[str, Any] | None,
        embedded: bool = False,
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": book_id,
            "adapterId": WORLD_BOOK_ADAPTER,
            "name": name,
            "type": "embedded-world-book" if embedded else "world-book",
            "revision": sha256[:32],
            "managementMode": "native",
        }
        if binding is not None:
            item["binding"] = dict(binding)
        return item

    def _versions(
        self, session_id: str, created_at: str, card_id: str | None, book_ids: Sequence[str]
    ) -> Versions:
        """What a bound listing is read from (compared by ``checkCurrent``): the session
        instance, its selection generation, the relation files and the fingerprints of the
        card and of every effectively selected book (a missing one as ``None``)."""
        res = self._resources
        card = res.characters.entry(card_id) if card_id is not None else None
        return [
            created_at,
            self._agents(session_id),
            self._selections.generation(session_id),
            res.bindings.revision,
            res.user_bindings.revision,
            card.sha256 if card is not None else None,
            [getattr(res.world_books.entry(b), "sha256", None) for b in book_ids],
            [bound.revision for bound in self.bound_sources],
            [extra.version(session_id) for extra in self.extra_adapters.values()],
        ]


def _mvu_item(record: Mapping[str, Any], binding: Mapping[str, Any] | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": record["id"],
        "adapterId": MVU_ADAPTER,
        "name": record.get("name"),
        "type": "mvu-state",
        "revision": str(record.get("revision")),
        "managementMode": record.get("managementMode", "native"),
    }
    if "sourceError" in record:
        item["sourceError"] = record["sourceError"]
    if binding is not None:
        item["binding"] = dict(binding)
    return item
