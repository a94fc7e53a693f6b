"""``MatcherCache``: compiled books per revision, derived incrementally, and cached refusals.

A long-lived cache is what keeps activation proportional to the scan window and the matches:

- a book is compiled once per ``(resource_id, revision)``; a new revision of a book the cache
  already holds is derived from the previous one (:func:`~.incremental.derive_book`), so a
  single-entry edit costs about that entry, not the book;
- a book the host cap refuses (`docs/contract/world-info.md#profile-budget`: books are
  reserved whole, at most 10,000 entries per request) is refused once per revision: its refusal
  (diagnostic and per-entry decisions, built on demand) is kept, so a refused book costs nothing
  per turn.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Final

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry

from .compiler import compile_book
from .incremental import derive_book
from .matcher import CompiledBook, uid_entries

__all__ = ["MATCHER_CACHE_SIZE", "MatcherCache", "RefusedBook"]

#: Compiled books (and refusals) kept per cache (least recently used are dropped).
MATCHER_CACHE_SIZE: Final = 64


@dataclass
class RefusedBook:
    """A book the host cap did not admit, for one revision and one reservation state."""

    resource_id: str
    book: WorldBook
    #: entries already reserved by earlier books when this one was refused
    reserved: int
    #: built on first use (the audit reads the first few decisions only)
    decisions: dict[int, object] = field(default_factory=dict)
    #: the audit's records of those decisions (see ``BookDecisions.records``)
    records: dict[int, tuple[object, object, object]] = field(default_factory=dict)

    @cached_property
    def uid_entries(self) -> dict[str, WorldBookEntry]:
        """``str(uid)`` → entry (the last one when uids repeat), built on first use."""
        return uid_entries(self.book)


class MatcherCache:
    """LRU of compiled books keyed by ``(resource_id, revision)``.

    When a caller has no revision, the key is the book object's identity, which is only safe while
    the caller keeps the same immutable :class:`WorldBook` alive (the cache holds a reference).
    Look-ups are locked, so activations may run in worker threads (regex keys can use up to
    ``REGEX_REQUEST_BUDGET_SECONDS`` of CPU: keep them off the event loop).
    """

    def __init__(self, size: int = MATCHER_CACHE_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, object], CompiledBook] = OrderedDict()
        self._refused: OrderedDict[tuple[str, object, int], RefusedBook] = OrderedDict()
        #: how many books were compiled from scratch / derived from a previous revision
        self.compiled = 0
        self.derived = 0

    def get(
        self,
        resource_id: str,
        book: WorldBook,
        revision: str | int | None,
        build: Callable[[str, WorldBook], CompiledBook] = compile_book,
    ) -> CompiledBook:
        """The compiled book for this revision; derived or compiled on a miss."""
        with self._lock:
            key: tuple[str, object] = (resource_id, _revision_key(book, revision))
            found = self._items.get(key)
            if found is not None and (revision is not None or found.book is book):
                self._items.move_to_end(key)
                return found
            previous_key, previous = next(
                ((k, c) for k, c in reversed(self._items.items()) if k[0] == resource_id),
                (None, None),
            )
        # Compile outside the lock: other books' activations go on meanwhile.
        compiled = derive_book(previous, resource_id, book) if previous is not None else None
        if compiled is None:
            compiled = build(resource_id, book)
            self.compiled += 1
        else:
            self.derived += 1
        with self._lock:
            if revision is not None:
                # The library keeps only a book's newest revision: keep this one and the one
                # before it (a request may still be using it), not a near-copy of every edit.
                for stale in [
                    k for k in self._items if k[0] == resource_id and k not in (key, previous_key)
                ]:
                    del self._items[stale]
            self._items[key] = compiled
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return compiled

    def refusal(
        self, resource_id: str, book: WorldBook, revision: str | int | None, reserved: int
    ) -> RefusedBook:
        """The cached refusal of this book revision (created on first refusal)."""
        key = (resource_id, _revision_key(book, revision), reserved)
        with self._lock:
            found = self._refused.get(key)
            if found is not None and (revision is not None or found.book is book):
                self._refused.move_to_end(key)
                return found
            refused = RefusedBook(resource_id=resource_id, book=book, reserved=reserved)
            self._refused[key] = refused
            while len(self._refused) > self._size:
                self._refused.popitem(last=False)
            return refused

    def __len__(self) -> int:
        return len(self._items)


def _revision_key(book: WorldBook, revision: str | int | None) -> object:
    return revision if revision is not None else id(book)
