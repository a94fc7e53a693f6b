"""The Tavern resource libraries behind the v1 routes: one object owning every store.

Stores (all under the plugin's data directory): ``presets/``, ``characters/`` (+
``character-artifacts/`` covers), ``users/``, ``world-books/``,
``resource-world-book-bindings.json``, ``user-world-book-bindings.json`` and
``character-state.json``. Each store has its own
``asyncio.Lock``; an operation that touches several stores takes their locks in one fixed order
(:data:`LOCK_ORDER`), so concurrent requests never deadlock and never lose an update.

Cross-store rules (`docs/contract/world-info.md#relations`,
`docs/contract/resources.md#missing-cards`):

- a relation write needs its owner and every book to exist;
- deleting a preset, card or user clears the relations it owns; deleting a world book clears it
  from every relation (embedded ``character_book``s are never touched);
- deleting a card leaves a tombstone and removes it from the custom order; creating or importing a
  card appends it to a saved custom order.

Relations are written before a document is removed and restored if the removal fails, so a
failed delete changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from innkeeper_tavern.pure.formats import card as card_format
from innkeeper_tavern.pure.formats import preset as preset_format
from innkeeper_tavern.pure.formats import user as user_format
from innkeeper_tavern.pure.formats.errors import FormatError, decode_json
from innkeeper_tavern.pure.formats.guards import (
    BOOK_DOCUMENT_LIMITS,
    StructureLimitError,
    book_limits,
    check_book_entry_count,
    check_structure,
)
from innkeeper_tavern.pure.formats.png import is_png, strip_card_chunks
from innkeeper_tavern.pure.formats.regex_script import validate_regex_scripts
from innkeeper_tavern.pure.formats.worldbook import (
    WorldBook,
    WorldBookEntry,
    WorldBookFormatError,
    parse_any_world_book,
)
from innkeeper_tavern.pure.formats.worldbook_export import export_model, export_over_original
from innkeeper_tavern.pure.worldbook.incremental import share_unchanged_entries

from .character_state import (
    CHARACTER_STATE_FILE,
    MAX_CHARACTER_STATE_BYTES,
    CharacterState,
    SortMode,
    Tombstone,
    checked_order,
    match_tombstone,
    parse_mode,
    sort_entries,
    with_tombstone,
)
from .errors import (
    CHARACTER_ORDER_INVALID,
    CHARACTER_RELINK_INVALID,
    WORLD_BOOK_BINDING_INVALID,
    WORLD_BOOK_INVALID,
    ResourceError,
)
from .kinds import (
    CHARACTERS,
    PRESETS,
    USERS,
    WORLD_BOOKS,
    WorldBookDocument,
    WorldBookSource,
)
from .library import Clock, DocumentLibrary, IdFactory, IndexEntry, Record, valid_id
from .relations import (
    MAX_RELATION_FILE_BYTES,
    RESOURCE_BINDINGS_FILE,
    USER_BINDINGS_FILE,
    OwnerKind,
    ResourceBindings,
    UserBindings,
    normalize_book_ids,
    owner_map,
    with_owner,
    without_books,
)
from .statefile import StateFile

#: World-book import (`POST /world-books/import`, ``innkeeper import``). The original accepted
#: 4 MiB (`docs/resources.md#original-data`), which stops a real ST export at
#: ~1,500–2,000 entries; 32 MiB holds the 10,000-entry cap at ~3.3 KiB per entry (ST writes
#: ~1.5 KiB of fields per entry before its content), the same bound as a card file.
MAX_WORLD_BOOK_IMPORT_BYTES: Final = 32 << 20
#: Same section: name fallback when neither the body, the book nor the file name gives one.
DEFAULT_WORLD_BOOK_NAME: Final = "Untitled World Book"
#: World-book display names, as preset and card names.
MAX_WORLD_BOOK_NAME_CHARS: Final = 200
#: File names kept in ``source.fileName`` (control characters stripped).
MAX_FILE_NAME_CHARS: Final = 255

#: Rank of each store's lock: multi-store operations acquire in this order.
LOCK_ORDER: Final = (
    "presets",
    "characters",
    "users",
    "world_books",
    "bindings",
    "user_bindings",
    "character_state",
)

#: ``(previous_id, new_id) -> (playthroughs moved, sessions moved)``: plugged in by the play
#: workspace (a later issue) so ``POST /characters/relink`` can move references.
Relinker = Callable[[str, str], Awaitable[tuple[int, int]]]
#: Kinds named to deletion listeners (the session-selection store's ``clearResource`` kinds).
DeletedKind = Literal["preset", "character-card", "user", "world-book"]
#: ``(kind, id)`` after a resource was deleted: session selections and other references clear
#: it (`docs/contract/world-info.md#relations`: deleting a resource
#: clears the matching session selections). Errors are logged; the deletion stands.
DeletionListener = Callable[[DeletedKind, str], Awaitable[object]]


def utc_now() -> str:
    """ISO 8601 UTC timestamp with milliseconds (the default clock)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def random_id(prefix: str) -> str:
    """``<prefix>-<32 hex>`` (the default id factory)."""
    return f"{prefix}-{uuid.uuid4().hex}"


def clean_file_name(name: str | None) -> str | None:
    """A file name safe to store and show: control characters stripped, ≤ 255 characters."""
    if not name:
        return None
    cleaned = "".join(ch for ch in name if ch.isprintable()).strip()
    return cleaned[:MAX_FILE_NAME_CHARS] or None


def file_stem(name: str | None) -> str | None:
    """``name`` without folders and extension."""
    if not name:
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0] if "." in base else base
    return stem.strip() or None


def _book_error(exc: StructureLimitError | WorldBookFormatError) -> FormatError:
    if isinstance(exc, StructureLimitError):
        return FormatError.from_structure(exc)
    return FormatError(exc.code, str(exc), 400, exc.path)


@dataclass(frozen=True, slots=True)
class CharacterImport:
    """Result of a card import: the record and, if any, the missing card it matches."""

    record: Record[card_format.CharacterCard]
    match: tuple[Tombstone, str] | None
    #: Whether the matched missing card's playthroughs were relinked to this card.
    relinked: bool = False


class TavernResources:
    """Every Tavern resource store under ``root`` (the plugin's data directory)."""

    def __init__(
        self,
        root: Path,
        *,
        clock: Clock = utc_now,
        ids: IdFactory = random_id,
        logger: logging.Logger | None = None,
    ) -> None:
        self.root = root
        self.logger = logger or logging.getLogger("innkeeper.plugin.tavern")
        common: dict[str, Any] = {"clock": clock, "ids": ids, "logger": self.logger}
        self.presets = DocumentLibrary(root, PRESETS, **common)
        self.characters = DocumentLibrary(root, CHARACTERS, **common)
        self.users = DocumentLibrary(root, USERS, **common)
        self.world_books = DocumentLibrary(root, WORLD_BOOKS, **common)
        self.bindings = StateFile(
            root / RESOURCE_BINDINGS_FILE,
            ResourceBindings,
            max_bytes=MAX_RELATION_FILE_BYTES,
            logger=self.logger,
        )
        self.user_bindings = StateFile(
            root / USER_BINDINGS_FILE,
            UserBindings,
            max_bytes=MAX_RELATION_FILE_BYTES,
            logger=self.logger,
        )
        self.character_state = StateFile(
            root / CHARACTER_STATE_FILE,
            CharacterState,
            max_bytes=MAX_CHARACTER_STATE_BYTES,
            logger=self.logger,
        )
        self.relinkers: list[Relinker] = []
        self.deletion_listeners: list[DeletionListener] = []
        self._clock = clock
        self._catalog_cache: tuple[tuple[int, int], bytes] | None = None
        # Catalog rows by card id, reused while the card's index entry is the same object.
        self._rows: dict[str, tuple[IndexEntry, msgspec.Raw]] = {}

    async def open(self) -> None:
        """Load every index and state file (off the event loop)."""
        self.root.mkdir(parents=True, exist_ok=True)
        await asyncio.gather(
            self.presets.open(),
            self.characters.open(),
            self.users.open(),
            self.world_books.open(),
            self.bindings.open(),
            self.user_bindings.open(),
            self.character_state.open(),
        )

    async def _deleted(self, kind: DeletedKind, resource_id: str) -> None:
        """Tell the deletion listeners (after the stores' locks are released)."""
        for listener in list(self.deletion_listeners):
            try:
                await listener(kind, resource_id)
            except Exception:
                self.logger.exception(
                    "clearing references to deleted %s %s failed", kind, resource_id
                )

    @contextlib.asynccontextmanager
    async def _locked(self, *names: str) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for name in sorted(set(names), key=LOCK_ORDER.index):
                lock: asyncio.Lock = getattr(self, name).lock
                await stack.enter_async_context(lock)
            yield

    # ================================================================== presets

    def list_presets(self) -> list[dict[str, Any]]:
        """Preset summaries, most recently updated first."""
        entries = sorted(self.presets.entries(), key=lambda e: (e.name, e.id))
        entries.sort(key=lambda e: e.updated_at, reverse=True)
        return [summary_wire(e) for e in entries]

    async def create_preset(self, body: Any) -> Record[preset_format.Preset]:
        """``POST /presets`` ``{name}``: a blank SillyTavern preset."""
        if not isinstance(body, dict) or set(body) - {"name"}:
            raise FormatError(preset_format.PRESET_INVALID, "body must be {name}", 400, "$")
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise FormatError(
                preset_format.PRESET_INVALID, "name must be a non-empty string", 400, "$.name"
            )
        return await self.presets.create(preset_format.blank_preset(name.strip()))

    async def import_preset(self, content: Any, name: str | None) -> Record[preset_format.Preset]:
        """``POST /import``: ``content`` is the ST preset JSON text (or the object itself)."""
        if isinstance(content, str | bytes):
            preset = await asyncio.to_thread(preset_format.parse_preset_json, content, name=name)
        else:
            preset = await asyncio.to_thread(preset_format.parse_preset, content, name=name)
        return await self.presets.create(preset)

    async def update_preset(
        self, preset_id: str, patch: Any, *, expected_revision: str | None = None
    ) -> Record[preset_format.Preset]:
        """``PUT /presets/:id``; ``expected_revision`` makes it a compare-and-set."""
        return await self.presets.update(
            preset_id,
            lambda p: preset_format.edit_preset(p, patch),
            expected_revision=expected_revision,
        )

    async def set_preset_regex(self, preset_id: str, scripts: Any) -> Record[preset_format.Preset]:
        """``PUT /presets/:id/regex-scripts``: full ordered replace on the native path."""
        checked = validate_regex_scripts(scripts)
        return await self.presets.update(
            preset_id, lambda p: preset_format.with_preset_regex_scripts(p, checked)
        )

    async def delete_preset(self, preset_id: str) -> IndexEntry:
        """``DELETE /presets/:id``: also clears the preset's world-book relation."""
        async with self._locked("presets", "bindings"):
            entry = await self._delete_owner(self.presets, "preset", preset_id)
        await self._deleted("preset", preset_id)
        return entry

    # ================================================================== relations

    def _owner_library(self, kind: OwnerKind) -> DocumentLibrary[Any]:
        if kind == "preset":
            return self.presets
        if kind == "character":
            return self.characters
        return self.users

    def _relation_file(self, kind: OwnerKind) -> StateFile[Any]:
        return self.user_bindings if kind == "user" else self.bindings

    def world_book_ids(self, kind: OwnerKind, owner: str) -> list[str]:
        """The ordered standalone world-book ids bound to ``owner`` (404 if it does not exist)."""
        library = self._owner_library(kind)
        if not library.exists(owner):
            raise library.not_found(owner)
        return list(owner_map(self._relation_file(kind).state, kind).get(owner, []))

    async def set_world_book_ids(self, kind: OwnerKind, owner: str, value: Any) -> list[str]:
        """Replace ``owner``'s relation. Missing owner → 404; bad, missing or > 100 books → 400."""
        ids = normalize_book_ids(value)
        library = self._owner_library(kind)
        lib_name = {"preset": "presets", "character": "characters", "user": "users"}[kind]
        file_name = "user_bindings" if kind == "user" else "bindings"
        async with self._locked(lib_name, "world_books", file_name):
            if not library.exists(owner):
                raise library.not_found(owner)
            missing = [b for b in ids if not self.world_books.exists(b)]
            if missing:
                raise ResourceError(
                    400,
                    WORLD_BOOK_BINDING_INVALID,
                    f"world books do not exist: {', '.join(missing[:10])}",
                )
            store = self._relation_file(kind)
            await store.save_locked(with_owner(store.state, kind, owner, ids))
        return ids

    async def _delete_owner(
        self, library: DocumentLibrary[Any], kind: OwnerKind, owner: str
    ) -> IndexEntry:
        """Delete an owner document and its relation (caller holds both locks)."""
        if not library.exists(owner):
            raise library.not_found(owner)
        store = self._relation_file(kind)
        before = store.state
        if owner in owner_map(before, kind):
            await store.save_locked(with_owner(before, kind, owner, []))
        try:
            return await library.delete_locked(owner)
        except ResourceError:
            if store.state is not before:
                await store.save_locked(before)
            raise

    # ================================================================== characters

    def list_characters(self) -> tuple[list[msgspec.Raw], SortMode, list[Tombstone]]:
        """Cards in sidebar order (pre-encoded JSON rows), the sort mode and the missing-card
        tombstones."""
        state = self.character_state.state
        ordered = sort_entries(
            self.characters.entries(), state.character_sort_mode, state.character_order
        )
        rows: dict[str, tuple[IndexEntry, msgspec.Raw]] = {}
        for entry in ordered:
            known = self._rows.get(entry.id)
            if known is None or known[0] is not entry:
                known = (entry, msgspec.Raw(msgspec.json.encode(summary_wire(entry))))
            rows[entry.id] = known
        self._rows = rows
        return (
            [row for _, row in rows.values()],
            state.character_sort_mode,
            list(state.missing_characters),
        )

    def character_catalog_json(self) -> bytes:
        """``GET /characters`` as encoded JSON, rebuilt only when the card index or the
        library state changed (the catalog of 4,096 cards is served from memory)."""
        key = (self.characters.revision, self.character_state.revision)
        cached = self._catalog_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        cards, mode, missing = self.list_characters()
        body = msgspec.json.encode(
            {
                "ok": True,
                "characters": cards,
                "sorting": {"mode": mode},
                "missingCharacters": [
                    {"id": t.id, "name": t.name, "sha256": t.sha256, "deletedAt": t.deleted_at}
                    for t in missing
                ],
            }
        )
        self._catalog_cache = (key, body)
        return body

    async def _append_to_order(self, card_id: str) -> None:
        """Append a new card to a saved custom order (caller holds character_state.lock)."""
        state = self.character_state.state
        if state.character_sort_mode == "custom" or state.character_order:
            order = [*state.character_order, card_id]
            await self.character_state.save_locked(
                msgspec.structs.replace(state, character_order=order)
            )

    async def _store_new_card(
        self, card: card_format.CharacterCard, cover: bytes | None
    ) -> CharacterImport:
        async with self._locked("characters", "character_state"):
            record = await self.characters.create_locked(card, artifact=cover)
            try:
                await self._append_to_order(record.id)
            except ResourceError:
                with contextlib.suppress(ResourceError):
                    await self.characters.delete_locked(record.id)
                raise
            live = [e.name for e in self.characters.entries()]
            match = match_tombstone(self.character_state.state, card.source.sha256, card.name, live)
        relinked = False
        if match is not None:
            # A unique match relinks automatically (`docs/contract/resources.md#missing-cards`);
            # without a play workspace the relinker defers and the tombstone stays.
            self.logger.info(
                "imported card %s matches missing card %s by %s", record.id, match[0].id, match[1]
            )
            if self.relinkers:
                try:
                    await self.relink_character(match[0].id, record.id)
                    relinked = True
                except ResourceError as exc:
                    self.logger.info("relink of %s deferred: %s", match[0].id, exc.code)
        return CharacterImport(record, match, relinked)

    async def create_character(self, body: Any) -> CharacterImport:
        """``POST /characters``: a new V2 card from camelCase fields (``name`` required)."""
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise FormatError(card_format.CHARACTER_CARD_INVALID, "name is required", 400, "$.name")
        if not body["name"].strip():
            raise FormatError(
                card_format.CHARACTER_CARD_INVALID, "name must not be empty", 400, "$.name"
            )
        name = body["name"].strip()
        raw = {
            "spec": card_format.SPEC_V2[0],
            "spec_version": card_format.SPEC_V2[1],
            "data": {"name": name},
        }
        card = card_format.edit_card(card_format.parse_card(raw), {**body, "name": name})
        # A created card's "original" is what it was created as.
        card = msgspec.structs.replace(
            card,
            source=msgspec.structs.replace(card.source, raw=card_format.export_card(card)),
        )
        return await self._store_new_card(card, None)

    async def import_character(self, data: bytes, file_name: str | None) -> CharacterImport:
        """``POST /characters/import``: a JSON or PNG card file (≤ 32 MiB)."""
        name = clean_file_name(file_name)

        def parse() -> tuple[card_format.CharacterCard, bytes | None]:
            card = card_format.parse_card_bytes(data, file_name=file_stem(name))
            cover = strip_card_chunks(data) if is_png(data) else None
            return card, cover

        card, cover = await asyncio.to_thread(parse)
        return await self._store_new_card(card, cover)

    async def update_character(
        self,
        card_id: str,
        edit: Callable[[card_format.CharacterCard], card_format.CharacterCard],
        *,
        expected_revision: str | None = None,
        cover: bytes | None = None,
    ) -> Record[card_format.CharacterCard]:
        """Apply a pure card edit (PATCH, embedded book, regex, avatar) under the library lock;
        ``expected_revision`` makes it a compare-and-set, ``cover`` replaces the card's image."""
        return await self.characters.update(
            card_id, edit, expected_revision=expected_revision, artifact=cover
        )

    async def set_character_regex(
        self, card_id: str, scripts: Any
    ) -> Record[card_format.CharacterCard]:
        """``PUT /characters/:id/regex-scripts``."""
        checked = validate_regex_scripts(scripts)
        return await self.characters.update(
            card_id, lambda c: card_format.with_card_regex_scripts(c, checked)
        )

    async def delete_character(self, card_id: str) -> Tombstone:
        """``DELETE /characters/:id``: body and cover go, a tombstone stays, relations and the
        custom-order entry are cleared."""
        async with self._locked("characters", "bindings", "character_state"):
            entry = self.characters.entry(card_id)
            if entry is None:
                raise self.characters.not_found(card_id)
            tombstone = Tombstone(
                id=card_id,
                name=entry.name,
                sha256=entry.summary.get("sha256"),
                deleted_at=self._clock(),
            )
            state_before = self.character_state.state
            await self.character_state.save_locked(with_tombstone(state_before, tombstone))
            try:
                await self._delete_owner(self.characters, "character", card_id)
            except ResourceError:
                await self.character_state.save_locked(state_before)
                raise
        await self._deleted("character-card", card_id)
        return tombstone

    async def set_character_order(self, mode_value: Any, ids_value: Any) -> SortMode:
        """``PUT /characters/order`` (`docs/contract/resources.md#character-order`)."""
        mode = parse_mode(mode_value)
        async with self._locked("characters", "character_state"):
            state = self.character_state.state
            if mode != "custom":
                if ids_value is not None:
                    raise ResourceError(
                        400,
                        CHARACTER_ORDER_INVALID,
                        "characterIds is only accepted with mode 'custom'",
                    )
                new_state = msgspec.structs.replace(state, character_sort_mode=mode)
            elif ids_value is not None:
                order = checked_order(ids_value, {e.id for e in self.characters.entries()})
                new_state = msgspec.structs.replace(
                    state, character_sort_mode="custom", character_order=order
                )
            elif state.character_order:
                new_state = msgspec.structs.replace(state, character_sort_mode="custom")
            else:
                # No saved order: initialize it from the order currently shown.
                shown = sort_entries(self.characters.entries(), state.character_sort_mode, [])
                new_state = msgspec.structs.replace(
                    state, character_sort_mode="custom", character_order=[e.id for e in shown]
                )
            await self.character_state.save_locked(new_state)
        return mode

    async def relink_character(self, previous_id: Any, target_id: Any) -> tuple[int, int]:
        """``POST /characters/relink``: move references from a missing card to a live one,
        then clear the tombstone. Returns (playthroughs, sessions) moved."""
        if not isinstance(previous_id, str) or not isinstance(target_id, str):
            raise ResourceError(
                400,
                CHARACTER_RELINK_INVALID,
                "previousCharacterId and characterId must be strings",
            )
        async with self._locked("characters", "character_state"):
            state = self.character_state.state
            if not any(t.id == previous_id for t in state.missing_characters):
                raise ResourceError(
                    400, CHARACTER_RELINK_INVALID, f"{previous_id!r} is not a missing card"
                )
            if not self.characters.exists(target_id):
                raise ResourceError(
                    400, CHARACTER_RELINK_INVALID, f"character {target_id!r} does not exist"
                )
            self.logger.info("relinking missing card %s to %s", previous_id, target_id)
            playthroughs = sessions = 0
            for relinker in list(self.relinkers):
                moved = await relinker(previous_id, target_id)
                playthroughs += moved[0]
                sessions += moved[1]
            kept = [t for t in state.missing_characters if t.id != previous_id]
            await self.character_state.save_locked(
                msgspec.structs.replace(state, missing_characters=kept)
            )
            self.logger.info(
                "relinked %s to %s: %d playthroughs, %d sessions",
                previous_id,
                target_id,
                playthroughs,
                sessions,
            )
        return playthroughs, sessions

    # ================================================================== users

    def list_users(self) -> list[dict[str, Any]]:
        """User summaries sorted by name, then id."""
        entries = sorted(self.users.entries(), key=lambda e: (e.name.casefold(), e.id))
        return [
            {
                "id": e.id,
                "name": e.name,
                "descriptionPreview": e.summary.get("descriptionPreview", ""),
                "hasAvatar": bool(e.summary.get("hasAvatar")),
                "createdAt": e.created_at,
                "updatedAt": e.updated_at,
            }
            for e in entries
        ]

    async def create_user(self, body: Any) -> Record[user_format.UserData]:
        """``POST /users``."""
        return await self.users.create(user_format.new_user(body))

    async def import_user(self, data: bytes) -> Record[user_format.UserData]:
        """``POST /users/import``: a versioned Tavern user envelope, new id, no binding."""
        return await self.users.create(user_format.parse_user_import(data))

    async def update_user(self, user_id: str, patch: Any) -> Record[user_format.UserData]:
        """``PATCH /users/:id``."""
        return await self.users.update(user_id, lambda u: user_format.edit_user(u, patch))

    async def delete_user(self, user_id: str) -> IndexEntry:
        """``DELETE /users/:id``: also clears the user's world-book relation."""
        async with self._locked("users", "user_bindings"):
            entry = await self._delete_owner(self.users, "user", user_id)
        await self._deleted("user", user_id)
        return entry

    # ================================================================== world books

    def list_world_books(self) -> list[dict[str, Any]]:
        """Standalone world-book summaries sorted by name, then id."""
        entries = sorted(self.world_books.entries(), key=lambda e: (e.name.casefold(), e.id))
        return [summary_wire(e) for e in entries]

    async def create_world_book(self, body: Any) -> Record[WorldBookDocument]:
        """``POST /world-books`` ``{name}``: an empty standalone book."""
        if not isinstance(body, dict) or set(body) - {"name"}:
            raise FormatError(WORLD_BOOK_INVALID, "body must be {name}", 400, "$")
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise FormatError(WORLD_BOOK_INVALID, "name must be a non-empty string", 400, "$.name")
        clipped = name.strip()[:MAX_WORLD_BOOK_NAME_CHARS]
        doc = WorldBookDocument(
            name=clipped,
            source=WorldBookSource(format="st"),
            book=parse_any_world_book({"name": clipped, "entries": {}}),
        )
        return await self.world_books.create(doc)

    async def import_world_book(
        self,
        data: bytes,
        *,
        file_name: str | None = None,
        name: str | None = None,
        decoded: dict[str, Any] | None = None,
    ) -> Record[WorldBookDocument]:
        """``POST /world-books/import``: a standalone ST world-info file or a ``character_book``
        object (the shape is detected). Name: ``name``, the book's, the file stem, a default.

        ``decoded`` is ``data`` already decoded under :data:`BOOK_DOCUMENT_LIMITS` (the HTTP
        layer decodes JSON bodies once); without it the bytes are decoded here.
        """
        if len(data) > MAX_WORLD_BOOK_IMPORT_BYTES:
            raise FormatError(
                "WORLD_BOOK_ARTIFACT_TOO_LARGE",
                f"world-book import is larger than {MAX_WORLD_BOOK_IMPORT_BYTES} bytes",
                413,
            )
        stored_name = clean_file_name(file_name)

        def parse() -> WorldBookDocument:
            raw = (
                decoded
                if decoded is not None
                else decode_json(data, what="world book", limits=BOOK_DOCUMENT_LIMITS)
            )
            if not isinstance(raw, dict):
                raise FormatError("WORLD_BOOK_ROOT_INVALID", "a world book must be an object")
            try:
                book = parse_any_world_book(raw)
            except (StructureLimitError, WorldBookFormatError) as exc:
                raise _book_error(exc) from None
            display = next(
                (
                    c.strip()[:MAX_WORLD_BOOK_NAME_CHARS]
                    for c in (name, book.name, file_stem(stored_name))
                    if isinstance(c, str) and c.strip()
                ),
                DEFAULT_WORLD_BOOK_NAME,
            )
            return WorldBookDocument(
                name=display,
                source=WorldBookSource(
                    format=book.source_format,
                    file_name=stored_name,
                    byte_length=len(data),
                    sha256=hashlib.sha256(data).hexdigest(),
                    raw=raw,
                ),
                book=book,
            )

        return await self.world_books.create(await asyncio.to_thread(parse))

    async def update_world_book(self, book_id: str, patch: Any) -> Record[WorldBookDocument]:
        """``PATCH /world-books/:id`` ``{name?, book?}``; ``book`` is the normalized model as
        ``GET`` returns it and replaces the stored one after the structure guard."""
        if not isinstance(patch, dict):
            raise FormatError(WORLD_BOOK_INVALID, "body must be an object", 400, "$")
        unknown = sorted(set(patch) - {"name", "book"})
        if unknown:
            raise FormatError(WORLD_BOOK_INVALID, f"unknown field {unknown[0]!r}", 400, "$")
        name: str | None = None
        if "name" in patch:
            value = patch["name"]
            if not isinstance(value, str) or not value.strip():
                raise FormatError(WORLD_BOOK_INVALID, "name must be non-empty", 400, "$.name")
            name = value.strip()[:MAX_WORLD_BOOK_NAME_CHARS]
        book = await asyncio.to_thread(edited_book, patch["book"]) if "book" in patch else None

        def edit(doc: WorldBookDocument) -> WorldBookDocument:
            changes: dict[str, Any] = {}
            if name is not None:
                changes["name"] = name
            if book is not None:
                # Entries the edit left unchanged keep their objects: the compiled form of the
                # next revision is then derived without comparing 10,000 entries on a turn.
                changes["book"] = share_unchanged_entries(doc.book, book)
            return msgspec.structs.replace(doc, **changes)

        return await self.world_books.update(book_id, edit)

    async def delete_world_book(self, book_id: str) -> IndexEntry:
        """``DELETE /world-books/:id``: clears the book from every preset, character and user
        relation; deletion listeners clear session references."""
        async with self._locked("world_books", "bindings", "user_bindings"):
            if not self.world_books.exists(book_id):
                raise self.world_books.not_found(book_id)
            res_before = self.bindings.state
            user_before = self.user_bindings.state
            await self.bindings.save_locked(
                without_books(res_before, ("preset", "character"), book_id)
            )
            try:
                await self.user_bindings.save_locked(without_books(user_before, ("user",), book_id))
                entry = await self.world_books.delete_locked(book_id)
            except ResourceError:
                with contextlib.suppress(ResourceError):
                    await self.bindings.save_locked(res_before)
                    await self.user_bindings.save_locked(user_before)
                raise
        await self._deleted("world-book", book_id)
        return entry


def summary_wire(entry: IndexEntry) -> dict[str, Any]:
    """A catalog row: id, name, timestamps and the kind's summary (no body was read)."""
    return {
        "id": entry.id,
        "name": entry.name,
        "createdAt": entry.created_at,
        "updatedAt": entry.updated_at,
        **entry.summary,
    }


_BOOK_FIELDS: Final = frozenset(WorldBook.__struct_fields__)
_ENTRY_FIELDS: Final = frozenset(WorldBookEntry.__struct_fields__)


def edited_book(value: Any) -> WorldBook:
    """Validate a normalized book sent back by a client; guard, convert, export and re-parse."""
    if not isinstance(value, dict):
        raise FormatError(WORLD_BOOK_INVALID, "book must be an object", 400, "$.book")
    try:
        entries = value.get("entries", [])
        count = len(entries) if isinstance(entries, list) else 0
        check_book_entry_count(count, "$.book.entries")
        check_structure(value, book_limits(count))
    except StructureLimitError as exc:
        raise FormatError.from_structure(exc) from None
    unknown = sorted(set(value) - _BOOK_FIELDS)
    if unknown:
        raise FormatError(WORLD_BOOK_INVALID, f"unknown book field {unknown[0]!r}", 400, "$.book")
    if isinstance(entries, list):
        for index, entry in enumerate(entries):
            bad = sorted(set(entry) - _ENTRY_FIELDS) if isinstance(entry, dict) else []
            if bad:
                raise FormatError(
                    WORLD_BOOK_INVALID,
                    f"unknown entry field {bad[0]!r}",
                    400,
                    f"$.book.entries[{index}]",
                )
    try:
        book = msgspec.convert(value, WorldBook)
    except msgspec.ValidationError as exc:
        raise FormatError(WORLD_BOOK_INVALID, f"invalid book: {exc}", 400, "$.book") from None
    book = msgspec.structs.replace(book, diagnostics=())
    try:
        parse_any_world_book(export_model(book))
    except (StructureLimitError, WorldBookFormatError) as exc:
        raise _book_error(exc) from None
    return book


def export_world_book_json(doc: WorldBookDocument) -> bytes:
    """The book in its own ST shape (standalone ``entries`` map or ``character_book`` array) as
    pretty UTF-8 JSON."""
    raw = doc.source.raw
    out = export_model(doc.book) if raw is None else export_over_original(raw, doc.book)
    return msgspec.json.format(msgspec.json.encode(out), indent=2) + b"\n"


__all__ = [
    "CharacterImport",
    "DeletedKind",
    "DeletionListener",
    "Relinker",
    "TavernResources",
    "edited_book",
    "export_world_book_json",
    "summary_wire",
    "valid_id",
]
