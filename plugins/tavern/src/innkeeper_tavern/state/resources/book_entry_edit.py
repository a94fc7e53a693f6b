"""One entry of a stored world book changed without re-validating the whole book.

``PUT``/``DELETE /world-books/{id}/entries/{uid}`` (docs/resources.md "World-book entries and
test activation") used to rebuild the whole normalized book as JSON values and run a whole-book
``PATCH``'s validation over it: the structure walk, the conversion of every entry, an export and
a re-parse of all of it — seconds for a 10,000-entry book although one entry changed. Here the
changed entry alone goes through that validation (:func:`validated_entry`: the same checks,
errors and codes as a whole-book edit, on a book holding just that entry), and the limits that
belong to the whole document are kept as running totals:

- the entry count (at most :data:`~innkeeper_tavern.pure.formats.guards.MAX_BOOK_ENTRIES`);
- the node budget of :func:`~innkeeper_tavern.pure.formats.guards.book_limits`, for both forms
  the whole-book edit walks (the stored normalized form and its SillyTavern export). A book's
  node count is the sum of its entries' plus the book's own fields, so one entry's edit moves
  the total by the difference of two entries' counts (:class:`BookTotals`). The totals of a
  revision are counted once (:func:`book_totals`, when a revision is first edited this way) and
  kept per revision by :class:`TotalsMemo`, so a run of saves in an editor counts one entry each.

Entries the edit does not touch are the previous revision's objects, so the compiled form and
the loader's per-revision facts of the next turn are derived from them by identity.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.guards import (
    MAX_BOOK_ENTRIES,
    StructureLimitError,
    book_limits,
)
from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.formats.worldbook_export import export_model

from .service import edited_book

__all__ = [
    "BookTotals",
    "TotalsMemo",
    "book_totals",
    "edit_one_entry",
    "validated_entry",
]

#: Where the one-entry book of :func:`validated_entry` holds the entry.
_IN_SHELL: Final = "$.book.entries[0]"
#: Revisions whose totals are remembered (a few books being edited at once).
TOTALS_KEPT: Final = 16


def _nodes(value: Any) -> int:
    """JSON values in ``value``, counted as the structure walk counts them in the document
    (keys are not; ``to_builtins`` leaves tuples, which are JSON arrays)."""
    kind = type(value)
    if kind is dict:
        return 1 + sum(map(_nodes, value.values()))
    if kind is list or kind is tuple:
        return 1 + sum(map(_nodes, value))
    return 1


@dataclass(frozen=True, slots=True)
class BookTotals:
    """Node counts of one book (or one entry's share of it) in the two forms a whole-book edit
    walks: the stored normalized form and its SillyTavern export."""

    stored: int
    exported: int

    def __add__(self, other: BookTotals) -> BookTotals:
        return BookTotals(self.stored + other.stored, self.exported + other.exported)

    def __sub__(self, other: BookTotals) -> BookTotals:
        return BookTotals(self.stored - other.stored, self.exported - other.exported)


def _shell(book: WorldBook) -> WorldBook:
    return msgspec.structs.replace(book, entries=(), diagnostics=())


def book_totals(book: WorldBook) -> BookTotals:
    """The whole book's node counts (one walk of each form; what :class:`TotalsMemo` saves)."""
    plain = msgspec.structs.replace(book, diagnostics=())
    return BookTotals(_nodes(msgspec.to_builtins(plain)), _nodes(export_model(plain)))


def _entry_totals(shell: WorldBook, entry: WorldBookEntry) -> BookTotals:
    """What ``entry`` adds to a book's node counts (the export's container is a map or a list:
    an entry adds its own values either way)."""
    alone = msgspec.structs.replace(shell, entries=(entry,))
    exported = _nodes(export_model(alone)) - _nodes(export_model(shell))
    return BookTotals(_nodes(msgspec.to_builtins(entry)), exported)


def validated_entry(book: WorldBook, value: dict[str, Any]) -> WorldBookEntry:
    """``value`` (one entry as a client sends it) validated exactly as a whole-book edit validates
    each of its entries — fields, types, structure limits, the export and re-import — inside a
    book with ``book``'s own fields. Raises :class:`FormatError` (400) when it is not valid."""
    shell = msgspec.to_builtins(_shell(book))
    shell.pop("diagnostics", None)
    shell["entries"] = [value]
    try:
        (entry,) = edited_book(shell).entries
    except FormatError as exc:
        if exc.path.startswith(_IN_SHELL):
            # Name the field of the request body, not of the one-entry book it was checked in.
            path = "$.entry" + exc.path[len(_IN_SHELL) :]
            raise FormatError(exc.code, exc.message, exc.status, path) from None
        raise
    return entry


def _too_many(message: str) -> FormatError:
    return FormatError.from_structure(
        StructureLimitError("STRUCTURE_TOO_MANY_NODES", message, "$.book")
    )


def edit_one_entry(
    book: WorldBook, index: int | None, value: dict[str, Any] | None, totals: BookTotals
) -> tuple[WorldBook, BookTotals]:
    """``book`` with the entry at ``index`` replaced by ``value``, ``value`` appended
    (``index`` ``None``) or the entry removed (``value`` ``None``), and the new book's totals.

    ``totals`` are ``book``'s (:func:`book_totals`). Raises :class:`FormatError` (400, nothing
    changed) for an invalid entry, a book past the entry cap or past its node budget.
    """
    entries = book.entries
    shell = _shell(book)
    if value is None:
        assert index is not None
        new_entries = (*entries[:index], *entries[index + 1 :])
        new_totals = totals - _entry_totals(shell, entries[index])
    else:
        entry = validated_entry(book, value)
        if index is not None and entry == entries[index]:
            entry = entries[index]  # unchanged: keep the object (and its compiled form)
        added = _entry_totals(shell, entry)
        if index is None:
            if len(entries) + 1 > MAX_BOOK_ENTRIES:
                raise FormatError.from_structure(
                    StructureLimitError(
                        "WORLD_BOOK_TOO_MANY_ENTRIES",
                        f"world book has {len(entries) + 1} entries; "
                        f"at most {MAX_BOOK_ENTRIES} are allowed",
                        "$.book.entries",
                    )
                )
            new_entries = (*entries, entry)
            new_totals = totals + added
        else:
            new_entries = (*entries[:index], entry, *entries[index + 1 :])
            new_totals = totals - _entry_totals(shell, entries[index]) + added
    budget = book_limits(len(new_entries)).max_nodes
    if new_totals.stored > budget or new_totals.exported > budget:
        raise _too_many(f"more than {budget} nodes")
    new_book = msgspec.structs.replace(book, entries=new_entries, diagnostics=())
    return new_book, new_totals


class TotalsMemo:
    """:func:`book_totals` per ``(book id, revision)``, the last :data:`TOTALS_KEPT` revisions;
    an edit stores its result's totals under the revision it wrote."""

    def __init__(self) -> None:
        self._items: collections.OrderedDict[tuple[str, str], BookTotals] = (
            collections.OrderedDict()
        )

    def get(self, book_id: str, revision: str, book: WorldBook) -> BookTotals:
        """The totals of this revision (counted on the first call)."""
        key = (book_id, revision)
        found = self._items.get(key)
        if found is None:
            found = book_totals(book)
            self.put(book_id, revision, found)
        return found

    def put(self, book_id: str, revision: str, totals: BookTotals) -> None:
        """Remember the totals of a revision just written."""
        self._items[(book_id, revision)] = totals
        self._items.move_to_end((book_id, revision))
        while len(self._items) > TOTALS_KEPT:
            self._items.popitem(last=False)
