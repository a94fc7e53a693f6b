"""One decision per entry, without building 10,000 of them per activation.

:attr:`ActivationResult.decisions` is a :class:`DecisionList`: a read-only sequence of
:class:`~.model.EntryDecision` in book order, then entry order (exactly what it always held), whose
elements are made on demand. The activation records a decision for every entry it evaluated (the
candidates of its scan loops, entries whose rejection depends on the request, entries in
cooldown); every other entry was rejected for a reason that depends on the book revision only
(disabled, no keys, no key seen) and shares a decision object cached with the compiled entry, or
belongs to a book the host cap refused, whose decisions are cached with the refusal. So an
activation costs what it evaluated, and the audit (which keeps the first 128 decisions) reads
only those it keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, overload

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry

from .cache import RefusedBook
from .matcher import CompiledBook
from .model import EntryDecision, Reason

__all__ = [
    "BookDecisions",
    "DecisionList",
    "LazyDecisions",
    "refused_decisions",
    "static_decision",
]


class LazyDecisions(Mapping[int, EntryDecision]):
    """Entry position → decision for the entries that have one of their own in an activation,
    each built on first access by ``lookup`` (``None``: the entry has none; a dense book
    evaluates thousands of entries, the audit reads 128 decisions)."""

    __slots__ = ("_lookup", "_made", "_positions", "activated")

    def __init__(
        self,
        lookup: Callable[[int], EntryDecision | None],
        positions: Callable[[], list[int]],
        activated: set[int],
    ) -> None:
        self._lookup = lookup
        self._positions = positions
        self._made: dict[int, EntryDecision | None] = {}
        #: positions whose decision is "activated" (known without building the decisions)
        self.activated = activated

    def __getitem__(self, position: int) -> EntryDecision:
        if position in self._made:
            made = self._made[position]
        else:
            made = self._made[position] = self._lookup(position)
        if made is None:
            raise KeyError(position)
        return made

    def get(self, position: int, default: Any = None) -> Any:
        """The decision at ``position``, or ``default`` (without raising: most positions of a
        book have none of their own)."""
        if position in self._made:
            made = self._made[position]
        else:
            made = self._made[position] = self._lookup(position)
        return default if made is None else made

    def __iter__(self) -> Iterator[int]:
        return iter(self._positions())

    def __len__(self) -> int:
        return len(self._positions())


@dataclass(slots=True)
class BookDecisions:
    """The decisions of one book of the request."""

    resource_id: str
    book: WorldBook
    #: entry index → decision, for every entry the activation evaluated
    explicit: Mapping[int, EntryDecision]
    #: the decision of any other entry (cached per book revision by the caller)
    implicit: Callable[[int], EntryDecision]
    #: ``str(uid)`` → entry (cached per book revision by the caller)
    entries_by_uid: Callable[[], dict[str, WorldBookEntry]]
    #: entry index → ``(decision, its audit record's settings, record)`` of shared decisions,
    #: kept per book revision so the audit of a turn does not rebuild them (audit-owned)
    records: dict[int, tuple[object, object, object]] | None = None
    #: entry index → ``str(uid)`` (cached per book revision by the caller)
    uid_texts: Callable[[], list[str]] | None = None

    def __len__(self) -> int:
        return len(self.book.entries)

    def decision(self, index: int) -> EntryDecision:
        """The decision of entry ``index``."""
        found = self.explicit.get(index)
        return found if found is not None else self.implicit(index)

    def activated(self) -> list[int]:
        """Indices of the activated entries, in entry order."""
        if isinstance(self.explicit, LazyDecisions):
            return sorted(self.explicit.activated)
        return sorted(i for i, d in self.explicit.items() if d.activated)

    def rejected(self) -> Iterator[EntryDecision]:
        """The other decisions, in entry order (lazily: stop reading when you have enough)."""
        for _, decision, _ in self.rejected_indexed():
            yield decision

    def rejected_indexed(self) -> Iterator[tuple[int, EntryDecision, bool]]:
        """:meth:`rejected` with each entry index and whether the decision is the shared one
        of the book revision (the same object every turn)."""
        for index in range(len(self.book.entries)):
            found = self.explicit.get(index)
            decision = found if found is not None else self.implicit(index)
            if not decision.activated:
                yield index, decision, found is None


class DecisionList(Sequence[EntryDecision]):
    """Every entry's decision, book by book, made on demand (see the module docstring)."""

    __slots__ = ("_offsets", "books")

    def __init__(self, books: Sequence[BookDecisions]) -> None:
        self.books = tuple(books)
        offsets = [0]
        for book in self.books:
            offsets.append(offsets[-1] + len(book))
        self._offsets = offsets

    def __len__(self) -> int:
        return self._offsets[-1]

    @overload
    def __getitem__(self, index: int) -> EntryDecision: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[EntryDecision]: ...

    def __getitem__(self, index: int | slice) -> EntryDecision | Sequence[EntryDecision]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("decision index out of range")
        for number, book in enumerate(self.books):
            if index < self._offsets[number + 1]:
                return book.decision(index - self._offsets[number])
        raise IndexError("decision index out of range")  # pragma: no cover - guarded above

    def __iter__(self) -> Iterator[EntryDecision]:
        for book in self.books:
            for index in range(len(book)):
                yield book.decision(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DecisionList({len(self)} decisions in {len(self.books)} books)"


def static_decision(book: CompiledBook, position: int) -> EntryDecision:
    """The decision of an entry nothing in the request could change (cached per revision)."""
    slot = book.slot_at[position]
    cached = book.static_decisions.get(slot)
    if isinstance(cached, EntryDecision):
        return cached
    entry = book.raw[slot]
    assert entry is not None
    reason = (
        Reason.DISABLED
        if entry.disable
        else Reason.NO_KEYS
        if not entry.keys
        else Reason.NO_KEY_MATCH
    )
    decision = EntryDecision(
        lore_id=f"{book.resource_id}:{entry.uid}",
        resource_id=book.resource_id,
        uid=entry.uid,
        comment=entry.comment,
        activated=False,
        reason=reason,
        group=entry.group,
        requested_position=entry.position,
    )
    book.static_decisions[slot] = decision
    return decision


def refused_decisions(refused: RefusedBook) -> BookDecisions:
    """The decisions of a book the host cap refused (cached with the refusal)."""

    def implicit(entry_index: int) -> EntryDecision:
        cached = refused.decisions.get(entry_index)
        if isinstance(cached, EntryDecision):
            return cached
        entry = refused.book.entries[entry_index]
        decision = EntryDecision(
            lore_id=f"{refused.resource_id}:{entry.uid}",
            resource_id=refused.resource_id,
            uid=entry.uid,
            comment=entry.comment,
            activated=False,
            reason=Reason.HOST_ENTRY_CAP,
            detail="book did not fit the 10,000-entry request cap",
            group=entry.group,
            requested_position=entry.position,
        )
        refused.decisions[entry_index] = decision
        return decision

    return BookDecisions(
        resource_id=refused.resource_id,
        book=refused.book,
        explicit={},
        implicit=implicit,
        entries_by_uid=partial(getattr, refused, "uid_entries"),
        records=refused.records,
    )
