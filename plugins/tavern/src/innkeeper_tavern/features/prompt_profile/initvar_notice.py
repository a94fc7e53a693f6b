"""Say plainly when a bound book's `[initvar]` entries are not used (issue 10, item 10).

MVU initializes a session's variables from its character's template (docs/contract/mvu.md#identity:
``characterMvuId(characterId)`` identifies it): the card's embedded book and the standalone books
linked to the card. That mirrors MagVarUpdate, which reads `[initvar]` from the character's books
(docs/mvu.md#initvar-books). A book bound to the session, the persona or the preset
is scanned for lore like any other, but its `[initvar]` entries never reach the variables; without a
word the player cannot tell why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from innkeeper_tavern.features.prompt_render import Diagnostic
from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.mvu.initvar import INITVAR_MARKER

__all__ = ["MVU_INITVAR_NOT_USED", "initvar_entries", "initvar_update", "unused_initvar"]

MVU_INITVAR_NOT_USED: Final = "MVU_INITVAR_NOT_USED"


def initvar_entries(book: WorldBook) -> int:
    """How many of the book's entries are `[initvar]` entries (by their comment)."""
    return _count(book.entries)


def _count(entries: Sequence[WorldBookEntry]) -> int:
    return sum(1 for e in entries if INITVAR_MARKER in e.comment.lower())


def initvar_update(
    count: int, removed: Sequence[WorldBookEntry], added: Sequence[WorldBookEntry]
) -> int:
    """:func:`initvar_entries` of a revision from its predecessor's count and the changed
    entries (the loader's memo calls it after an edit)."""
    return count - _count(removed) + _count(added)


def unused_initvar(
    book_id: str,
    name: str,
    book: WorldBook,
    sources: Sequence[str],
    *,
    count: Callable[[WorldBook], int] = initvar_entries,
) -> Diagnostic | None:
    """An info diagnostic when ``book`` holds `[initvar]` entries but is not one of the
    character's books (``sources`` are its binding sources: session, user, preset, character).
    ``count`` defaults to :func:`initvar_entries`; the loader passes one cached per revision."""
    if "character" in sources:
        return None
    count_found = count(book)
    if count_found == 0:
        return None
    return Diagnostic(
        MVU_INITVAR_NOT_USED,
        f"world book {name!r} has [initvar] entries, but MVU initializes variables only from "
        "the character's own books (its embedded book and books linked to the card); link the "
        "book to the card (PUT /pmp-dsh-tavern/api/v1/characters/{id}/world-books) to use them",
        "info",
        details={"bookId": book_id, "initvarEntries": count_found, "bindingSources": list(sources)},
    )
