"""The session selection: which preset, card, user and world books a session uses, plus RP.

Wire and disk shape (`docs/contract/loader.md#session-bindings`, ``session-selections.json``
schema 2)::

    {"presetId": str|null, "characterCardId": str|null, "userId": str|null,
     "worldBookIds": [str, ...], "character": {...}, "rp": {"active", "source",
     "followSuppressed", "sandboxBefore"}}

Two ways in:

- :func:`normalize_selection` is *lenient*: it reads whatever an old or hand-edited file holds
  and keeps what is valid (a bad id becomes ``null``, unknown character options are dropped, RP
  fields out of their enums fall back to their defaults). It is what the v1 → v2 migration uses.
- :func:`check_selection` is *strict*: every selection the store publishes passes it, so a bug
  upstream can never write something a later read would silently change.

Everything here is pure (no I/O, no host).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import msgspec

#: `docs/contract/loader.md#session-bindings`: session ids pass a length/charset check (a JSON
#: key, but never a prototype key or abnormal input). Same pattern as the original store.
SESSION_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
#: Same rule: resource ids are bounded, at most 200 characters.
MAX_RESOURCE_ID_CHARS: Final = 200
#: Same rule: per-session world-book counts are bounded; ordered, unique, at most 100 ids as in a
#: template's selection (`docs/contract/resources.md#template-editing`).
MAX_WORLD_BOOKS_PER_SESSION: Final = 100
#: `docs/contract/resources.md#template-editing`: ``greetingIndex`` is a non-negative safe integer.
MAX_SAFE_INTEGER: Final = 2**53 - 1

RpSource = Literal["command", "character-follow"]
SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
ResourceKind = Literal["preset", "character-card", "user", "world-book"]

#: ``clearResource(kind, id)`` kinds (`docs/contract/loader.md#session-bindings`).
RESOURCE_KINDS: Final[tuple[ResourceKind, ...]] = ("preset", "character-card", "user", "world-book")
_RP_SOURCES: Final = frozenset({"command", "character-follow"})
_SANDBOX_MODES: Final = frozenset({"read-only", "workspace-write", "danger-full-access"})


class RpState(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``selection.rp``: whether RP is locked on, who asked, and the sandbox to restore."""

    active: bool = False
    source: RpSource | None = None
    follow_suppressed: bool = False
    sandbox_before: SandboxMode | None = None


class CharacterOptions(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True
):
    """``selection.character``: only the three loader-known options; absent ones are omitted."""

    greeting_index: int | None = None
    prefer_character_system_prompt: bool | None = None
    prefer_character_post_history: bool | None = None


#: Longest Author's Note text (characters), deepest depth and longest interval it takes.
MAX_AUTHORS_NOTE_CHARS: Final = 20_000
MAX_AUTHORS_NOTE_DEPTH: Final = 10_000
MAX_AUTHORS_NOTE_INTERVAL: Final = 10_000
NoteRole = Literal["system", "user", "assistant"]


class AuthorsNote(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A chat's Author's Note (docs/prompt-assembly.md "Author's Note"): ``text`` inserted
    ``depth`` messages before the end of the chat as ``role``, in every ``interval``-th request
    (counted in user messages, SillyTavern's rule; 0 = never, 1 = always)."""

    text: str = ""
    depth: int = 4
    role: NoteRole = "system"
    interval: int = 1


class Selection(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One session's selection (immutable; edit with ``msgspec.structs.replace``)."""

    preset_id: str | None = None
    character_card_id: str | None = None
    user_id: str | None = None
    world_book_ids: tuple[str, ...] = ()
    character: CharacterOptions = msgspec.field(default_factory=CharacterOptions)
    rp: RpState = msgspec.field(default_factory=RpState)
    #: The chat's Author's Note. ``UNSET`` (no note) is never encoded, so the file and the wire
    #: form of a session without one are exactly what they were before notes existed.
    authors_note: AuthorsNote | msgspec.UnsetType = msgspec.UNSET


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``sessions[<id>]``: the selection and when it last changed (ISO 8601 UTC)."""

    selection: Selection
    updated_at: str


class SelectionFile(msgspec.Struct, kw_only=True, rename="camel"):
    """The whole ``session-selections.json`` document (schema 2)."""

    schema_version: int
    sessions: dict[str, SessionRecord]


class SelectionInvalid(ValueError):
    """A selection or session id breaks a bound; ``code`` is stable, ``path`` names the field."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: A selection or session id is malformed (HTTP 400).
SESSION_SELECTION_INVALID: Final = "SESSION_SELECTION_INVALID"
#: The session id fails the length/charset check (HTTP 400).
SESSION_ID_INVALID: Final = "SESSION_ID_INVALID"


def valid_session_id(value: object) -> bool:
    """Whether ``value`` may key a session in the store."""
    return isinstance(value, str) and SESSION_ID_PATTERN.fullmatch(value) is not None


def valid_resource_id(value: object) -> bool:
    """A stored resource reference: a non-empty string of at most 200 characters, no controls."""
    return (
        isinstance(value, str) and 0 < len(value) <= MAX_RESOURCE_ID_CHARS and value.isprintable()
    )


def check_session_id(value: object) -> str:
    """``value`` if it is a valid session id, else :class:`SelectionInvalid`."""
    if not valid_session_id(value):
        shown = repr(value)[:60] if isinstance(value, str) else type(value).__name__
        raise SelectionInvalid(
            SESSION_ID_INVALID,
            f"session id {shown} must match {SESSION_ID_PATTERN.pattern}",
        )
    assert isinstance(value, str)
    return value


def check_selection(selection: Selection) -> Selection:
    """Raise :class:`SelectionInvalid` unless every bound holds; returns ``selection``."""
    for name in ("preset_id", "character_card_id", "user_id"):
        value = getattr(selection, name)
        if value is not None and not valid_resource_id(value):
            raise SelectionInvalid(
                SESSION_SELECTION_INVALID,
                f"{name} must be null or 1-{MAX_RESOURCE_ID_CHARS} printable characters",
            )
    books = selection.world_book_ids
    if len(books) > MAX_WORLD_BOOKS_PER_SESSION:
        raise SelectionInvalid(
            SESSION_SELECTION_INVALID,
            f"a session can bind at most {MAX_WORLD_BOOKS_PER_SESSION} world books",
        )
    if len(set(books)) != len(books):
        raise SelectionInvalid(SESSION_SELECTION_INVALID, "worldBookIds must be unique")
    if not all(valid_resource_id(b) for b in books):
        raise SelectionInvalid(
            SESSION_SELECTION_INVALID,
            f"every worldBookId must be 1-{MAX_RESOURCE_ID_CHARS} printable characters",
        )
    note = selection.authors_note
    if isinstance(note, AuthorsNote):
        check_authors_note(note)
    index = selection.character.greeting_index
    if index is not None and not (0 <= index <= MAX_SAFE_INTEGER):
        raise SelectionInvalid(
            SESSION_SELECTION_INVALID, "character.greetingIndex must be a non-negative integer"
        )
    return selection


def check_authors_note(note: AuthorsNote) -> AuthorsNote:
    """Raise :class:`SelectionInvalid` unless the note's bounds hold."""
    if len(note.text) > MAX_AUTHORS_NOTE_CHARS:
        raise SelectionInvalid(
            SESSION_SELECTION_INVALID,
            f"authorsNote.text is longer than {MAX_AUTHORS_NOTE_CHARS} characters",
        )
    if not 0 <= note.depth <= MAX_AUTHORS_NOTE_DEPTH:
        raise SelectionInvalid(
            SESSION_SELECTION_INVALID, f"authorsNote.depth must be 0-{MAX_AUTHORS_NOTE_DEPTH}"
        )
    if not 0 <= note.interval <= MAX_AUTHORS_NOTE_INTERVAL:
        raise SelectionInvalid(
            SESSION_SELECTION_INVALID,
            f"authorsNote.interval must be 0-{MAX_AUTHORS_NOTE_INTERVAL}",
        )
    return note


def note_of(selection: Selection) -> AuthorsNote | None:
    """The selection's Author's Note, or ``None``."""
    note = selection.authors_note
    return note if isinstance(note, AuthorsNote) else None


def note_applies(note: AuthorsNote | None, user_messages: int) -> bool:
    """Whether ``note`` goes into a request made after ``user_messages`` user messages:
    SillyTavern's frequency rule (interval 1: always; 0: never; N: every N-th user message)."""
    if note is None or not note.text.strip() or note.interval <= 0:
        return False
    if note.interval == 1:
        return True
    return user_messages > 0 and user_messages % note.interval == 0


# ------------------------------------------------------------------ lenient reading


def _id_or_none(value: Any) -> str | None:
    return value if valid_resource_id(value) else None


def _book_ids(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    kept = dict.fromkeys(v for v in value if valid_resource_id(v))
    return tuple(kept)[:MAX_WORLD_BOOKS_PER_SESSION]


def _strict_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def normalize_character_options(value: Any) -> CharacterOptions:
    """Keep only ``greetingIndex`` (a non-negative safe integer) and the two ``prefer*`` flags."""
    if not isinstance(value, dict):
        return CharacterOptions()
    index = value.get("greetingIndex")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_SAFE_INTEGER:
        index = None
    return CharacterOptions(
        greeting_index=index,
        prefer_character_system_prompt=_strict_bool(value.get("preferCharacterSystemPrompt")),
        prefer_character_post_history=_strict_bool(value.get("preferCharacterPostHistory")),
    )


def normalize_rp(value: Any) -> RpState:
    """RP fields outside their types or enums take their defaults."""
    if not isinstance(value, dict):
        return RpState()
    source = value.get("source")
    sandbox = value.get("sandboxBefore")
    return RpState(
        active=value.get("active") is True,
        source=source if source in _RP_SOURCES else None,
        follow_suppressed=value.get("followSuppressed") is True,
        sandbox_before=sandbox if sandbox in _SANDBOX_MODES else None,
    )


def normalize_selection(value: Any) -> Selection:
    """Read a stored (v1 or v2) selection leniently; the result always passes
    :func:`check_selection`."""
    if not isinstance(value, dict):
        value = {}
    return Selection(
        preset_id=_id_or_none(value.get("presetId")),
        character_card_id=_id_or_none(value.get("characterCardId")),
        user_id=_id_or_none(value.get("userId")),
        world_book_ids=_book_ids(value.get("worldBookIds")),
        character=normalize_character_options(value.get("character")),
        rp=normalize_rp(value.get("rp")),
        authors_note=_note_or_none(value.get("authorsNote")) or msgspec.UNSET,
    )


def _note_or_none(value: Any) -> AuthorsNote | None:
    if not isinstance(value, dict):
        return None
    try:
        return check_authors_note(msgspec.convert(value, AuthorsNote))
    except (msgspec.ValidationError, SelectionInvalid):
        return None


def selection_wire(selection: Selection) -> dict[str, Any]:
    """The selection as JSON builtins (camelCase, ``character`` without absent options)."""
    wire: dict[str, Any] = msgspec.to_builtins(selection)
    wire["worldBookIds"] = list(selection.world_book_ids)
    return wire


def without_resource(selection: Selection, kind: ResourceKind, resource_id: str) -> Selection:
    """``selection`` with every reference to ``(kind, resource_id)`` removed (itself if none).

    Clearing a card also clears its options (greeting index, prefer flags), which only make
    sense for that card.
    """
    replace = msgspec.structs.replace
    if kind == "preset" and selection.preset_id == resource_id:
        return replace(selection, preset_id=None)
    if kind == "character-card" and selection.character_card_id == resource_id:
        return replace(selection, character_card_id=None, character=CharacterOptions())
    if kind == "user" and selection.user_id == resource_id:
        return replace(selection, user_id=None)
    if kind == "world-book" and resource_id in selection.world_book_ids:
        kept = tuple(b for b in selection.world_book_ids if b != resource_id)
        return replace(selection, world_book_ids=kept)
    return selection


__all__ = [
    "MAX_AUTHORS_NOTE_CHARS",
    "MAX_RESOURCE_ID_CHARS",
    "MAX_SAFE_INTEGER",
    "MAX_WORLD_BOOKS_PER_SESSION",
    "RESOURCE_KINDS",
    "SESSION_ID_INVALID",
    "SESSION_ID_PATTERN",
    "SESSION_SELECTION_INVALID",
    "AuthorsNote",
    "CharacterOptions",
    "ResourceKind",
    "RpSource",
    "RpState",
    "SandboxMode",
    "Selection",
    "SelectionFile",
    "SelectionInvalid",
    "SessionRecord",
    "check_authors_note",
    "check_selection",
    "check_session_id",
    "normalize_character_options",
    "normalize_rp",
    "normalize_selection",
    "note_applies",
    "note_of",
    "selection_wire",
    "valid_resource_id",
    "valid_session_id",
    "without_resource",
]
