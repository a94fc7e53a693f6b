"""Standalone world-book relations of presets, characters and users.

`docs/contract/world-info.md#relations` and `docs/contract/world-info.md#relations`: presets and
character cards bind ordered lists of standalone world-book ids in
``resource-world-book-bindings.json`` (partitioned by owner kind ``preset``/``character``); users
bind theirs in ``user-world-book-bindings.json``. Nothing is written into the ST originals. A PUT
fully replaces one owner's list; duplicates are removed stably; at most 100 books per owner. The
files bound owner count and bytes.

The functions here are pure (state in, new state out); :class:`~.service.TavernResources` checks
that owners and books exist and persists the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from .errors import WORLD_BOOK_BINDING_INVALID, WORLD_BOOK_BINDING_LIMIT, ResourceError
from .library import valid_id

#: `docs/contract/world-info.md#relations`: ≤ 100 books per owner.
MAX_BOOKS_PER_OWNER: Final = 100
#: `docs/contract/world-info.md#relations`: the relation store bounds
#: owner count. Ours: one entry per stored preset/card/user at most (libraries hold ≤ 4,096).
MAX_OWNERS_PER_KIND: Final = 8_192
#: Same section: the relation store bounds state bytes (8,192 owners × 100 ids fit well below).
MAX_RELATION_FILE_BYTES: Final = 16 << 20

RESOURCE_BINDINGS_FILE: Final = "resource-world-book-bindings.json"
USER_BINDINGS_FILE: Final = "user-world-book-bindings.json"

OwnerKind = Literal["preset", "character", "user"]


class ResourceBindings(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """``resource-world-book-bindings.json``: owner id → ordered world-book ids, per kind."""

    schema_version: int = 1
    preset: dict[str, list[str]] = msgspec.field(default_factory=dict)
    character: dict[str, list[str]] = msgspec.field(default_factory=dict)


class UserBindings(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """``user-world-book-bindings.json``: user id → ordered world-book ids."""

    schema_version: int = 1
    user: dict[str, list[str]] = msgspec.field(default_factory=dict)


def normalize_book_ids(value: Any) -> list[str]:
    """Validate a ``worldBookIds`` array: strings that are valid ids, at most 100 after stable
    de-duplication. Raises :class:`ResourceError` (400)."""
    if not isinstance(value, list):
        raise ResourceError(400, WORLD_BOOK_BINDING_INVALID, "worldBookIds must be an array")
    out: list[str] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        if not isinstance(item, str) or not valid_id(item):
            raise ResourceError(
                400,
                WORLD_BOOK_BINDING_INVALID,
                f"worldBookIds[{index}] is not a valid world-book id",
            )
        if item not in seen:
            seen.add(item)
            out.append(item)
    if len(out) > MAX_BOOKS_PER_OWNER:
        raise ResourceError(
            400,
            WORLD_BOOK_BINDING_LIMIT,
            f"at most {MAX_BOOKS_PER_OWNER} world books can be bound to one resource",
        )
    return out


def owner_map(state: ResourceBindings | UserBindings, kind: OwnerKind) -> Mapping[str, list[str]]:
    """The owner → ids map of ``kind`` in ``state``."""
    result: Mapping[str, list[str]] = getattr(state, kind)
    return result


def with_owner(
    state: ResourceBindings | UserBindings, kind: OwnerKind, owner: str, ids: Sequence[str]
) -> Any:
    """``state`` with ``owner``'s list replaced (an empty list removes the owner)."""
    current = dict(owner_map(state, kind))
    if ids:
        if owner not in current and len(current) >= MAX_OWNERS_PER_KIND:
            raise ResourceError(
                409, WORLD_BOOK_BINDING_LIMIT, f"at most {MAX_OWNERS_PER_KIND} {kind} relations"
            )
        current[owner] = list(ids)
    else:
        current.pop(owner, None)
    return msgspec.structs.replace(state, **{kind: current})


def without_books(
    state: ResourceBindings | UserBindings, kinds: Iterable[OwnerKind], book_id: str
) -> Any:
    """``state`` with ``book_id`` removed from every owner's list (owners left empty vanish)."""
    changes: dict[str, dict[str, list[str]]] = {}
    for kind in kinds:
        current = owner_map(state, kind)
        updated = {owner: [b for b in ids if b != book_id] for owner, ids in current.items()}
        changes[kind] = {owner: ids for owner, ids in updated.items() if ids}
    return msgspec.structs.replace(state, **changes)


def references(
    state: ResourceBindings | UserBindings, kinds: Iterable[OwnerKind], book_id: str
) -> bool:
    """Whether any owner of ``kinds`` binds ``book_id``."""
    return any(book_id in ids for kind in kinds for ids in owner_map(state, kind).values())
