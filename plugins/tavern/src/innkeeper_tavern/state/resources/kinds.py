"""The four stored resource kinds: body types, folders, limits, summaries and wire shapes."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from innkeeper_tavern.pure.formats.card import CharacterCard
from innkeeper_tavern.pure.formats.png import MAX_CARD_FILE_BYTES
from innkeeper_tavern.pure.formats.preset import Preset
from innkeeper_tavern.pure.formats.user import UserData
from innkeeper_tavern.pure.formats.worldbook import WorldBook

from .book_codec import BookCodec
from .errors import CHARACTER_NOT_FOUND, PRESET_NOT_FOUND, USER_NOT_FOUND, WORLD_BOOK_NOT_FOUND
from .library import DocumentKind, Record

# ---------------------------------------------------------------- limits

#: Stored preset document: the original preset store's 2 MiB body limit
#: (`docs/resources.md#original-data`) plus room for the normalized copy.
MAX_PRESET_DOCUMENT_BYTES: Final = 8 << 20
#: A stored card keeps its original JSON and the normalized fields: twice the 32 MiB import
#: limit (`docs/contract/http-api.md#v1-limits`, ``POST /characters/import``).
MAX_CHARACTER_DOCUMENT_BYTES: Final = 2 * MAX_CARD_FILE_BYTES
#: A card cover is the imported PNG without its card chunks: at most the 32 MiB import limit.
MAX_COVER_BYTES: Final = MAX_CARD_FILE_BYTES
#: Stored user: name ≤ 200, description ≤ 100,000 characters, avatar ≤ 128 KiB
#: (`docs/contract/resources.md#portable-json`); JSON escaping fits in 1 MiB.
MAX_USER_DOCUMENT_BYTES: Final = 1 << 20
#: Stored world book: the normalized model of a ≤ 32 MiB import (every ST field filled in, about
#: the size of the import) plus the import as decoded (kept for a faithful export): ~2× + margin.
MAX_WORLD_BOOK_DOCUMENT_BYTES: Final = 80 << 20

#: `docs/contract/resources.md#character-order`: a custom order holds at most 4,096 cards, so the
#: library holds at most that many.
MAX_CHARACTERS: Final = 4_096
#: Our bounds on the other libraries (each listing is served from memory).
MAX_PRESETS: Final = 4_096
MAX_USERS: Final = 4_096
MAX_WORLD_BOOKS: Final = 4_096
#: Tags copied into a character's index summary (the card keeps all of them).
MAX_SUMMARY_TAGS: Final = 32
#: Characters of a user's description kept in the index for the catalog (descriptions may hold
#: 100,000 characters; 4,096 of them would not belong in an index).
MAX_DESCRIPTION_PREVIEW_CHARS: Final = 280


class WorldBookSource(msgspec.Struct, rename="camel", kw_only=True):
    """Where a standalone book came from (`docs/resources.md#original-data`)."""

    format: str = "st"
    file_name: str | None = None
    byte_length: int | None = None
    sha256: str | None = None
    #: The imported document as decoded (export overlays edits on it; never on the wire).
    raw: dict[str, Any] | None = None


class WorldBookDocument(msgspec.Struct, rename="camel", kw_only=True):
    """A standalone world book in the library: display name, source and normalized book."""

    name: str
    source: WorldBookSource = msgspec.field(default_factory=WorldBookSource)
    book: WorldBook = msgspec.field(default_factory=WorldBook)


# ---------------------------------------------------------------- summaries


def _preset_summary(preset: Preset) -> dict[str, Any]:
    return {
        "sourceFormat": preset.source.format,
        "migratedFrom": preset.source.migrated_from,
        "promptCount": len(preset.prompts),
        "enabledPromptCount": sum(1 for p in preset.prompts if p.enabled and not p.marker),
    }


def _character_summary(card: CharacterCard) -> dict[str, Any]:
    return {
        "format": card.source.format,
        "specVersion": card.source.spec_version,
        "container": card.source.container,
        "sha256": card.source.sha256,
        "hasCover": card.source.container == "png",
        "creator": card.data.creator,
        "characterVersion": card.data.character_version,
        "tags": card.data.tags[:MAX_SUMMARY_TAGS],
        "greetingCount": 1 + len(card.data.alternate_greetings),
        "hasCharacterBook": card.data.character_book is not None,
        "warnings": list(card.warnings),
    }


def _user_summary(user: UserData) -> dict[str, Any]:
    preview = user.description[:MAX_DESCRIPTION_PREVIEW_CHARS]
    return {"descriptionPreview": preview, "hasAvatar": user.avatar is not None}


def _world_book_summary(doc: WorldBookDocument) -> dict[str, Any]:
    return {"sourceFormat": doc.book.source_format, "entryCount": len(doc.book.entries)}


PRESETS: Final = DocumentKind(
    name="preset",
    folder="presets",
    body_type=Preset,
    id_prefix="preset",
    not_found_code=PRESET_NOT_FOUND,
    max_document_bytes=MAX_PRESET_DOCUMENT_BYTES,
    max_count=MAX_PRESETS,
    display_name=lambda p: p.name,
    summarize=_preset_summary,
)
CHARACTERS: Final = DocumentKind(
    name="character",
    folder="characters",
    body_type=CharacterCard,
    id_prefix="character",
    not_found_code=CHARACTER_NOT_FOUND,
    max_document_bytes=MAX_CHARACTER_DOCUMENT_BYTES,
    max_count=MAX_CHARACTERS,
    display_name=lambda c: c.name,
    summarize=_character_summary,
    artifact_folder="character-artifacts",
    artifact_suffix=".png",
    max_artifact_bytes=MAX_COVER_BYTES,
)
USERS: Final = DocumentKind(
    name="user",
    folder="users",
    body_type=UserData,
    id_prefix="user",
    not_found_code=USER_NOT_FOUND,
    max_document_bytes=MAX_USER_DOCUMENT_BYTES,
    max_count=MAX_USERS,
    display_name=lambda u: u.name,
    summarize=_user_summary,
)
WORLD_BOOKS: Final = DocumentKind(
    name="world book",
    folder="world-books",
    body_type=WorldBookDocument,
    id_prefix="world-book",
    not_found_code=WORLD_BOOK_NOT_FOUND,
    max_document_bytes=MAX_WORLD_BOOK_DOCUMENT_BYTES,
    max_count=MAX_WORLD_BOOKS,
    display_name=lambda d: d.name,
    summarize=_world_book_summary,
    keep_written=True,
    # A book re-read after an edit on disk decodes only the entries whose bytes changed and
    # keeps the other entry objects, so its compiled form is derived by identity.
    incremental=BookCodec(WorldBookDocument, WorldBookSource, "world book"),
)


# ---------------------------------------------------------------- wire shapes


def _meta(record: Record[Any]) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "id": record.id,
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
    }


def _without_raw(body: Any) -> dict[str, Any]:
    doc: dict[str, Any] = msgspec.to_builtins(body)
    source = doc.get("source")
    if isinstance(source, dict):
        source.pop("raw", None)
    return doc


def preset_wire(record: Record[Preset]) -> dict[str, Any]:
    """``GET /presets/:id`` ``preset``: the normalized preset; the ST original is served by
    ``/presets/:id/export`` instead of being repeated in ``source.raw``."""
    return {**_meta(record), **_without_raw(record.body)}


def character_wire(record: Record[CharacterCard]) -> dict[str, Any]:
    """``GET /characters/:id`` ``character``: normalized card fields, source facts, warnings."""
    doc = {**_meta(record), **_without_raw(record.body)}
    doc["hasCover"] = record.body.source.container == "png"
    return doc


def user_wire(record: Record[UserData]) -> dict[str, Any]:
    """``GET /users/:id`` ``user``: ``{id, name, description}``, ``avatar`` when set, and where
    the description goes in the prompt when that is not the default (``inPrompt``)."""
    doc: dict[str, Any] = {
        "id": record.id,
        "name": record.body.name,
        "description": record.body.description,
    }
    if record.body.avatar is not None:
        doc["avatar"] = record.body.avatar
    if record.body.description_position != "inPrompt":  # the default goes unsaid
        doc["descriptionPosition"] = record.body.description_position
        doc["descriptionDepth"] = record.body.description_depth
        doc["descriptionRole"] = record.body.description_role
    return doc


def world_book_wire(record: Record[WorldBookDocument]) -> dict[str, Any]:
    """``GET /world-books/:id`` ``worldBook``: name, source and the whole normalized book."""
    doc: dict[str, Any] = {**_meta(record), **msgspec.to_builtins(record.body)}
    doc["source"].pop("raw", None)
    return doc
