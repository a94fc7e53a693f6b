"""The entries a scan loop met after the token budget overflowed, decided when read.

Once the budget has overflowed, a *deferrable* entry (:attr:`~.matcher.CompiledEntry.deferrable`:
plain keys, no roll, no macro in its content, no ``ignoreBudget``) can only be rejected: without a
key hit, by its secondary keys, or by the budget it would have exceeded. A dense book meets
thousands of them per loop. Rather than writing a verdict for each, the loop keeps one
:class:`DeferredTail`: which candidates it had, where in rank order the budget overflowed, and the
``(tokens used, budget)`` state from each later point on (it changes only when an entry that
ignores the budget is kept). Reading an entry's decision asks the tail whether the loop deferred
that entry and, if so, builds the very :class:`~.candidates.Deferred` verdict the loop would have
recorded. So the explanation the audit shows is the same; only its cost moved to the read.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from innkeeper_tavern.pure.worldbook.candidates import Deferred, Item, Items

__all__ = ["DeferredTail", "latest_deferral"]

#: An item's place in the request-wide sort (:attr:`~.candidates.Item.rank`).
Rank = tuple[int, int, int, int, int]


@dataclass(slots=True, eq=False)
class DeferredTail:
    """What one scan loop deferred after the budget overflowed (see the module docstring)."""

    loop: int
    items: Items
    #: book index → the slots of that book among the loop's candidates
    slots: Mapping[int, Collection[int]]
    #: lore ids evaluated in full whatever their entry (sticky, cooling down, forced)
    special: Collection[str]
    #: entries activated or lost to probability by the end of the scan (a deferrable entry is
    #: never activated after the overflow, so the final sets answer for the loop's moment)
    done: tuple[Collection[Item], Collection[Item]]
    #: book index → match class → the needles that matched in this loop
    match_sets: list[dict[int, Collection[int]]]
    #: the rank of the last entry the loop processed before the overflow (``None``: the loop
    #: began overflowed); entries ranked after it were met overflowed
    after: Rank | None = None
    #: ranks of the entries after which the budget state changed, ascending
    changes: list[Rank] = field(default_factory=list)
    #: ``(tokens used, budget)`` from the overflow on, then after each of :attr:`changes`
    pending: list[tuple[int, int]] = field(default_factory=list)

    def deferred(self, book: int, slot: int) -> Deferred | None:
        """The verdict this loop deferred for entry ``slot`` of ``book``, if it deferred it."""
        of_book = self.slots.get(book)
        if of_book is None or slot not in of_book:
            return None
        item = self.items.get(book, slot)
        compiled_entry = item.entry
        if not compiled_entry.deferrable or compiled_entry.lore_id in self.special:
            return None
        activated, failed = self.done
        if item in activated or item in failed:
            return None
        rank = item.rank
        if self.after is not None and rank <= self.after:
            return None  # met before the overflow: evaluated in full
        # the state after the last change ranked before the entry (ranks are unique)
        pending = self.pending[bisect_left(self.changes, rank)]
        needles = self.match_sets[book][compiled_entry.match_class]
        return Deferred(needles, self.loop, pending)


def latest_deferral(
    tails: list[DeferredTail], book: int, slot: int, recorded_loop: int
) -> Deferred | None:
    """The deferral of the latest loop after ``recorded_loop`` (the loop of the verdict the
    entry has on record, ``-1`` for none) that deferred entry ``slot`` of ``book``: a later loop's
    verdict replaces an earlier one's, as the verdict map does."""
    for tail in reversed(tails):
        if tail.loop <= recorded_loop:
            return None
        found = tail.deferred(book, slot)
        if found is not None:
            return found
    return None
