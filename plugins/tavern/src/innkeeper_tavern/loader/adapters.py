"""The loader's three adapter slots and the default adapters backed by the resource stores.

`spec/LOADER_CONTRACT.md` "Adapter boundary": one singleton slot each for character, user and
world book; adapters return already-normalized, read-only models; they may read the
conversation text but never write the session or assemble the system prompt; a duplicate
registration fails at once (the host's adapter slots name both owners); a disposer revokes only
its own claim.

"Resource-to-world-book relationships": the loader composes the standalone books in the fixed
order session-explicit, user, preset, character (stable id de-duplication, every binding source
kept) and hands that selection to the world-book adapter; the card's embedded book enters the
same matcher after them.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

import msgspec

from innkeeper_hostapi import AdapterSlot
from innkeeper_tavern.formats.card import CharacterCard, card_world_book
from innkeeper_tavern.formats.errors import FormatError
from innkeeper_tavern.formats.macros import MacroEnv, MacroSession
from innkeeper_tavern.formats.user import UserData
from innkeeper_tavern.formats.worldbook import Position, Role, WorldBook
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.resources.errors import ResourceError
from innkeeper_tavern.resources.kinds import WorldBookDocument
from innkeeper_tavern.resources.library import DocumentLibrary, Record
from innkeeper_tavern.selection.model import Selection
from innkeeper_tavern.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationResult,
    ActivationSettings,
    ActivationSources,
    BookInput,
    BookSource,
    CharacterIdentity,
    HostLimits,
    MatcherCache,
    ScanLimits,
    TimedEffectsState,
    activate,
    audit_books,
)

from . import mvu_macro
from .book_memo import BookMemo
from .book_twins import book_fingerprint, own_book_twin
from .initvar_notice import initvar_entries, unused_initvar
from .limits import AUDIT_MAX_BOOKS, AUDIT_MAX_DECISIONS
from .render import CharacterFields, Diagnostic, LoreEntry, LorePosition, PromptRole, UserFields

__all__ = [
    "CHARACTER_ADAPTER",
    "USER_ADAPTER",
    "WORLD_BOOK_ADAPTER",
    "WORLD_BOOK_ORDER",
    "ActivationInput",
    "AdapterRequest",
    "CharacterAdapter",
    "CharacterResolution",
    "ResolvedCharacter",
    "StoreCharacterAdapter",
    "StoreUserAdapter",
    "StoreWorldBookAdapter",
    "UserAdapter",
    "UserResolution",
    "WorldBookAdapter",
    "WorldBookRequest",
    "WorldBookResolution",
    "WorldBookSelection",
    "compose_world_books",
]

#: `spec/API.md`: ``worldBookSelection.order`` names the fixed composition order.
WORLD_BOOK_ORDER: Final = "session-explicit-then-user-then-preset-then-character"
#: Decoded documents kept by :class:`RecordCache` (keyed by id and content hash).
RECORD_CACHE_SIZE: Final = 64

CHARACTER_NOT_FOUND: Final = "CHARACTER_CARD_NOT_FOUND"
USER_NOT_FOUND: Final = "USER_NOT_FOUND"
WORLD_BOOK_NOT_FOUND: Final = "WORLD_BOOK_NOT_FOUND"
EMBEDDED_WORLD_BOOK_INVALID: Final = "EMBEDDED_WORLD_BOOK_INVALID"
EMBEDDED_WORLD_BOOK_DUPLICATE: Final = "EMBEDDED_WORLD_BOOK_DUPLICATE"

T = TypeVar("T")
BindingSource = Literal["session", "user", "preset", "character"]


# ---------------------------------------------------------------- request / result models


@dataclass(frozen=True, slots=True)
class ActivationInput:
    """`LOADER_CONTRACT.md` "Activation input contract": the read-only activation context.

    ``messages`` are bounded, chronological and de-duplicated by stable id; ``text`` is the
    matcher-compatible conversation text (``conversationText`` derives from it); ``metadata``
    holds counts and the claim seq, never bodies. ``chat_length`` is the timed-effects clock
    (user and assistant messages of the whole chat).
    """

    messages: tuple[ActivationMessage, ...] = ()
    text: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    chat_length: int = 0


@dataclass(frozen=True, slots=True)
class AdapterRequest:
    """What every adapter receives (read-only)."""

    selection: Selection
    session_id: str | None
    activation: ActivationInput
    #: Per-compile context: the macro env, seed, dry-run flag, limits (see the loader).
    context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def conversation_text(self) -> str:
        """Compatibility field derived from ``activation.text`` (not a second state)."""
        return self.activation.text


@dataclass(frozen=True, slots=True)
class ResolvedCharacter:
    """A resolved card: ``revision`` changes whenever the stored card does."""

    id: str
    name: str
    updated_at: str
    card: CharacterCard
    revision: str


@dataclass(frozen=True, slots=True)
class CharacterResolution:
    """The character adapter's answer."""

    character: ResolvedCharacter | None
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True, slots=True)
class UserResolution:
    """The user adapter's answer: strictly ``{id, name, description}``."""

    user: UserFields | None
    updated_at: str | None = None
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True, slots=True)
class WorldBookSelection:
    """The composed standalone-book selection (`spec/API.md` ``worldBookSelection``)."""

    explicit_ids: tuple[str, ...] = ()
    user_bound_ids: tuple[str, ...] = ()
    preset_bound_ids: tuple[str, ...] = ()
    character_bound_ids: tuple[str, ...] = ()
    effective_ids: tuple[str, ...] = ()
    duplicate_ids: tuple[str, ...] = ()
    binding_sources: Mapping[str, tuple[BindingSource, ...]] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        """The ``worldBookSelection`` object of ``/active`` and the audit."""
        return {
            "explicitIds": list(self.explicit_ids),
            "userBoundIds": list(self.user_bound_ids),
            "presetBoundIds": list(self.preset_bound_ids),
            "characterBoundIds": list(self.character_bound_ids),
            "effectiveIds": list(self.effective_ids),
            "duplicateIds": list(self.duplicate_ids),
            "order": WORLD_BOOK_ORDER,
        }


def compose_world_books(
    explicit: tuple[str, ...] | list[str],
    user: tuple[str, ...] | list[str],
    preset: tuple[str, ...] | list[str],
    character: tuple[str, ...] | list[str],
) -> WorldBookSelection:
    """Compose in the fixed order; the same id runs once, every binding source is kept."""
    sources: dict[str, list[BindingSource]] = {}
    duplicates: list[str] = []
    lists: tuple[tuple[BindingSource, tuple[str, ...]], ...] = (
        ("session", tuple(dict.fromkeys(explicit))),
        ("user", tuple(dict.fromkeys(user))),
        ("preset", tuple(dict.fromkeys(preset))),
        ("character", tuple(dict.fromkeys(character))),
    )
    for source, ids in lists:
        for book_id in ids:
            seen = sources.setdefault(book_id, [])
            if seen and book_id not in duplicates:
                duplicates.append(book_id)
            seen.append(source)
    return WorldBookSelection(
        explicit_ids=lists[0][1],
        user_bound_ids=lists[1][1],
        preset_bound_ids=lists[2][1],
        character_bound_ids=lists[3][1],
        effective_ids=tuple(sources),
        duplicate_ids=tuple(duplicates),
        binding_sources={k: tuple(v) for k, v in sources.items()},
    )


@dataclass(frozen=True, slots=True)
class WorldBookRequest(AdapterRequest):
    """The world-book adapter also sees the resolved character, user and composed selection."""

    character: ResolvedCharacter | None = None
    user: UserFields | None = None
    world_books: WorldBookSelection = WorldBookSelection()


@dataclass(frozen=True, slots=True)
class WorldBookResolution:
    """The world-book adapter's answer.

    ``lore_entries`` are activated entries in rank order (``{id, content, position}`` at
    least). The rest is optional evidence: per-book resource summaries, the per-book decision
    audit, the timed-effect state to persist, and an activation summary (counts only).
    """

    lore_entries: tuple[LoreEntry, ...] = ()
    resources: tuple[Mapping[str, Any], ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    books: tuple[Mapping[str, Any], ...] = ()
    timed_state: TimedEffectsState | None = None
    activation: Mapping[str, Any] = field(default_factory=dict)


class CharacterAdapter(Protocol):
    """Resolves the session's character card."""

    async def resolve(self, request: AdapterRequest) -> CharacterResolution:
        """Return the normalized card (or ``None``) and diagnostics."""
        ...


class UserAdapter(Protocol):
    """Resolves the session's user (persona)."""

    async def resolve(self, request: AdapterRequest) -> UserResolution:
        """Return ``{id, name, description}`` (or ``None``) and diagnostics."""
        ...


class WorldBookAdapter(Protocol):
    """Resolves and activates the session's world books."""

    async def resolve(self, request: WorldBookRequest) -> WorldBookResolution:
        """Return activated lore in rank order, resource summaries and diagnostics."""
        ...


#: The three singleton slots (host adapter slots: a second claim fails naming both owners).
CHARACTER_ADAPTER: AdapterSlot[CharacterAdapter] = AdapterSlot("tavern.loader.character")
USER_ADAPTER: AdapterSlot[UserAdapter] = AdapterSlot("tavern.loader.user")
WORLD_BOOK_ADAPTER: AdapterSlot[WorldBookAdapter] = AdapterSlot("tavern.loader.world-book")


# ---------------------------------------------------------------- default adapters


class RecordCache(Generic[T]):
    """Decoded documents by id, valid while the library's index hash is unchanged."""

    def __init__(self, library: DocumentLibrary[T], size: int = RECORD_CACHE_SIZE) -> None:
        self.library = library
        self._size = size
        self._items: collections.OrderedDict[str, tuple[str, Record[T]]] = collections.OrderedDict()

    def revision(self, resource_id: str) -> str | None:
        """The stored document's content hash (``None`` if it does not exist)."""
        entry = self.library.entry(resource_id)
        return None if entry is None else entry.sha256

    async def get(self, resource_id: str) -> tuple[Record[T], str] | None:
        """``(record, revision)`` or ``None`` when the document does not exist."""
        revision = self.revision(resource_id)
        if revision is None:
            return None
        cached = self._items.get(resource_id)
        if cached is not None and cached[0] == revision:
            self._items.move_to_end(resource_id)
            return cached[1], revision
        try:
            record = await self.library.get(resource_id)
        except ResourceError as exc:
            if exc.status == 404:
                return None
            raise
        self._items[resource_id] = (revision, record)
        while len(self._items) > self._size:
            self._items.popitem(last=False)
        return record, revision


class StoreCharacterAdapter:
    """The default character adapter: the card bound in the selection, from the card store."""

    def __init__(self, resources: TavernResources) -> None:
        self.cards: RecordCache[CharacterCard] = RecordCache(resources.characters)

    async def resolve(self, request: AdapterRequest) -> CharacterResolution:
        """Read the selected card (``CHARACTER_CARD_NOT_FOUND`` when it is gone)."""
        card_id = request.selection.character_card_id
        if card_id is None:
            return CharacterResolution(None)
        found = await self.cards.get(card_id)
        if found is None:
            return CharacterResolution(
                None,
                (
                    Diagnostic(
                        CHARACTER_NOT_FOUND,
                        "the selected character card does not exist",
                        details={"id": card_id},
                    ),
                ),
            )
        record, revision = found
        card = record.body
        return CharacterResolution(
            ResolvedCharacter(
                id=record.id,
                name=card.data.name or card.name,
                updated_at=record.updated_at,
                card=card,
                revision=revision,
            )
        )


class StoreUserAdapter:
    """The default user adapter: the user bound in the selection, from the user store."""

    def __init__(self, resources: TavernResources) -> None:
        self.users: RecordCache[UserData] = RecordCache(resources.users)

    async def resolve(self, request: AdapterRequest) -> UserResolution:
        """Read the selected user (``USER_NOT_FOUND`` when it is gone)."""
        user_id = request.selection.user_id
        if user_id is None:
            return UserResolution(None)
        found = await self.users.get(user_id)
        if found is None:
            return UserResolution(
                None,
                diagnostics=(
                    Diagnostic(
                        USER_NOT_FOUND, "the selected user does not exist", details={"id": user_id}
                    ),
                ),
            )
        record, _ = found
        return UserResolution(
            UserFields(id=record.id, name=record.body.name, description=record.body.description),
            updated_at=record.updated_at,
        )


_POSITIONS: Final[dict[Position, LorePosition]] = {
    Position.BEFORE_CHAR: "before",
    Position.AFTER_CHAR: "after",
    Position.AN_TOP: "an_top",
    Position.AN_BOTTOM: "an_bottom",
    Position.AT_DEPTH: "at_depth",
    Position.EM_TOP: "em_top",
    Position.EM_BOTTOM: "em_bottom",
    Position.OUTLET: "outlet",
}
_ROLES: Final[dict[Role, PromptRole]] = {
    Role.SYSTEM: "system",
    Role.USER: "user",
    Role.ASSISTANT: "assistant",
}
_SOURCE_OF: Final[dict[str, BookSource]] = {
    "session": BookSource.SESSION,
    "user": BookSource.USER,
    "preset": BookSource.PRESET,
    "character": BookSource.CHARACTER,
}


def embedded_book_id(card_id: str) -> str:
    """The resource id of a card's embedded book in lore ids and the audit."""
    return f"character:{card_id}:embedded-world-book"


def lore_entries(result: ActivationResult) -> tuple[LoreEntry, ...]:
    """Activated entries with their rank and their slot inside the position bucket."""
    rank = {e.lore_id: i for i, e in enumerate(result.activated)}
    activated = {e.lore_id: e for e in result.activated}
    positions = result.positions
    out: list[LoreEntry] = []

    def emit(lore_id: str, content: str, slot: int, **extra: Any) -> None:
        entry = activated.get(lore_id)
        if entry is None:
            return
        out.append(
            LoreEntry(
                lore_id=lore_id,
                content=content,
                position=_POSITIONS.get(entry.position, "before"),
                rank=rank[lore_id],
                slot=slot,
                depth=entry.depth,
                role=_ROLES.get(entry.role, "system"),
                outlet=entry.outlet_name,
                resource_id=entry.resource_id,
                **extra,
            )
        )

    for bucket in (
        positions.before,
        positions.after,
        positions.an_top,
        positions.an_bottom,
        positions.em_top,
        positions.em_bottom,
    ):
        for slot, item in enumerate(bucket):
            emit(item.lore_id, item.content, slot)
    slot = 0
    for group in positions.at_depth:
        for item in group.entries:
            emit(item.lore_id, item.content, slot)
            slot += 1
    for items in positions.outlets.values():
        for item in items:
            emit(item.lore_id, item.content, slot)
            slot += 1
    out.sort(key=lambda e: e.rank)
    return tuple(out)


class StoreWorldBookAdapter:
    """The default world-book adapter: standalone books from the store plus the card's embedded
    book, activated by :func:`innkeeper_tavern.worldbook.activate` (off the event loop)."""

    def __init__(self, resources: TavernResources, cache: MatcherCache | None = None) -> None:
        self.books: RecordCache[WorldBookDocument] = RecordCache(resources.world_books)
        self.matchers = cache or MatcherCache()
        self._embedded: collections.OrderedDict[str, tuple[WorldBook | None, str | None]] = (
            collections.OrderedDict()
        )
        #: Whole-book scans answered once per revision (a turn over unchanged books costs none).
        self.fingerprints: BookMemo[str] = BookMemo(book_fingerprint, RECORD_CACHE_SIZE)
        self.initvars: BookMemo[int] = BookMemo(initvar_entries, RECORD_CACHE_SIZE)

    def _embedded_book(self, character: ResolvedCharacter) -> tuple[WorldBook | None, str | None]:
        key = f"{character.id}:{character.revision}"
        cached = self._embedded.get(key)
        if cached is not None:
            return cached
        try:
            value: tuple[WorldBook | None, str | None] = (card_world_book(character.card), None)
        except FormatError as exc:
            value = (None, exc.message)
        self._embedded[key] = value
        while len(self._embedded) > RECORD_CACHE_SIZE:
            self._embedded.popitem(last=False)
        return value

    async def resolve(self, request: WorldBookRequest) -> WorldBookResolution:
        """Load the composed books, run activation and project it for the renderer."""
        diagnostics: list[Diagnostic] = []
        inputs: list[BookInput] = []
        summaries: list[dict[str, Any]] = []
        selection = request.world_books
        loaded: list[tuple[str, WorldBookDocument]] = []
        revisions: dict[str, str] = {}
        for book_id in selection.effective_ids:
            sources = selection.binding_sources.get(book_id, ())
            found = await self.books.get(book_id)
            if found is None:
                diagnostics.append(
                    Diagnostic(
                        WORLD_BOOK_NOT_FOUND,
                        "a bound world book does not exist",
                        details={"id": book_id},
                    )
                )
                summaries.append({"id": book_id, "missing": True, "bindingSources": list(sources)})
                continue
            record, revision = found
            loaded.append((book_id, record.body))
            revisions[book_id] = revision
            notice = unused_initvar(
                book_id,
                record.body.name,
                record.body.book,
                sources,
                count=functools.partial(self.initvars.get, book_id, revision),
            )
            if notice is not None:
                diagnostics.append(notice)
            source = _SOURCE_OF[sources[0]] if sources else BookSource.SESSION
            inputs.append(
                BookInput(
                    resource_id=book_id,
                    book=record.body.book,
                    source=source,
                    revision=revision,
                    name=record.body.name,
                )
            )
            summaries.append(
                {
                    "id": book_id,
                    "kind": "world-book",
                    "name": record.body.name,
                    "updatedAt": record.updated_at,
                    "bindingSources": list(sources),
                    "entryCount": len(record.body.book.entries),
                }
            )
        character = request.character
        if character is not None:
            book, problem = self._embedded_book(character)
            resource_id = embedded_book_id(character.id)
            if problem is not None:
                diagnostics.append(
                    Diagnostic(
                        EMBEDDED_WORLD_BOOK_INVALID,
                        "the card's embedded world book cannot be used",
                        details={"characterCardId": character.id},
                    )
                )
            elif book is not None:
                summary: dict[str, Any] = {
                    "id": resource_id,
                    "kind": "embedded-world-book",
                    "name": book.name or character.name,
                    "characterCardId": character.id,
                    "bindingSources": ["embedded"],
                    "entryCount": len(book.entries),
                }
                revisions[resource_id] = character.revision
                twin = own_book_twin(
                    character.card,
                    book,
                    loaded,
                    embedded_id=resource_id,
                    fingerprint=lambda rid, b: self.fingerprints.get(rid, revisions[rid], b),
                )
                if twin is None:
                    inputs.append(
                        BookInput(
                            resource_id=resource_id,
                            book=book,
                            source=BookSource.EMBEDDED,
                            revision=character.revision,
                            name=summary["name"],
                        )
                    )
                else:
                    summary.update(scanned=False, sameBookAs=twin[0], sameBookReason=twin[1])
                    diagnostics.append(
                        Diagnostic(
                            EMBEDDED_WORLD_BOOK_DUPLICATE,
                            "the card's embedded world book is also bound as a standalone book; "
                            "it is scanned once, as the standalone copy (as SillyTavern does)",
                            "info",
                            details={
                                "embeddedId": resource_id,
                                "usedId": twin[0],
                                "reason": twin[1],
                            },
                        )
                    )
                summaries.append(summary)
        if not inputs:
            return WorldBookResolution(resources=tuple(summaries), diagnostics=tuple(diagnostics))
        activation_request = self._request(request, inputs)
        result = await asyncio.to_thread(activate, activation_request, self.matchers)
        for item in result.diagnostics:
            details: dict[str, Any] = {}
            if item.resource_id:
                details["resourceId"] = item.resource_id
            if item.uid is not None:
                details["uid"] = item.uid
            diagnostics.append(Diagnostic(item.code, item.message, item.severity, details))
        activated_by_book: dict[str, int] = {}
        for entry in result.activated:
            activated_by_book[entry.resource_id] = activated_by_book.get(entry.resource_id, 0) + 1
        for summary in summaries:
            if not summary.get("missing"):
                summary["activatedCount"] = activated_by_book.get(summary["id"], 0)
        books = audit_books(
            inputs, result, max_books=AUDIT_MAX_BOOKS, max_decisions=AUDIT_MAX_DECISIONS
        )
        return WorldBookResolution(
            lore_entries=lore_entries(result),
            resources=tuple(summaries),
            diagnostics=tuple(diagnostics),
            books=tuple(books),
            timed_state=result.timed_state,
            activation={
                "loops": result.loops,
                "seed": result.seed,
                "activatedEntries": len(result.activated),
                "budget": msgspec.to_builtins(result.budget),
                "scan": msgspec.to_builtins(result.scan),
            },
        )

    def _request(self, request: WorldBookRequest, inputs: list[BookInput]) -> ActivationRequest:
        context = request.context
        character = request.character
        user = request.user
        char_name = context.get("char_name", "")
        user_name = user.name if user is not None else context.get("user_name", "User")
        messages = tuple(
            msgspec.structs.replace(
                m,
                name=user_name if m.role == "user" else char_name if m.role == "assistant" else "",
            )
            for m in request.activation.messages
        )
        fields: CharacterFields | None = context.get("character_fields")
        sources = ActivationSources(
            persona_description=user.description if user is not None else "",
            character_description=fields.description if fields else "",
            character_personality=fields.personality if fields else "",
            character_depth_prompt=fields.depth_prompt if fields else "",
            scenario=fields.scenario if fields else "",
            creator_notes=character.card.data.creator_notes if character else "",
        )
        env: MacroEnv = context.get("macro_env", MacroEnv())
        # Lore may show MVU variables: the macro leaves a marker the loader fills after
        # activation, so only activated entries that use it ever read MVU.
        env = replace(env, extra={**env.extra, mvu_macro.MACRO_NAME: mvu_macro.marker})
        session = MacroSession(env, local_variables=context.get("local_variables"))
        settings: ActivationSettings = context.get("activation_settings", ActivationSettings())
        substitute: Callable[[str], str] = session.expand
        return ActivationRequest(
            books=inputs,
            context=ActivationContext(
                messages=messages, sources=sources, chat_length=request.activation.chat_length
            ),
            settings=settings,
            seed=int(context.get("seed", 0)),
            timed_state=context.get("timed_state") or TimedEffectsState(),
            character=CharacterIdentity(name=char_name) if character is not None else None,
            substitute=substitute,
            host_limits=context.get("host_limits", HostLimits()),
            scan_limits=context.get("scan_limits", ScanLimits()),
            dry_run=bool(context.get("dry_run", False)),
        )
