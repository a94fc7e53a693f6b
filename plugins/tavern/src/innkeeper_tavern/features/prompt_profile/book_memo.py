"""Facts derived from a world book once per revision, not once per turn.

The loader asks two questions of every bound book on every turn: is it the card's own book
(:mod:`.book_twins`, a fingerprint of all its entries) and how many `[initvar]` entries does it
hold (:mod:`.initvar_notice`). Both scan the whole book — about 13 ms for a 10,000-entry book —
although the answer changes only when the book does. A stored book's revision is its document's
content hash and an embedded book's is its card's revision, so a memo keyed by
``(resource id, revision)`` answers an unchanged book for free.

After an edit the memo need not scan the new revision either: with an ``update`` function it
finds the entries that changed since the last revision it answered for the same resource (the
entry tuples' common prefix and suffix, compared by identity first: an edit keeps the objects of
the entries it left alone) and updates that revision's value by the removed and added entries —
one entry's save costs one entry's work. A change larger than
:data:`~innkeeper_tavern.pure.worldbook.incremental.MAX_CHANGED_ENTRIES` entries is derived
from scratch.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook.incremental import MAX_CHANGED_ENTRIES, common_prefix

__all__ = ["BOOK_MEMO_SIZE", "BookMemo", "Update"]

#: Books remembered per memo (least recently used first out); the record cache's size.
BOOK_MEMO_SIZE = 64

V = TypeVar("V")

#: ``(previous value, removed entries, added entries) -> value``: must equal ``derive`` of the
#: new book whenever the previous value was ``derive`` of the previous book.
Update = Callable[[V, Sequence[WorldBookEntry], Sequence[WorldBookEntry]], V]


class BookMemo(Generic[V]):
    """``derive(book)`` cached by ``(resource_id, revision)`` (an LRU of ``size`` books), and
    updated from the resource's previous revision by ``update`` when one is given."""

    def __init__(
        self,
        derive: Callable[[WorldBook], V],
        size: int = BOOK_MEMO_SIZE,
        update: Update[V] | None = None,
    ) -> None:
        self.derive = derive
        self.size = size
        self.update = update
        self._items: collections.OrderedDict[tuple[str, str], V] = collections.OrderedDict()
        #: resource id → the book and value of the last revision answered for it
        self._latest: dict[str, tuple[WorldBook, V]] = {}
        #: How many values were updated rather than derived (for tests and benchmarks).
        self.updated = 0

    def get(self, resource_id: str, revision: str, book: WorldBook) -> V:
        """The derived value of this revision of the book (computed on the first call)."""
        key = (resource_id, revision)
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = self._updated(resource_id, book)
        if value is None:
            value = self.derive(book)
        self._items[key] = value
        self._latest[resource_id] = (book, value)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        if len(self._latest) > self.size:
            live = {rid for rid, _ in self._items}
            self._latest = {rid: v for rid, v in self._latest.items() if rid in live}
        return value

    def _updated(self, resource_id: str, book: WorldBook) -> V | None:
        """The value updated from the resource's last revision, or ``None`` (derive it)."""
        latest = self._latest.get(resource_id)
        if self.update is None or latest is None:
            return None
        old_book, old_value = latest
        before, after = old_book.entries, book.entries
        head = common_prefix(before, after)
        tail = common_prefix(before[head:][::-1], after[head:][::-1])
        removed = before[head : len(before) - tail]
        added = after[head : len(after) - tail]
        if len(removed) + len(added) > MAX_CHANGED_ENTRIES:
            return None
        self.updated += 1
        return self.update(old_value, removed, added)

    def __len__(self) -> int:
        return len(self._items)
