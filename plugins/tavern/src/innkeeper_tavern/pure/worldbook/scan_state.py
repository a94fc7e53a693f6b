"""``ScanState``: what one world-book activation holds while it runs, and the per-entry steps
of a scan loop — the entry checks, inclusion groups, probability and the token budget
(`docs/worldbook.md#wi-entry-checks`, `docs/worldbook.md#wi-loops`).

:class:`~innkeeper_tavern.pure.worldbook.walk.ScanWalk` builds each loop's walk over the
candidates on it, and :func:`~innkeeper_tavern.pure.worldbook.engine.activate` runs the phases.
"""

from __future__ import annotations

from collections.abc import Collection
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
)
from innkeeper_tavern.pure.worldbook.matcher import CompiledBook
from innkeeper_tavern.pure.worldbook.model import (
    BookInput,
    Reason,
    TimedEffectsState,
    WorldBookRuntimeDiagnostic,
)
from innkeeper_tavern.pure.worldbook.request import (
    ActivationRequest,
)
from innkeeper_tavern.pure.worldbook.scan import ScanInput
from innkeeper_tavern.pure.worldbook.selection import (
    apply_groups,
    pre_checks,
    roll,
)

__all__ = ["ScanState"]


class ScanState:
    """The state of one activation in progress and the per-entry steps of a loop."""

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

    # Set by the scan loops (``run_loops``) and the plain-entry fast path.
    delay_levels: list[int]
    level_index: int
    level_ran: bool
    _match_sets: list[dict[int, Collection[int]]]

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
