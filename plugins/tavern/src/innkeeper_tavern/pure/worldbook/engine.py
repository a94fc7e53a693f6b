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

from operator import attrgetter
from typing import Final

from innkeeper_tavern.pure.worldbook.cache import MatcherCache
from innkeeper_tavern.pure.worldbook.candidates import (
    Item,
    Items,
)
from innkeeper_tavern.pure.worldbook.keytests import (
    KeyTests,
    State,
    build_texts,
    scan_book,
    scan_recursion,
)
from innkeeper_tavern.pure.worldbook.model import (
    ActivationResult,
    BudgetReport,
    ScanSummary,
    WorldBookRuntimeDiagnostic,
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
from innkeeper_tavern.pure.worldbook.scan import ActivationContext, build_scan_input
from innkeeper_tavern.pure.worldbook.selection import (
    start_timed_effects,
)
from innkeeper_tavern.pure.worldbook.walk import ScanWalk

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


class _Scan(ScanWalk):
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
