"""The entries of one activation: the request-wide ranked list and each entry's verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from innkeeper_tavern.pure.worldbook.matcher import CompiledBook, CompiledEntry
from innkeeper_tavern.pure.worldbook.model import BookInput, BookSource, CharacterStrategy, Reason

__all__ = ["Item", "Items", "Verdict"]


@dataclass(slots=True)
class Verdict:
    """Mutable interim decision of one entry (the last loop's verdict wins unless activated)."""

    reason: Reason
    detail: str = ""
    matched_primary: tuple[str, ...] = ()
    matched_secondary: tuple[str, ...] = ()
    score: int = 0
    group_winner: str | None = None
    roll: float | None = None
    tokens: int | None = None
    loop: int = 0
    activated: bool = False


@dataclass(slots=True)
class Item:
    """One entry in the request-wide sorted list."""

    book: int
    entry: CompiledEntry
    compiled: CompiledBook
    key: tuple[int, int] = (0, 0)
    #: the entry's place in the request-wide sort (:class:`Items`)
    rank: tuple[int, float, int, int, int] = (0, 0.0, 0, 0, 0)

    def __post_init__(self) -> None:
        self.key = (self.book, self.entry.index)


class Items:
    """The request-wide sorted entry list (§1.4), materialized only where it is looked at.

    ST sorts every entry of every book once per request: chat lore, persona lore, then global
    and character lore per the character strategy, each by ``order`` descending, ties in
    composition then entry order. That order is the tuple :attr:`Item.rank`: ``(bucket,
    -order, sub-bucket, book, entry)`` (the sub-bucket keeps global before character lore when
    the strategy merges them), so candidates can be ordered without sorting the whole book.
    """

    def __init__(
        self,
        compiled: Sequence[CompiledBook | None],
        books: Sequence[BookInput],
        strategy: CharacterStrategy,
    ) -> None:
        self.compiled = compiled
        if strategy == CharacterStrategy.EVENLY:
            global_rank, char_rank = (2, 0), (2, 1)
        elif strategy == CharacterStrategy.GLOBAL_FIRST:
            global_rank, char_rank = (2, 0), (3, 0)
        else:
            global_rank, char_rank = (3, 0), (2, 0)
        of_source = {
            BookSource.SESSION: (0, 0),
            BookSource.USER: (1, 0),
            BookSource.PRESET: global_rank,
            BookSource.CHARACTER: char_rank,
            BookSource.EMBEDDED: char_rank,
        }
        self._bucket = [of_source[b.source] for b in books]
        self._made: dict[tuple[int, int], Item] = {}

    def get(self, key: tuple[int, int]) -> Item:
        """The item of entry ``key = (book, slot)`` of an admitted book."""
        found = self._made.get(key)
        if found is None:
            book_index, slot = key
            book = self.compiled[book_index]
            assert book is not None
            compiled_entry = book.entry_at(slot)
            found = Item(book_index, compiled_entry, book)
            bucket, sub = self._bucket[book_index]
            order = -compiled_entry.entry.order
            found.rank = (bucket, order, sub, book_index, book.position[slot])
            self._made[key] = found
        return found

    def by_lore_id(self, lore_id: str) -> Item | None:
        """The entry with this lore id (the last in sort order when several share it)."""
        best: Item | None = None
        for book_index, book in enumerate(self.compiled):
            if book is None:
                continue
            for slot in book.lore_index.get(lore_id, ()):
                item = self.get((book_index, slot))
                if best is None or item.rank > best.rank:
                    best = item
        return best
