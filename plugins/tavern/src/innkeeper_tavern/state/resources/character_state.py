"""``character-state.json``: sidebar sort mode, custom order and missing-card tombstones.

`docs/contract/resources.md#character-order`: modes ``updated`` (``updatedAt`` descending, then
name, id), ``name`` (A→Z) and ``custom`` (drag order). Mode and custom order are stored separately
as ``characterSortMode`` and ``characterOrder``; switching modes keeps a saved custom order;
``characterIds`` must contain every stored card exactly once, at most 4,096.
`docs/contract/resources.md#missing-cards`: deleting a card keeps a bounded tombstone (id, display
name, source SHA-256).

The functions here are pure; :class:`~.service.TavernResources` persists the results.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from .errors import CHARACTER_ORDER_INVALID, CHARACTER_SORT_MODE_INVALID, ResourceError
from .library import IndexEntry

#: `docs/contract/resources.md#character-order`: at most 4,096 ids in a custom order.
MAX_CHARACTER_ORDER: Final = 4_096
#: `docs/resources.md#original-data`: up to 4,096 tombstones; the oldest go first.
MAX_TOMBSTONES: Final = 4_096
#: Bytes of ``character-state.json`` (4,096 ids + 4,096 tombstones with 200-char names).
MAX_CHARACTER_STATE_BYTES: Final = 8 << 20
CHARACTER_STATE_FILE: Final = "character-state.json"
#: Sort keys remembered (one per distinct card name; the library holds ≤ 4,096 cards).
NAME_KEY_CACHE_SIZE: Final = 8_192

SortMode = Literal["updated", "name", "custom"]
SORT_MODES: Final = ("updated", "name", "custom")


class Tombstone(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """A deleted card that playthroughs may still reference."""

    id: str
    name: str
    sha256: str | None = None
    deleted_at: str = ""


class CharacterState(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """The file's content."""

    schema_version: int = 1
    character_sort_mode: SortMode = "updated"
    character_order: list[str] = msgspec.field(default_factory=list)
    missing_characters: list[Tombstone] = msgspec.field(default_factory=list)


_DIGITS: Final = re.compile(r"(\d+)")
# Digit runs are padded to this width for numeric order (longer runs still compare sanely).
_NUMBER_WIDTH: Final = 20


@functools.lru_cache(maxsize=NAME_KEY_CACHE_SIZE)
def name_key(name: str) -> str:
    """A locale-independent A→Z key: NFKC, case-folded, digit runs compared as numbers.

    Returned as one string (digit runs zero-padded) so sorting 4,096 cards compares plain
    strings. The original uses ``Intl.Collator('zh-CN', {numeric: true})``; without ICU this
    orders Han characters by code point, not by pinyin (a documented gap in docs/resources.md).
    """
    text = unicodedata.normalize("NFKC", name).casefold().strip()
    return _DIGITS.sub(lambda m: m.group(1).lstrip("0").rjust(_NUMBER_WIDTH, "0"), text)


def sort_entries(
    entries: Sequence[IndexEntry], mode: SortMode, order: Sequence[str]
) -> list[IndexEntry]:
    """The catalog in display order for ``mode`` (``order`` is the saved custom order)."""
    by_updated = sorted(entries, key=lambda e: (name_key(e.name), e.id))
    by_updated.sort(key=lambda e: e.updated_at, reverse=True)
    if mode == "updated":
        return by_updated
    if mode == "name":
        return sorted(entries, key=lambda e: (name_key(e.name), e.id))
    position = {cid: i for i, cid in enumerate(order)}
    placed = sorted((e for e in entries if e.id in position), key=lambda e: position[e.id])
    # Cards added while away are appended, oldest first.
    rest = sorted((e for e in entries if e.id not in position), key=lambda e: (e.created_at, e.id))
    return placed + rest


def parse_mode(value: Any) -> SortMode:
    """Validate ``mode``."""
    if value == "updated":
        return "updated"
    if value == "name":
        return "name"
    if value == "custom":
        return "custom"
    raise ResourceError(
        400, CHARACTER_SORT_MODE_INVALID, "mode must be 'updated', 'name' or 'custom'"
    )


def checked_order(value: Any, stored: set[str]) -> list[str]:
    """Validate ``characterIds``: every stored id exactly once, no unknown ids, ≤ 4,096."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ResourceError(400, CHARACTER_ORDER_INVALID, "characterIds must be an array of ids")
    if len(value) > MAX_CHARACTER_ORDER:
        raise ResourceError(
            400, CHARACTER_ORDER_INVALID, f"at most {MAX_CHARACTER_ORDER} characterIds"
        )
    seen: set[str] = set()
    for cid in value:
        if cid in seen:
            raise ResourceError(400, CHARACTER_ORDER_INVALID, f"duplicate character id {cid!r}")
        if cid not in stored:
            raise ResourceError(400, CHARACTER_ORDER_INVALID, f"unknown character id {cid!r}")
        seen.add(cid)
    missing = stored - seen
    if missing:
        raise ResourceError(
            400,
            CHARACTER_ORDER_INVALID,
            f"characterIds must list every stored card; {len(missing)} missing",
        )
    return list(value)


def with_tombstone(state: CharacterState, tombstone: Tombstone) -> CharacterState:
    """``state`` with the tombstone added (replacing one of the same id), oldest evicted."""
    kept = [t for t in state.missing_characters if t.id != tombstone.id]
    kept.append(tombstone)
    if len(kept) > MAX_TOMBSTONES:
        kept = kept[-MAX_TOMBSTONES:]
    order = [cid for cid in state.character_order if cid != tombstone.id]
    return msgspec.structs.replace(state, missing_characters=kept, character_order=order)


def normalized_name(name: str) -> str:
    """Name used for same-name relink matching (NFKC, case-folded, inner spaces collapsed)."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def match_tombstone(
    state: CharacterState, sha256: str | None, name: str, live_names: Sequence[str]
) -> tuple[Tombstone, str] | None:
    """The missing card a newly imported card matches, and how (``sha256`` or ``name``).

    `docs/contract/resources.md#missing-cards`: a unique SHA-256 match first; else a
    normalized same-name match only when the name is unique among missing cards and among live
    cards (``live_names`` includes the new card). Several candidates are not guessed.
    """
    if sha256:
        hits = [t for t in state.missing_characters if t.sha256 == sha256]
        if len(hits) == 1:
            return hits[0], "sha256"
        if hits:
            return None
    wanted = normalized_name(name)
    if not wanted:
        return None
    hits = [t for t in state.missing_characters if normalized_name(t.name) == wanted]
    live = sum(1 for n in live_names if normalized_name(n) == wanted)
    if len(hits) == 1 and live == 1:
        return hits[0], "name"
    return None
