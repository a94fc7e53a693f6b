"""Deriving a book's compiled form from its previous revision after a small edit.

Editing one entry of a 10,000-entry book used to recompile all of it (classify 30,000 keys and
rebuild the automata: hundreds of milliseconds). :func:`derive_book` instead finds the entries
that changed (the common prefix and suffix of the two entry tuples are unchanged), compiles only
those, and shares everything else with the previous revision:

- unchanged :class:`~.matcher.CompiledEntry` objects are reused as they are: they are known by
  a stable *slot*, and an insertion or removal only shifts the slot → position map; new entries
  get new slots, removed ones free theirs (a full compile renumbers when too many are free);
- the key table is append-only: new keys get new needle ids, keys nobody uses any more keep
  theirs with an empty posting list (they can match but select nothing);
- the big automata are shared; needles added since they were built go into a small overlay
  automaton (:meth:`~.matcher.CompiledBook.share_modes`); past :data:`MAX_OVERLAY_NEEDLES` the
  next scan rebuilds the big one;
- counts of case modes, source flags and delay levels are adjusted by the changed entries.

The result matches what :func:`~.matcher.compile_book` would build for the new book in every
observable way (the tests compare activations of both on random edits). A large change (more
than :data:`MAX_CHANGED_ENTRIES` entries) compiles from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from innkeeper_tavern.pure.formats.worldbook import WorldBook

from .matcher import (
    CompiledBook,
    CompiledEntry,
    KeyTable,
    assemble_book,
    compile_entry,
    entry_counts,
)

__all__ = [
    "MAX_CHANGED_ENTRIES",
    "MAX_OVERLAY_NEEDLES",
    "common_prefix",
    "derive_book",
    "share_unchanged_entries",
]

#: Changed entries (removed plus added) above which a full compile is cheaper and simpler.
MAX_CHANGED_ENTRIES: Final = 256
#: Needles an overlay automaton may hold before the shared automaton is rebuilt.
MAX_OVERLAY_NEEDLES: Final = 1_024


#: Entries compared per C-level slice comparison while looking for the edited range.
_CHUNK: Final = 256


def common_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """Length of the longest common prefix (slices compare in C; identity short-cuts)."""
    size = min(len(old), len(new))
    start = 0
    while start < size:
        stop = min(size, start + _CHUNK)
        if old[start:stop] == new[start:stop]:
            start = stop
            continue
        while old[start] is new[start] or old[start] == new[start]:
            start += 1
        return start
    return size


def share_unchanged_entries(old: WorldBook, new: WorldBook) -> WorldBook:
    """``new`` with every entry equal to ``old``'s in the common prefix and suffix replaced by
    ``old``'s object, so a later :func:`derive_book` finds them by identity (no comparison)."""
    before, after = old.entries, new.entries
    head = common_prefix(before, after)
    tail = common_prefix(before[head:][::-1], after[head:][::-1])
    if head == tail == 0:
        return new
    middle = after[head : len(after) - tail]
    shared = (*before[:head], *middle, *before[len(before) - tail :])
    return msgspec.structs.replace(new, entries=shared)


def derive_book(previous: CompiledBook, resource_id: str, book: WorldBook) -> CompiledBook | None:
    """``book`` compiled by patching ``previous`` (``None`` when a full compile is due)."""
    if previous.resource_id != resource_id:
        return None
    old = previous.book.entries
    new = book.entries
    n_old, n_new = len(old), len(new)
    head = common_prefix(old, new)
    tail = common_prefix(old[head:][::-1], new[head:][::-1])
    removed = previous.entries[head : n_old - tail]
    added_entries = new[head : n_new - tail]
    if len(removed) + len(added_entries) > MAX_CHANGED_ENTRIES:
        return None
    slots = len(previous.by_slot)
    if slots + len(added_entries) > 2 * n_new + MAX_CHANGED_ENTRIES:
        return None  # too many freed slots: renumber with a full compile

    table = KeyTable(
        needles=list(previous.needles),
        needle_ids=dict(previous.needle_ids),
        needle_has_space=list(previous.needle_has_space),
    )
    added = [
        compile_entry(slots + offset, entry, resource_id, table)
        for offset, entry in enumerate(added_entries)
    ]
    entries: list[CompiledEntry] = previous.entries[:head]
    entries.extend(added)
    suffix = previous.entries[n_old - tail :]
    entries.extend(suffix)

    by_slot: list[CompiledEntry | None] = list(previous.by_slot)
    position = list(previous.position)
    for compiled_entry in removed:
        by_slot[compiled_entry.index] = None
        position[compiled_entry.index] = -1
    for offset, compiled_entry in enumerate(added):
        by_slot.append(compiled_entry)
        position.append(head + offset)
    shift = n_new - n_old
    if shift:
        for compiled_entry in suffix:
            position[compiled_entry.index] += shift

    counts = dict(previous.counts)
    for compiled_entry in removed:
        for key in entry_counts(compiled_entry.entry):
            counts[key] -= 1
    for compiled_entry in added:
        for key in entry_counts(compiled_entry.entry):
            counts[key] = counts.get(key, 0) + 1

    postings = _patched_postings(previous, removed, added, len(table.needles))
    old_position, end = previous.position, n_old - tail

    def spliced(slots: list[int], added_slots: list[int]) -> list[int]:
        # Slot lists in entry order: the unchanged head, the added entries, the unchanged tail
        # (reads the short lists only, not every entry of the book).
        before = [slot for slot in slots if old_position[slot] < head]
        after = [slot for slot in slots if old_position[slot] >= end]
        return before + added_slots + after

    derived = assemble_book(
        resource_id,
        book,
        entries,
        table,
        postings,
        counts,
        by_slot=by_slot,
        position=position,
        always=spliced(previous.always, [e.index for e in added if e.always_evaluate]),
        dynamic=spliced(previous.dynamic, [e.index for e in added if not e.static_rejection]),
    )
    derived.share_modes(previous, MAX_OVERLAY_NEEDLES)
    return derived


def _plain_needles(entry: CompiledEntry) -> set[int]:
    return {ref.needle for ref in entry.primary if ref.kind == "plain"}


def _patched_postings(
    previous: CompiledBook,
    removed: list[CompiledEntry],
    added: list[CompiledEntry],
    needle_count: int,
) -> list[list[int]]:
    """Posting lists (of slots) with the edited entries swapped; copies only what changes."""
    postings = list(previous.postings)
    postings.extend([] for _ in range(needle_count - len(postings)))
    gone = {e.index for e in removed}
    touched: dict[int, set[int]] = {}
    for entry in removed:
        for needle in _plain_needles(entry):
            touched.setdefault(needle, set())
    for entry in added:
        for needle in _plain_needles(entry):
            touched.setdefault(needle, set()).add(entry.index)
    for needle, indices in touched.items():
        kept = {i for i in postings[needle] if i not in gone}
        postings[needle] = sorted(kept | indices)
    return postings
