"""``ScanWalk``: the order in which a scan loop evaluates its candidates.

A loop either sorts its candidates into rank order or, for a dense book, walks the book's own
order kept per revision (:mod:`.ordering`); once the budget has overflowed, the entries that can
only be deferred are left to a tail decided when read (:mod:`.deferral`), with the same
explanations as the eager path (`docs/worldbook.md#activation-rules`).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator
from operator import attrgetter
from typing import Final

from innkeeper_tavern.pure.worldbook.candidates import (
    Deferred,
    Item,
    Verdict,
    secondary_verdict,
)
from innkeeper_tavern.pure.worldbook.deferral import DeferredTail
from innkeeper_tavern.pure.worldbook.matcher import CompiledBook
from innkeeper_tavern.pure.worldbook.model import (
    Reason,
)
from innkeeper_tavern.pure.worldbook.ordering import (
    book_order,
    drop_eager_order,
    eager_order,
    has_groups,
)
from innkeeper_tavern.pure.worldbook.scan_state import ScanState

_ORDER_KEY: Final = attrgetter("order_key")
_RANK: Final = attrgetter("rank")


__all__ = ["ScanWalk"]


class ScanWalk(ScanState):
    """A scan in progress, with the walks of its loops."""

    def candidates(self) -> list[Item]:
        """This loop's candidates in rank order: entries whose primary keys were seen anywhere,
        plus always-evaluated, sticky and forced ones."""
        items = self.items
        out: list[Item] = []
        for book_index in self.book_hits:
            slots = self.loop_slots.get(book_index) or self.slots_of(book_index)
            made = items.made(book_index)
            found = list(map(made.get, slots))
            if None in found:  # entries no request has looked at yet in this place
                found = [items.get(book_index, slot) for slot in slots]
            out.extend(found)  # type: ignore[arg-type]
        extra = self.sticky_active | self.request.forced
        if extra:
            seen = set(out)
            for lore_id in extra:
                found_item = items.by_lore_id(lore_id)
                if found_item is not None and found_item not in seen:
                    seen.add(found_item)
                    out.append(found_item)
                    self.loop_slots[found_item.book].add(found_item.key[1])
        # One book: its own order (an integer per entry) is the request's order.
        out.sort(key=_ORDER_KEY if len(self.book_hits) == 1 else _RANK)
        return out

    def slots_of(self, book_index: int) -> set[int]:
        """The slots of book ``book_index`` whose primary keys were seen anywhere, plus its
        always-evaluated ones (recorded in :attr:`loop_slots`)."""
        book = self.compiled[book_index]
        assert book is not None
        slots: set[int] = set(book.always)
        postings = book.postings
        for needle in self.book_hits[book_index].found:
            slots.update(postings[needle])
        self.loop_slots[book_index] = slots
        return slots

    def ordered_walk(self) -> tuple[int, set[int]] | None:
        """``(book index, candidate slots)`` when this loop can walk the book's own order
        (:func:`~.candidates.book_order`) instead of sorting its candidates: one book, no
        sticky entry (they go first), no inclusion group in the book, and candidates for at least
        1 / :attr:`DENSE_SHARE` of its entries (fewer sort faster than the walk)."""
        if not self.lazy or len(self.book_hits) != 1 or self.sticky_active:
            return None
        (book_index,) = self.book_hits
        book = self.compiled[book_index]
        assert book is not None
        if has_groups(book):
            return None
        slots = self.slots_of(book_index)
        if len(slots) * self.DENSE_SHARE < len(book.slot_at):
            return None
        for lore_id in self.request.forced:
            found = self.items.by_lore_id(lore_id)
            if found is not None:
                slots.add(found.key[1])
        return book_index, slots

    def evaluate_candidates(self, candidates: list[Item]) -> list[tuple[Item, Verdict]]:
        """:meth:`evaluate` every candidate not activated (or lost to probability) yet, and
        return the activated ones with their verdicts, in rank order."""
        now: list[tuple[Item, Verdict]] = []
        verdict_of = self._verdicts_of_loop(named=True)
        activated, failed = self.activated_items, self.failed_probability
        done = activated or failed
        for item in candidates:
            if done and (item in activated or item in failed):
                continue
            verdict = verdict_of(item)
            if verdict.activated:
                now.append((item, verdict))
        return now

    def evaluate_in_order(self, candidates: Iterable[Item]) -> list[tuple[Item, str]]:
        """The loop's phases entry by entry when no candidate is in a group: :meth:`evaluate`,
        the probability roll and the budget (sticky entries first, then rank order, the order
        the budget reads them). Returns the newly activated entries with their content.

        Once the budget has overflowed, a plain entry that cannot be kept
        (:attr:`~.matcher.CompiledEntry.deferrable`) is not evaluated: it is left to this loop's
        :class:`~.deferral.DeferredTail` (or, on the eager path, its slot points at a
        :class:`~.candidates.Deferred` verdict shared with the others met in the same state),
        worked out if its decision is read, so a dense loop costs what it keeps.
        """
        sticky_active = self.sticky_active
        if sticky_active:
            candidates = sorted(
                candidates, key=lambda it: 0 if it.entry.lore_id in sticky_active else 1
            )
        verdict_of = self._verdicts_of_loop(named=not self.lazy)
        newly: list[tuple[Item, str]] = []
        ranked = iter(candidates)
        last: Item | None = None
        began_overflowed = self.overflowed  # (a local: ``spend_one`` changes the attribute)
        if not began_overflowed:
            activated, failed = self.activated_items, self.failed_probability
            spend_one = self.spend_one
            for item in ranked:
                last = item
                if item in activated or item in failed:
                    continue
                verdict = verdict_of(item)
                # ``certain`` first: most entries skip the roll's method call.
                if verdict.activated and (item.entry.certain or self.roll_one(item, verdict)):
                    content = spend_one(item, verdict)
                    if content is not None:
                        newly.append((item, content))
                        activated.add(item)
                    if self.overflowed:
                        break
            else:
                return newly
        if self.lazy and not sticky_active:
            self._walk_tail(ranked, self._tail(last), verdict_of, newly)
        else:
            self._after_overflow(ranked, verdict_of, newly)
        return newly

    def ordered(self, book_index: int, slots: set[int]) -> Iterator[Item]:
        """The candidates of one dense book in rank order without sorting them: the book's own
        order (:func:`~.ordering.book_order`) filtered by ``slots``; once the budget has
        overflowed, only those of :func:`~.ordering.eager_order` (the others are deferred)."""
        items = self.items
        made = items.made(book_index)
        book = self.compiled[book_index]
        assert book is not None
        # Lore ids evaluated in full whatever their entry: then every candidate is walked.
        special = self.cooldown_active or self.request.forced
        for index, slot in enumerate(book_order(book)):
            if slot in slots:
                if self.overflowed and not special:
                    yield from self._eager_rest(book, book_index, slots, index)
                    return
                yield made.get(slot) or items.get(book_index, slot)

    #: Deferrable entries an :func:`~.ordering.eager_order` may still list before it is
    #: made again.
    STALE_EAGER: Final = 64

    def _eager_rest(
        self, book: CompiledBook, book_index: int, slots: set[int], start: int
    ) -> Iterator[Item]:
        """:meth:`ordered` from index ``start`` of the book's order, overflowed: the candidates
        not known to be deferrable. The match set of every class of deferrable entry is worked
        out first, for the :class:`~.deferral.DeferredTail`."""
        items = self.items
        made = items.made(book_index)
        eager = eager_order(book)
        computed = self._match_sets[book_index]
        for match_class, slot in eager.classes.items():
            if match_class not in computed:
                self._match_set(items.get(book_index, slot))
        stale = 0
        for slot in itertools.islice(eager.slots, bisect_left(eager.at, start), None):
            if slot in slots:
                item = made.get(slot) or items.get(book_index, slot)
                stale += item.entry.deferrable
                yield item
        if stale > self.STALE_EAGER:
            drop_eager_order(book)

    def _tail(self, after: Item | None) -> DeferredTail:
        """A new :class:`~.deferral.DeferredTail` for this loop, from the entry ``after``."""
        tail = DeferredTail(
            loop=self.state.loop,
            items=self.items,
            slots=self.loop_slots,
            special=self.sticky_active | self.cooldown_active | self.request.forced,
            done=(self.activated_items, self.failed_probability),
            match_sets=self._match_sets,
            after=after.rank if after is not None else None,
            pending=[(self.used_tokens, self.budget)],
        )
        self.tails.append(tail)
        return tail

    def _walk_tail(
        self,
        rest: Iterator[Item],
        tail: DeferredTail,
        verdict_of: Callable[[Item], Verdict],
        newly: list[tuple[Item, str]],
    ) -> None:
        """The candidates ``rest`` met once the budget has overflowed, in rank order: deferrable
        ones are left to ``tail`` (only their match set is made sure of), the others evaluated
        as :meth:`_after_overflow` does."""
        activated, failed = self.activated_items, self.failed_probability
        special = tail.special
        match_sets = self._match_sets
        for item in rest:
            compiled_entry = item.entry
            if compiled_entry.deferrable and not (special and compiled_entry.lore_id in special):
                if compiled_entry.match_class not in match_sets[item.book]:
                    self._match_set(item)
                continue
            if item in activated or item in failed:
                continue
            if self._keep_overflowed(item, verdict_of, newly):
                tail.changes.append(item.rank)
                tail.pending.append((self.used_tokens, self.budget))

    def _keep_overflowed(
        self,
        item: Item,
        verdict_of: Callable[[Item], Verdict],
        newly: list[tuple[Item, str]],
    ) -> bool:
        """Evaluate, roll and spend for an entry met after the overflow that cannot be
        deferred; whether the tokens used changed (later deferred entries see the new total)."""
        verdict = verdict_of(item)
        if not (verdict.activated and self.roll_one(item, verdict)):
            return False
        used = self.used_tokens
        content = self.spend_one(item, verdict)
        if content is not None:
            newly.append((item, content))
            self.activated_items.add(item)
        return self.used_tokens != used

    def _after_overflow(
        self,
        rest: Iterator[Item],
        verdict_of: Callable[[Item], Verdict],
        newly: list[tuple[Item, str]],
    ) -> None:
        """:meth:`evaluate_in_order` over the candidates ``rest`` met once the budget has
        overflowed, eagerly: most entries are deferred (one map write each, no evaluation)."""
        verdicts, loop = self.verdicts, self.state.loop
        activated, failed = self.activated_items, self.failed_probability
        special = self.sticky_active | self.cooldown_active | self.request.forced
        #: (book, match class) → the deferred verdict for the current budget state
        deferred: dict[tuple[int, int], Deferred] = {}
        for item in rest:
            if item in activated or item in failed:
                continue
            compiled_entry = item.entry
            if compiled_entry.deferrable and not (special and compiled_entry.lore_id in special):
                book = item.book
                key = (book, compiled_entry.match_class)
                group = deferred.get(key)
                if group is None:
                    pending = (self.used_tokens, self.budget)
                    group = deferred[key] = Deferred(self._match_set(item), loop, pending)
                verdicts[book][compiled_entry.index] = group
                continue
            if self._keep_overflowed(item, verdict_of, newly):
                deferred.clear()  # later deferred entries see the new total

    def _verdicts_of_loop(self, named: bool = False) -> Callable[[Item], Verdict]:
        """The function that evaluates one candidate in this loop and records its verdict.

        Most candidates of a dense book are *plain* entries (only plain keys, nothing in the
        request can reject them before matching): their verdict is read off the set of needles
        that match for their book and :attr:`~.matcher.CompiledEntry.match_class` in this loop,
        and a rejection without a key hit shares one verdict object per loop. Unless ``named``
        (inclusion groups score by them), the keys that matched for a plain entry without
        secondary keys are named when its decision is read (:meth:`~.candidates.Verdict.primary`).
        """
        loop = self.state.loop
        verdicts = self.verdicts
        special = self.sticky_active | self.cooldown_active | self.request.forced
        self._match_sets: list[dict[int, Collection[int]]] = [{} for _ in self.compiled]
        match_set = self._match_set
        no_match = Verdict(reason=Reason.NO_KEY_MATCH, loop=loop)
        key_match = Reason.KEY_MATCH
        evaluate = self.evaluate

        def verdict_of(item: Item) -> Verdict:
            compiled_entry = item.entry
            if compiled_entry.plain and not (special and compiled_entry.lore_id in special):
                needles = match_set(item)
                if not (named or (compiled_entry.entry.selective and compiled_entry.secondary)):
                    if any(map(needles.__contains__, compiled_entry.primary_needles)):
                        # positional, as below, then pending budget and needles
                        verdict = Verdict(
                            key_match, "", (), (), 0, None, None, None, loop, True, None, needles
                        )
                    else:
                        verdict = no_match
                    verdicts[item.book][compiled_entry.index] = verdict
                    return verdict
                primary = tuple([r.raw for r in compiled_entry.primary if r.needle in needles])
                if not primary:
                    verdict = no_match
                elif compiled_entry.entry.selective and compiled_entry.secondary:
                    secondary = tuple(
                        [r.raw for r in compiled_entry.secondary if r.needle in needles]
                    )
                    verdict = secondary_verdict(
                        compiled_entry.entry.selective_logic, primary, secondary, item, loop
                    )
                else:
                    # positional: reason, detail, primary, secondary, score, group winner,
                    # roll, tokens, loop, activated
                    verdict = Verdict(
                        key_match, "", primary, (), len(primary), None, None, None, loop, True
                    )
            else:
                verdict = evaluate(item)
            verdicts[item.book][compiled_entry.index] = verdict
            return verdict

        return verdict_of
