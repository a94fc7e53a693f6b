"""The entries of one activation: the request-wide ranked list and each entry's verdict."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from innkeeper_tavern.pure.formats.worldbook import SelectiveLogic
from innkeeper_tavern.pure.worldbook.matcher import CompiledBook, CompiledEntry
from innkeeper_tavern.pure.worldbook.model import BookInput, BookSource, CharacterStrategy, Reason

__all__ = [
    "Deferred",
    "Item",
    "Items",
    "Verdict",
    "secondary_verdict",
]


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
    #: ``(tokens used, budget)`` of an entry rejected after the budget overflowed whose token
    #: count (and so ``tokens`` and ``detail``) is worked out when its decision is read
    pending_budget: tuple[int, int] | None = None
    #: the needles that matched in its loop, for a plain entry kept without secondary keys
    #: whose ``matched_primary`` (and ``score``, which only groups read) is worked out when its
    #: decision is read (:meth:`primary`)
    needles: Collection[int] | None = None

    def primary(self, entry: CompiledEntry) -> tuple[str, ...]:
        """:attr:`matched_primary`, worked out from :attr:`needles` if it was left to the read."""
        needles = self.needles
        if needles is None:
            return self.matched_primary
        return tuple([r.raw for r in entry.primary if r.needle in needles])


@dataclass(slots=True, eq=False)
class Item:
    """One entry in the request-wide sorted list (one object per entry and request, so sets of
    items compare by identity)."""

    book: int
    entry: CompiledEntry
    compiled: CompiledBook
    key: tuple[int, int]
    #: the entry's place in the request-wide sort (:class:`Items`)
    rank: tuple[int, int, int, int, int]
    #: the same place inside its book: ``-order`` then position, as one integer
    order_key: int


#: Positions of a book fit in this many bits (slots of a lineage stay below 2 × 10,000 + 256).
_POSITION_BITS = 32


class Items:
    """The request-wide sorted entry list, materialized only where it is looked at.

    The sort: docs/worldbook.md#wi-book-order.

    ST sorts every entry of every book once per request: chat lore, persona lore, then global
    and character lore per the character strategy, each by ``order`` descending, ties in
    composition then entry order. That order is the tuple :attr:`Item.rank`: ``(bucket,
    -order, sub-bucket, book, entry)`` (the sub-bucket keeps global before character lore when
    the strategy merges them), so candidates can be ordered without sorting the whole book.
    Items are kept with the compiled book for the next request that puts the book in the same
    place, so a dense book's thousands of candidates are not rebuilt every turn.
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
        self._made: list[dict[int, Item]] = []
        for book_index, book in enumerate(compiled):
            if book is None:
                self._made.append({})
                continue
            key = ("items", book_index, self._bucket[book_index])
            made = book.engine_cache.get(key)
            if not isinstance(made, dict):
                made = book.engine_cache.setdefault(key, {})
            self._made.append(made)  # type: ignore[arg-type]

    def made(self, book_index: int) -> dict[int, Item]:
        """Slot → the items of book ``book_index`` made so far (kept with the compiled book)."""
        return self._made[book_index]

    def get(self, book_index: int, slot: int) -> Item:
        """The item of entry ``slot`` of admitted book ``book_index``."""
        found = self._made[book_index].get(slot)
        if found is None:
            book = self.compiled[book_index]
            assert book is not None
            compiled_entry = book.entry_at(slot)
            bucket, sub = self._bucket[book_index]
            order = -compiled_entry.entry.order
            position = book.position[slot]
            found = Item(
                book=book_index,
                entry=compiled_entry,
                compiled=book,
                key=(book_index, slot),
                rank=(bucket, order, sub, book_index, position),
                order_key=(order << _POSITION_BITS) + position,
            )
            self._made[book_index][slot] = found
        return found

    def by_lore_id(self, lore_id: str) -> Item | None:
        """The entry with this lore id (the last in sort order when several share it)."""
        best: Item | None = None
        for book_index, book in enumerate(self.compiled):
            if book is None:
                continue
            for slot in book.lore_index.get(lore_id, ()):
                item = self.get(book_index, slot)
                if best is None or item.rank > best.rank:
                    best = item
        return best


@dataclass(slots=True, eq=False)
class Deferred:
    """The verdict of plain entries met after the budget overflowed, worked out when read.

    Such an entry can only be rejected: without a key hit (``no-key-match``), by its secondary
    keys, or by the budget it would have exceeded. One object stands for every such entry of a
    book with the same needles, loop and budget state (the verdict map points each of their
    slots at it); ``needles`` is what matched for them in that loop
    (:meth:`~.keytests.KeyTests.match_set`, never changed afterwards).
    """

    needles: Collection[int]
    loop: int
    #: ``(tokens used, budget)`` when the entries were met
    pending: tuple[int, int]

    def resolve(self, item: Item) -> Verdict:
        """The verdict the loop would have recorded for ``item``."""
        compiled_entry, needles, loop = item.entry, self.needles, self.loop
        primary = tuple([r.raw for r in compiled_entry.primary if r.needle in needles])
        if not primary:
            return Verdict(reason=Reason.NO_KEY_MATCH, loop=loop)
        if compiled_entry.entry.selective and compiled_entry.secondary:
            secondary = tuple([r.raw for r in compiled_entry.secondary if r.needle in needles])
            verdict = secondary_verdict(
                compiled_entry.entry.selective_logic, primary, secondary, item, loop
            )
            if not verdict.activated:
                return verdict
        else:
            verdict = Verdict(
                reason=Reason.KEY_MATCH, matched_primary=primary, score=len(primary), loop=loop
            )
        verdict.activated = False
        verdict.reason = Reason.BUDGET
        verdict.pending_budget = self.pending
        return verdict


def secondary_verdict(
    logic: SelectiveLogic,
    primary: tuple[str, ...],
    secondary: tuple[str, ...],
    item: Item,
    loop: int,
) -> Verdict:
    """Secondary-key logic for an entry whose primary keys matched.

    docs/worldbook.md#wi-entry-checks.
    """
    total = len(item.entry.secondary)
    hit_any = bool(secondary)
    hit_all = len(secondary) == total
    passed = {
        SelectiveLogic.AND_ANY: hit_any,
        SelectiveLogic.NOT_ALL: not hit_all,
        SelectiveLogic.NOT_ANY: not hit_any,
        SelectiveLogic.AND_ALL: hit_all,
    }[logic]
    if not passed:
        return Verdict(
            reason=Reason.SECONDARY_LOGIC,
            detail=f"{logic.name}: {len(secondary)} of {total} secondary keys matched",
            matched_primary=primary,
            matched_secondary=secondary,
            loop=loop,
        )
    score = len(primary)
    if logic == SelectiveLogic.AND_ANY:
        score += len(secondary)
    elif logic == SelectiveLogic.AND_ALL and hit_all:
        score += total
    return Verdict(
        reason=Reason.KEY_MATCH,
        matched_primary=primary,
        matched_secondary=secondary,
        score=score,
        activated=True,
        loop=loop,
    )
