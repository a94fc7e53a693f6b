"""World-book activation: SillyTavern's scan loop, selection pipeline and positions, explained.

The pipeline follows `docs/worldbook.md#activation-rules`; :class:`_Scan` runs it as named
phases (its docstring lists them):

1. host cap: books reserved whole, in composition order, up to 10,000 entries;
2. entries sorted by ``order`` descending (stable) per the character strategy;
3. timed effects (sticky / cooldown / delay) evaluated against the chat-length clock;
4. scan loops (initial, recursion, min-activations, delay-until-recursion levels) with the
   per-entry checks of docs/worldbook.md#wi-entry-checks in ST's order;
5. per loop: inclusion groups, probability (seeded, reproducible rolls), token budget;
6. host caps on the activated list (4,096 candidates, lore bytes ≤ 2 × profile budget);
7. positions (ascending ``order`` inside a bucket) and one decision per entry.

Everything is a pure function of its inputs: the RNG is derived from ``seed``, timed-effect
state comes in and goes out as a value, and token counting / macro substitution are injected.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator
from operator import attrgetter
from typing import Final

from innkeeper_tavern.pure.worldbook.cache import MatcherCache, RefusedBook
from innkeeper_tavern.pure.worldbook.candidates import (
    Deferred,
    Item,
    Items,
    Verdict,
    secondary_verdict,
)
from innkeeper_tavern.pure.worldbook.deferral import DeferredTail
from innkeeper_tavern.pure.worldbook.keytests import (
    BookHits,
    KeyTests,
    LoopState,
    State,
    Texts,
    build_texts,
    scan_book,
    scan_recursion,
)
from innkeeper_tavern.pure.worldbook.matcher import CompiledBook
from innkeeper_tavern.pure.worldbook.model import (
    ActivationResult,
    BookInput,
    BudgetReport,
    Reason,
    ScanSummary,
    TimedEffectsState,
    WorldBookRuntimeDiagnostic,
)
from innkeeper_tavern.pure.worldbook.ordering import (
    book_order,
    drop_eager_order,
    eager_order,
    has_groups,
)
from innkeeper_tavern.pure.worldbook.placement import (
    activated_entries,
    book_decisions,
    buckets,
    cap_and_place,
    new_timed_state,
)
from innkeeper_tavern.pure.worldbook.request import (
    MAX_SCAN_DEPTH,
    MAX_SCAN_LOOPS,
    REGEX_KEY_TIMEOUT_SECONDS,
    REGEX_REQUEST_BUDGET_SECONDS,
    ActivationRequest,
    CharacterIdentity,
    estimate_tokens,
)
from innkeeper_tavern.pure.worldbook.scan import ActivationContext, ScanInput, build_scan_input
from innkeeper_tavern.pure.worldbook.selection import (
    apply_groups,
    pre_checks,
    roll,
    start_timed_effects,
)

_ORDER_KEY: Final = attrgetter("order_key")
_RANK: Final = attrgetter("rank")
_GROUPS: Final = attrgetter("entry.groups")

__all__ = [
    "MAX_SCAN_DEPTH",
    "MAX_SCAN_LOOPS",
    "REGEX_KEY_TIMEOUT_SECONDS",
    "REGEX_REQUEST_BUDGET_SECONDS",
    "ActivationRequest",
    "CharacterIdentity",
    "activate",
    "estimate_tokens",
]


def activate(request: ActivationRequest, cache: MatcherCache | None = None) -> ActivationResult:
    """Decide which entries of ``request.books`` activate, where they go and why.

    Pass a long-lived :class:`~innkeeper_tavern.pure.worldbook.matcher.MatcherCache` so each book
    revision is compiled once. Never raises for bad book content: problems become diagnostics.
    """
    scan = _Scan(request, cache if cache is not None else MatcherCache())
    scan.admit_books()
    scan.read_chat()
    scan.match_books()
    scan.start_timed_effects()
    scan.run_loops()
    return scan.finish()


class _Scan:
    """One activation in progress, run phase by phase:

    1. :meth:`admit_books` — the host cap; each admitted book compiled (or taken from the cache);
    2. :meth:`read_chat` — the bounded scan input and its text in each case mode a book needs;
    3. :meth:`match_books` — every book's automata over the chat, sources and injected prompts;
    4. :meth:`start_timed_effects` — sticky / cooldown aged against the chat-length clock;
    5. :meth:`run_loops` — the scan loops; each loop takes :meth:`candidates` in rank order,
       :meth:`evaluate` s them (docs/worldbook.md#wi-entry-checks), then :meth:`apply_groups`,
       :meth:`roll_probability`, :meth:`spend_budget` and :meth:`next_state`;
    6. :meth:`finish` — host caps on the activated list, positions, new timed effects and one
       decision per entry.
    """

    def __init__(self, request: ActivationRequest, cache: MatcherCache) -> None:
        self.request = request
        self.settings = request.settings
        self.cache = cache
        self.limits = request.host_limits.clamped()
        self.diagnostics: list[WorldBookRuntimeDiagnostic] = []
        #: book index → slot → the verdict of every entry a loop evaluated
        self.verdicts: list[dict[int, Verdict | Deferred]] = []
        #: book index → the cached refusal of a book the host cap did not admit
        self.refused: dict[int, RefusedBook] = {}
        self.substitute = request.substitute or (lambda text: text)
        self.compiled: list[CompiledBook | None] = []
        self.books: list[BookInput] = list(request.books)
        self.state = LoopState()
        # Set by the phases, in order.
        self.scan_input: ScanInput
        self.items: Items
        self.texts: Texts
        self.book_hits: dict[int, BookHits] = {}
        self.keys: KeyTests
        self.clock = 0
        self.sticky_active: set[str] = set()
        self.cooldown_active: set[str] = set()
        self.timed_state = TimedEffectsState()
        # The loops' running totals.
        #: activated entries in activation order, with their verdict and content
        self.activated: list[tuple[Item, Verdict, str]] = []
        self.activated_items: set[Item] = set()
        self.failed_probability: set[Item] = set()
        self.activated_groups: set[str] = set()
        settings = self.settings
        budget = max(1, round(settings.budget_percent * settings.max_context_tokens / 100))
        if settings.budget_cap > 0:
            budget = min(budget, settings.budget_cap)
        self.budget = budget
        self.used_tokens = 0
        self.book_used: dict[int, int] = {}
        self.overflowed = False
        #: how many loops activated entries (one: :attr:`activated` is in rank order)
        self.activating_loops = 0
        #: what each loop deferred after the budget overflowed (:mod:`.deferral`)
        self.tails: list[DeferredTail] = []
        #: book index → the slots among this loop's candidates
        self.loop_slots: dict[int, set[int]] = {}

    #: Whether a loop walks a dense book's precomputed order (else it sorts its candidates),
    #: names the keys a kept plain entry matched only when its decision is read, and leaves
    #: entries deferred after the overflow to :mod:`.deferral`; off gives the eager path the
    #: tests compare against.
    lazy: bool = True
    #: Candidates (a share of the book's entries, 1 / this) from which a loop walks the
    #: book's order rather than sorting them.
    DENSE_SHARE: Final = 8

    # ------------------------------------------------------------------ 1. admit

    def admit_books(self) -> None:
        """Reserve books whole in composition order
        (`docs/contract/world-info.md#profile-budget`)."""
        reserved = 0
        for book_index, book_input in enumerate(self.request.books):
            count = len(book_input.book.entries)
            if reserved + count > self.limits.max_runtime_entries:
                self.compiled.append(None)
                self.refused[book_index] = self.cache.refusal(
                    book_input.resource_id, book_input.book, book_input.revision, reserved
                )
                self.diagnostics.append(
                    WorldBookRuntimeDiagnostic(
                        code="WORLD_BOOK_RUNTIME_TOTAL_LIMIT",
                        message=(
                            f"book with {count} entries skipped: {reserved} of "
                            f"{self.limits.max_runtime_entries} entries already reserved"
                        ),
                        resource_id=book_input.resource_id,
                    )
                )
                continue
            reserved += count
            book = self.cache.get(book_input.resource_id, book_input.book, book_input.revision)
            for uid, code, message in book.compile_diagnostics:
                self.diagnostics.append(
                    WorldBookRuntimeDiagnostic(
                        code=code, message=message, resource_id=book_input.resource_id, uid=uid
                    )
                )
            self.compiled.append(book)
        self.verdicts = [{} for _ in self.compiled]
        self.items = Items(self.compiled, self.books, self.settings.character_strategy)

    # ------------------------------------------------------------------ 2. read the chat

    def read_chat(self) -> None:
        """The bounded scan input and its text in each case mode the books need.

        docs/worldbook.md#wi-scan-buffer.
        """
        request, settings = self.request, self.settings
        if request.scan is not None:
            scan = request.scan
        else:
            scan = build_scan_input(
                request.context or ActivationContext(),
                include_names=settings.include_names,
                limits=request.scan_limits,
            )
        if scan.truncated:
            self.diagnostics.append(
                WorldBookRuntimeDiagnostic(
                    code="WORLD_BOOK_SCAN_TEXT_TRUNCATED",
                    message=(
                        f"scan input bounded to {len(scan.messages)} of {scan.total_messages} "
                        f"messages, {scan.scanned_chars} characters"
                    ),
                    severity="info",
                )
            )
        self.scan_input = scan
        self.clock = scan.chat_length
        modes_needed = {
            value if value is not None else settings.case_sensitive
            for book in self.compiled
            if book is not None
            for value in book.case_values
        }
        self.texts = build_texts(scan, modes_needed)

    # ------------------------------------------------------------------ 3. match

    def match_books(self) -> None:
        """Each admitted book's automata over the chat, its opted-in sources and the injects."""
        for book_index, book in enumerate(self.compiled):
            if book is not None:
                self.book_hits[book_index] = scan_book(book, self.texts, self.settings)
        self.keys = KeyTests(
            self.request,
            self.scan_input,
            self.texts,
            self.book_hits,
            self.state,
            self.diagnostics,
            self.substitute,
        )

    # ------------------------------------------------------------------ 4. timed effects

    def start_timed_effects(self) -> None:
        """Age the persisted sticky / cooldown effects against the chat-length clock.

        docs/worldbook.md#wi-timed-effects.
        """
        self.sticky_active, self.cooldown_active, self.timed_state = start_timed_effects(
            self.request.timed_state, self.items.by_lore_id, self.clock
        )

    # ------------------------------------------------------------------ 5. scan loops

    def run_loops(self) -> None:
        """Scan loops until no state asks for another, or the loop cap is reached.

        docs/worldbook.md#wi-loops.
        """
        settings = self.settings
        state = self.state
        delay_levels = sorted(
            {level for book in self.compiled if book is not None for level in book.delay_levels}
        )
        self.delay_levels = delay_levels
        self.level_index = 0
        state.level = delay_levels[0] if delay_levels else 0
        self.level_ran = False
        max_loops = MAX_SCAN_LOOPS
        if settings.max_recursion_steps > 0:
            max_loops = min(max_loops, settings.max_recursion_steps)
        while True:
            state.loop += 1
            self.keys.new_loop()
            if state.kind == State.RECURSION:
                self.level_ran = True
            self.loop_slots = {}
            ordered = self.ordered_walk()
            if ordered is not None:
                newly = self.evaluate_in_order(self.ordered(*ordered))
            else:
                candidates = self.candidates()
                if any(map(_GROUPS, candidates)):
                    # Groups choose among all of this loop's activations: phase by phase.
                    now = self.evaluate_candidates(candidates)
                    now = self.apply_groups(now)
                    survivors = self.roll_probability(now)
                    newly = self.spend_budget(survivors)
                else:
                    newly = self.evaluate_in_order(candidates)
            if newly:
                self.activating_loops += 1
            next_state = self.next_state(newly)
            if next_state is None:
                break
            if state.loop >= max_loops:
                if settings.max_recursion_steps == 0:
                    self.diagnostics.append(
                        WorldBookRuntimeDiagnostic(
                            code="WORLD_BOOK_SCAN_LOOPS_LIMITED",
                            message=f"stopped after {state.loop} scan loops",
                            severity="info",
                        )
                    )
                break
            state.kind = next_state

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

    def _match_set(self, item: Item) -> Collection[int]:
        """:meth:`~.keytests.KeyTests.match_set` kept per book and match class for the loop."""
        of_book = self._match_sets[item.book]
        found = of_book.get(item.entry.match_class)
        if found is None:
            found = of_book[item.entry.match_class] = self.keys.match_set(item)
        return found

    def evaluate(self, item: Item) -> Verdict:
        """The per-entry checks (docs/worldbook.md#wi-entry-checks) for one entry in this loop."""
        request, settings, state = self.request, self.settings, self.state
        loop = state.loop
        entry = item.entry.entry
        lore_id = item.entry.lore_id
        sticky = lore_id in self.sticky_active
        pre = pre_checks(item, request, self.cooldown_active, sticky, self.clock)
        if pre is not None:
            return Verdict(reason=pre, loop=loop)
        if entry.delay_until_recursion and not sticky:
            if state.kind != State.RECURSION:
                return Verdict(reason=Reason.DELAY_UNTIL_RECURSION, loop=loop)
            if entry.delay_until_recursion > state.level:
                return Verdict(
                    reason=Reason.DELAY_UNTIL_RECURSION,
                    detail=f"level {entry.delay_until_recursion} > {state.level}",
                    loop=loop,
                )
        if (
            state.kind == State.RECURSION
            and settings.recursive
            and entry.exclude_recursion
            and not sticky
        ):
            return Verdict(reason=Reason.EXCLUDE_RECURSION, loop=loop)
        if "@@activate" in item.entry.decorators:
            return Verdict(reason=Reason.DECORATOR_ACTIVATE, activated=True, loop=loop)
        if "@@dont_activate" in item.entry.decorators:
            return Verdict(reason=Reason.DECORATOR_DONT_ACTIVATE, loop=loop)
        if lore_id in request.forced:
            return Verdict(reason=Reason.FORCED, activated=True, loop=loop)
        if entry.constant:
            return Verdict(reason=Reason.CONSTANT, activated=True, loop=loop)
        if sticky:
            return Verdict(reason=Reason.STICKY, activated=True, loop=loop)
        if not item.entry.primary:
            return Verdict(reason=Reason.NO_KEYS, loop=loop)
        cs = entry.case_sensitive if entry.case_sensitive is not None else settings.case_sensitive
        ww = (
            entry.match_whole_words
            if entry.match_whole_words is not None
            else settings.match_whole_words
        )
        depth = self.keys.depth(item)
        primary = self.keys.matched(item, item.entry.primary, cs, ww, depth)
        if not primary:
            return Verdict(reason=Reason.NO_KEY_MATCH, loop=loop)
        if not (entry.selective and item.entry.secondary):
            return Verdict(
                reason=Reason.KEY_MATCH,
                matched_primary=primary,
                score=len(primary),
                activated=True,
                loop=loop,
            )
        secondary = self.keys.matched(item, item.entry.secondary, cs, ww, depth)
        return secondary_verdict(entry.selective_logic, primary, secondary, item, loop)

    def apply_groups(self, now: list[tuple[Item, Verdict]]) -> list[tuple[Item, Verdict]]:
        """Inclusion groups (docs/worldbook.md#wi-selection) over this loop's activations.

        Sticky members first, then in sorted order.
        """
        sticky_active = self.sticky_active
        if sticky_active:
            now.sort(key=lambda pair: 0 if pair[0].entry.lore_id in sticky_active else 1)
        return apply_groups(
            now, self.request, sticky_active, self.activated_groups, self.state.loop
        )

    def roll_probability(self, now: list[tuple[Item, Verdict]]) -> list[tuple[Item, Verdict]]:
        """Probability: a seeded roll per entry below 100 %, sticky entries skip it.

        docs/worldbook.md#wi-selection.
        """
        if all(item.entry.certain for item, _ in now):
            return now
        return [(item, verdict) for item, verdict in now if self.roll_one(item, verdict)]

    def roll_one(self, item: Item, verdict: Verdict) -> bool:
        """Whether one activated entry survives its probability roll (recorded if it does
        not)."""
        if item.entry.certain or item.entry.lore_id in self.sticky_active:
            return True
        probability = item.entry.entry.probability
        drawn = roll(self.request.seed, "probability", item.entry.lore_id, self.state.loop)
        drawn *= 100
        verdict.roll = drawn
        if drawn <= probability:
            return True
        verdict.activated = False
        verdict.reason = Reason.PROBABILITY
        verdict.detail = f"rolled {drawn:.2f} > {probability:g}"
        self.failed_probability.add(item)
        return False

    def spend_budget(self, survivors: list[tuple[Item, Verdict]]) -> list[tuple[Item, str]]:
        """The token budget (docs/worldbook.md#wi-selection), global and per book, over this loop's
        survivors.
        Returns the newly activated entries with their content."""
        newly: list[tuple[Item, str]] = []
        for item, verdict in survivors:
            content = self.spend_one(item, verdict)
            if content is not None:
                newly.append((item, content))
        for item, _ in newly:
            self.activated_items.add(item)
            self.activated_groups.update(item.entry.groups)
        return newly

    def spend_one(self, item: Item, verdict: Verdict) -> str | None:
        """The budget for one entry: its content (macro-substituted first: this text is
        inserted and recursed on) if it fits, else ``None`` and the rejection recorded.

        Once the budget has overflowed, an entry without macros in its content is rejected
        without counting it: its cost is only explanation, counted when its decision is read.
        """
        entry = item.entry.entry
        budget = self.budget
        if self.overflowed and item.entry.plain_content and not entry.ignore_budget:
            verdict.activated = False
            verdict.reason = Reason.BUDGET
            verdict.pending_budget = (self.used_tokens, budget)
            return None
        content = self.substitute(item.entry.content)
        tokens = self.request.count_tokens(content)
        verdict.tokens = tokens
        if not entry.ignore_budget:
            if self.overflowed or self.used_tokens + tokens >= budget:
                self.overflowed = True
                verdict.activated = False
                verdict.reason = Reason.BUDGET
                verdict.detail = f"{self.used_tokens} + {tokens} tokens reach the budget {budget}"
                return None
            book_budget = item.compiled.book.token_budget
            spent = self.book_used.get(item.book, 0)
            if book_budget is not None and spent + tokens > book_budget:
                verdict.activated = False
                verdict.reason = Reason.BOOK_BUDGET
                verdict.detail = f"{spent} + {tokens} tokens exceed the book budget {book_budget}"
                return None
            self.book_used[item.book] = spent + tokens
        self.used_tokens += tokens
        self.activated.append((item, verdict, content))
        return content

    def next_state(self, newly: list[tuple[Item, str]]) -> State | None:
        """The next loop's kind (recursion, min activations, a delay level) or ``None``.

        docs/worldbook.md#wi-loops.
        """
        settings, state = self.settings, self.state
        recursed = [c for i, c in newly if not i.entry.entry.prevent_recursion]
        if settings.recursive and not self.overflowed and recursed:
            chunk = "\n".join(recursed)
            state.recursion_parts.append(chunk)
            scan_recursion(self.book_hits, self.compiled, chunk)
            return State.RECURSION
        if state.kind == State.MIN_ACTIVATIONS and state.recursion_parts and settings.recursive:
            return State.RECURSION
        if (
            settings.min_activations > 0
            and len(self.activated_items) < settings.min_activations
            and not self.overflowed
        ):
            depth_now = settings.scan_depth + state.skew
            too_deep = (
                settings.min_activations_depth_max > 0
                and depth_now >= settings.min_activations_depth_max
            ) or depth_now >= len(self.texts.messages)
            if not too_deep:
                state.skew += 1
                return State.MIN_ACTIVATIONS
        if self.delay_levels:
            # docs/worldbook.md#wi-loops: delay-until-recursion levels run even with recursion off.
            # The lowest level is current from the start; each gets at least one recursion pass.
            if not self.level_ran:
                return State.RECURSION
            if self.level_index + 1 < len(self.delay_levels):
                self.level_index += 1
                state.level = self.delay_levels[self.level_index]
                self.level_ran = False
                return State.RECURSION
        return None

    # ------------------------------------------------------------------ 6. finish

    def finish(self) -> ActivationResult:
        """Host caps, positions, new timed effects and one decision per entry."""
        request, scan = self.request, self.scan_input
        # One book, no sticky entry first, one loop: the activations are in rank order.
        ranked = len(self.book_hits) == 1 and not self.sticky_active and self.activating_loops <= 1
        placed = cap_and_place(self.activated, self.limits, request.postprocess, ranked)
        substitute, count_tokens = self.substitute, request.count_tokens
        decisions = book_decisions(
            request,
            self.compiled,
            self.refused,
            self.verdicts,
            placed,
            set(self.timed_state.cooldown),
            self.clock,
            lambda content: count_tokens(substitute(content)),
            self.tails,
        )
        return ActivationResult(
            activated=activated_entries(placed),
            positions=buckets(placed),
            decisions=decisions,
            budget=BudgetReport(
                limit=self.budget, used=self.used_tokens, overflowed=self.overflowed
            ),
            diagnostics=tuple(self.diagnostics),
            timed_state=new_timed_state(placed, self.timed_state, self.clock, request.dry_run),
            loops=self.state.loop,
            seed=request.seed,
            scan=ScanSummary(
                scanned_messages=len(scan.messages),
                total_messages=scan.total_messages,
                scanned_chars=scan.scanned_chars,
                truncated=scan.truncated,
                chat_length=scan.chat_length,
            ),
        )
