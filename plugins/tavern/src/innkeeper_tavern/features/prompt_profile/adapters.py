"""The loader's three adapter slots, their models, and the store-backed character/user adapters.

`docs/contract/loader.md#adapters`: one singleton slot each for character, user and
world book; adapters return already-normalized, read-only models; they may read the
conversation text but never write the session or assemble the system prompt; a duplicate
registration fails at once (the host's adapter slots name both owners); a disposer revokes only
its own claim.

`docs/contract/world-info.md#composition-order`: the loader composes the standalone books in the
fixed order session-explicit, user, preset, character (stable id de-duplication, every binding
source kept) and hands that selection to the world-book adapter; the card's embedded book enters the
same matcher after them. The default world-book adapter is in :mod:`.world_book_adapter`.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

from innkeeper_hostapi import AdapterSlot
from innkeeper_tavern.features.prompt_render import Diagnostic, LoreEntry, PromptRole, UserFields
from innkeeper_tavern.pure.formats.card import CharacterCard
from innkeeper_tavern.pure.formats.user import UserData
from innkeeper_tavern.pure.worldbook import ActivationMessage, TimedEffectsState
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.resources.library import DocumentLibrary, Record
from innkeeper_tavern.state.session_bindings.model import Selection

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
    "UserAdapter",
    "UserResolution",
    "WorldBookAdapter",
    "WorldBookRequest",
    "WorldBookResolution",
    "WorldBookSelection",
    "compose_world_books",
    "embedded_book_id",
]

#: ``worldBookSelection.order`` names the fixed composition order
#: (`docs/contract/world-info.md#composition-order`).
WORLD_BOOK_ORDER: Final = "session-explicit-then-user-then-preset-then-character"
#: Decoded documents kept by :class:`RecordCache` (keyed by id and content hash).
RECORD_CACHE_SIZE: Final = 64

CHARACTER_NOT_FOUND: Final = "CHARACTER_CARD_NOT_FOUND"
USER_NOT_FOUND: Final = "USER_NOT_FOUND"

T = TypeVar("T")
BindingSource = Literal["session", "user", "preset", "character"]


# ---------------------------------------------------------------- request / result models


@dataclass(frozen=True, slots=True)
class ActivationInput:
    """`docs/contract/loader.md#activation-input`: the read-only activation context.

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
    """The composed standalone-book selection, ``worldBookSelection``
    (`docs/contract/world-info.md#composition-order`)."""

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
            UserFields(
                id=record.id,
                name=record.body.name,
                description=record.body.description,
                description_position=record.body.description_position,
                description_depth=record.body.description_depth,
                description_role=_prompt_role(record.body.description_role),
            ),
            updated_at=record.updated_at,
        )


def _prompt_role(value: str) -> PromptRole:
    """A stored description role (checked on write) as the renderer's role type."""
    if value == "user":
        return "user"
    return "assistant" if value == "assistant" else "system"


def embedded_book_id(card_id: str) -> str:
    """The resource id of a card's embedded book in lore ids and the audit."""
    return f"character:{card_id}:embedded-world-book"
