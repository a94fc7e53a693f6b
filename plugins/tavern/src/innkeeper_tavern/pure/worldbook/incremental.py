"""Deriving a book's compiled form from its previous revision after a small edit.

Editing one entry of a 10,000-entry book used to recompile all of it (classify 30,000 keys and
rebuild the automata: hundreds of milliseconds). :func:`derive_book` instead finds the entries
that changed (the common prefix and suffix of the two entry tuples are unchanged), indexes only
those, and shares everything else with the previous revision:

- unchanged entries keep their *slot* and the :class:`~.matcher.CompiledEntry` objects already
  built for them; an insertion or removal only shifts the slot → position map; new entries get
  new slots, removed ones free theirs (a full compile renumbers when too many are free);
- the key table is append-only: new keys get new needle ids, keys nobody uses any more keep
  theirs with an empty posting list (they can match but select nothing);
- the big automata are shared; needles added since they were built go into a small overlay
  automaton (:meth:`~.matcher.CompiledBook.share_modes`); past :data:`MAX_OVERLAY_NEEDLES` the
  next scan rebuilds the big one;
- counts of case modes, source flags and delay levels are adjusted by the changed entries.

The result matches what :func:`~.compiler.compile_book` would build for the new book in every
observable way (the tests compare activations of both on random edits). A large change (more
than :data:`MAX_CHANGED_ENTRIES` entries) compiles from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry

from .compiler import entry_counts, index_entries
from .matcher import CompiledBook

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
    end = n_old - tail
    removed = previous.slot_at[head:end]
    added_entries = new[head : n_new - tail]
    if len(removed) + len(added_entries) > MAX_CHANGED_ENTRIES:
        return None
    slots = len(previous.by_slot)
    if slots + len(added_entries) > 2 * n_new + MAX_CHANGED_ENTRIES:
        return None  # too many freed slots: renumber with a full compile

    table = previous.table.copy()
    postings = list(previous.postings)
    # The removed entries' plain primary keys (their text was classified by ``previous``).
    gone = set(removed)
    touched: set[int] = set()
    for slot in removed:
        entry = previous.raw[slot]
        assert entry is not None
        for key in entry.keys:
            code = table.codes[key]
            if code >= 0:
                touched.add(code)
    for needle in touched:
        postings[needle] = [s for s in postings[needle] if s not in gone]
    # The added entries get new slots; their postings go to fresh lists (never the previous
    # revision's, which a running activation may still read).
    index = index_entries(added_entries, slots, table, None)
    postings.extend([] for _ in range(len(table.needles) - len(postings)))
    added_to: dict[int, list[int]] = {}
    for slot, needles in index.plain.items():
        for needle in needles:
            added_to.setdefault(needle, []).append(slot)
    for needle, added_slots in added_to.items():
        kept = postings[needle]
        postings[needle] = sorted({*kept, *added_slots}) if kept else added_slots

    new_slots = list(range(slots, slots + len(added_entries)))
    raw = list(previous.raw)
    by_slot = list(previous.by_slot)
    position = list(previous.position)
    for slot in removed:
        raw[slot] = None
        by_slot[slot] = None
        position[slot] = -1
    raw.extend(added_entries)
    by_slot.extend(None for _ in added_entries)
    position.extend(range(head, head + len(added_entries)))
    suffix = previous.slot_at[end:]
    shift = n_new - n_old
    if shift:
        for slot in suffix:
            position[slot] += shift
    slot_at = [*previous.slot_at[:head], *new_slots, *suffix]

    counts = dict(previous.counts)
    for slot in removed:
        entry = previous.raw[slot]
        assert entry is not None
        for counted in entry_counts(entry):
            counts[counted] -= 1
    for counted, count in index.counts.items():
        counts[counted] = counts.get(counted, 0) + count
    index.counts = counts

    diagnostics = previous.diagnostics_of
    if (removed and diagnostics) or index.diagnostics:
        diagnostics = {k: v for k, v in diagnostics.items() if k not in gone}
        diagnostics.update(index.diagnostics)
    old_position = previous.position

    def spliced(slot_list: list[int], added_slots: list[int]) -> list[int]:
        # Slot lists in entry order: the unchanged head, the added entries, the unchanged tail
        # (reads the short lists only, not every entry of the book).
        before = [slot for slot in slot_list if old_position[slot] < head]
        after = [slot for slot in slot_list if old_position[slot] >= end]
        return before + added_slots + after

    index.always = spliced(previous.always, index.always)
    index.dynamic = spliced(previous.dynamic, index.dynamic)
    derived = CompiledBook.assemble(
        resource_id,
        book,
        table=table,
        postings=postings,
        index=index,
        raw=raw,
        slot_at=slot_at,
        position=position,
        by_slot=by_slot,
        diagnostics_of=diagnostics,
    )
    derived.share_modes(previous, MAX_OVERLAY_NEEDLES)
    # Shared decisions of unchanged slots stay valid (they depend on the entry alone).
    derived.static_decisions = {k: v for k, v in previous.static_decisions.items() if k not in gone}
    # So do the audit records kept for them (by entry position: moved with the unchanged
    # entries; the audit re-checks each against its decision and entry before reuse).
    old_records = previous.engine_cache.get("records")
    if isinstance(old_records, dict) and old_records:
        moved: dict[int, object] = {}
        for at, kept in old_records.items():
            if at < head:
                moved[at] = kept
            elif at >= end:
                moved[at + shift] = kept
        derived.engine_cache["records"] = moved
    _patch_lookups(
        previous,
        derived,
        [previous.raw[s] for s in removed],
        added_entries,
        range(head, head + len(added_entries)),
    )
    return derived


def _patch_lookups(
    previous: CompiledBook,
    derived: CompiledBook,
    removed: Sequence[WorldBookEntry | None],
    added: Sequence[WorldBookEntry],
    added_positions: range,
) -> None:
    """The uid and lore-id look-ups of ``previous`` (where built) for ``derived``: only the uids
    of the changed entries are looked up again — through the previous lore-id index when it was
    built (it lists every entry spelling a uid), else in one pass over the entries' uids."""
    old_uids, old_lore = previous._uid_entries, previous._lore_index
    if old_uids is None and old_lore is None:
        return
    keys = {str(e.uid) for e in (*removed, *added) if e is not None}
    entries = derived.book.entries
    prefix = f"{derived.resource_id}:"
    if old_lore is not None:
        # The unchanged entries with one of these uids, where they are now (a removed slot's
        # position is -1), and the added entries.
        position_of = derived.position
        at = {
            position_of[slot]
            for key in keys
            for slot in old_lore.get(prefix + key, ())
            if position_of[slot] >= 0
        }
        at.update(added_positions)
        found = sorted(at)
    else:
        assert old_uids is not None
        if len(old_uids) == len(previous.book.entries):
            unique = _unique_uids(old_uids, keys, removed, added)
            if unique is not None:
                derived._uid_entries = unique
                return
        # An entry's uid is an int or a str; both spell the same key when str() agrees.
        raw: set[object] = set(keys)
        raw.update(int(k) for k in keys if _is_int(k) and str(int(k)) == k)
        found = [position for position, entry in enumerate(entries) if entry.uid in raw]
    if old_uids is not None:
        uids = dict(old_uids)
        for key in keys:
            uids.pop(key, None)
        for position in found:
            uids[str(entries[position].uid)] = entries[position]  # the last one wins
        derived._uid_entries = uids
    if old_lore is not None:
        lore = dict(old_lore)
        for key in keys:
            lore.pop(prefix + key, None)
        for position in found:
            lore.setdefault(f"{prefix}{entries[position].uid}", []).append(
                derived.slot_at[position]
            )
        derived._lore_index = lore


def _unique_uids(
    old_uids: dict[str, WorldBookEntry],
    keys: set[str],
    removed: Sequence[WorldBookEntry | None],
    added: Sequence[WorldBookEntry],
) -> dict[str, WorldBookEntry] | None:
    """The uid look-up of a book whose previous revision spelled every uid once (its look-up
    holds an entry per entry): each changed uid names at most one unchanged entry, so no pass
    over the entries is needed — unless an added entry repeats an unchanged one's uid
    (``None``: the caller scans)."""
    gone = {id(entry) for entry in removed if entry is not None}
    uids = dict(old_uids)
    kept: dict[str, WorldBookEntry] = {}
    for key in keys:
        entry = uids.pop(key, None)
        if entry is not None and id(entry) not in gone:
            kept[key] = entry
    for entry in added:
        key = str(entry.uid)
        if key in kept:
            return None  # a repeated uid: which one is last depends on positions
        uids[key] = entry  # the last added one wins, as in entry order
    uids.update(kept)
    return uids


def _is_int(text: str) -> bool:
    digits = text[1:] if text.startswith("-") else text
    return digits.isascii() and digits.isdecimal()
