"""A dense book's candidates in rank order without sorting them.

When most of a book's entries are candidates, taking them in the book's own order (``order``
descending, then entry order: docs/worldbook.md#wi-book-order), worked out once per revision and
filtered by the loop's candidate slots, is cheaper than sorting them every loop. Once the token
budget has overflowed, most candidates are deferred (:mod:`.deferral`): the loop then needs only
the ones that are not, which :func:`eager_order` lists once per revision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from innkeeper_tavern.pure.worldbook.matcher import CompiledBook

__all__ = ["EagerOrder", "book_order", "drop_eager_order", "eager_order", "has_groups"]

#: Positions of a book fit in this many bits (as in :attr:`~.candidates.Item.order_key`).
_POSITION_BITS: Final = 32


def book_order(book: CompiledBook) -> list[int]:
    """The book's slots in its own sort order (``order`` descending, then entry order): what
    :attr:`~.candidates.Item.order_key` sorts by, worked out once per revision (kept with the
    book)."""
    found = book.engine_cache.get("order")
    if isinstance(found, list):
        return found
    raw, mask = book.raw, (1 << _POSITION_BITS) - 1
    keys = []
    for position, slot in enumerate(book.slot_at):
        entry = raw[slot]
        assert entry is not None
        keys.append((-entry.order << _POSITION_BITS) + position)
    keys.sort()
    slot_at = book.slot_at
    order = [slot_at[key & mask] for key in keys]
    book.engine_cache["order"] = order
    return order


def has_groups(book: CompiledBook) -> bool:
    """Whether any entry of the book names an inclusion group (kept with the book): without
    one, no loop over it has groups to choose among."""
    found = book.engine_cache.get("groups")
    if not isinstance(found, bool):
        found = book.engine_cache["groups"] = any(entry.group for entry in book.book.entries)
    return found


@dataclass(slots=True)
class EagerOrder:
    """The slots of :func:`book_order` whose entry is not known to be deferrable (not
    deferrable, or not compiled when this was made), with their index in that order."""

    at: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    #: match class → the slot of a deferrable entry of that class (to work out its match set)
    classes: dict[int, int] = field(default_factory=dict)


def eager_order(book: CompiledBook) -> EagerOrder:
    """The book's :class:`EagerOrder` (kept with the book until :func:`drop_eager_order`)."""
    found = book.engine_cache.get("eager")
    if isinstance(found, EagerOrder):
        return found
    out = EagerOrder()
    by_slot = book.by_slot
    for index, slot in enumerate(book_order(book)):
        compiled_entry = by_slot[slot]
        if compiled_entry is None or not compiled_entry.deferrable:
            out.at.append(index)
            out.slots.append(slot)
        elif compiled_entry.match_class not in out.classes:
            out.classes[compiled_entry.match_class] = slot
    book.engine_cache["eager"] = out
    return out


def drop_eager_order(book: CompiledBook) -> None:
    """Forget the book's :class:`EagerOrder`: many entries it lists as unknown have been
    compiled since, and turned out deferrable."""
    book.engine_cache.pop("eager", None)
