"""Facts derived from a world book once per revision, not once per turn.

The loader asks two questions of every bound book on every turn: is it the card's own book
(:mod:`.book_twins`, a fingerprint of all its entries) and how many `[initvar]` entries does it
hold (:mod:`.initvar_notice`). Both scan the whole book — about 13 ms for a 10,000-entry book —
although the answer changes only when the book does. A stored book's revision is its document's
content hash and an embedded book's is its card's revision, so a memo keyed by
``(resource id, revision)`` answers an unchanged book for free and recomputes after an edit.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Generic, TypeVar

from innkeeper_tavern.pure.formats.worldbook import WorldBook

__all__ = ["BOOK_MEMO_SIZE", "BookMemo"]

#: Books remembered per memo (least recently used first out); the record cache's size.
BOOK_MEMO_SIZE = 64

V = TypeVar("V")


class BookMemo(Generic[V]):
    """``derive(book)`` cached by ``(resource_id, revision)`` (an LRU of ``size`` books)."""

    def __init__(self, derive: Callable[[WorldBook], V], size: int = BOOK_MEMO_SIZE) -> None:
        self.derive = derive
        self.size = size
        self._items: collections.OrderedDict[tuple[str, str], V] = collections.OrderedDict()

    def get(self, resource_id: str, revision: str, book: WorldBook) -> V:
        """The derived value of this revision of the book (computed on the first call)."""
        key = (resource_id, revision)
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = self.derive(book)
        self._items[key] = value
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)
