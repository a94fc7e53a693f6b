"""World-book activation: SillyTavern's scan loop, selection pipeline and positions, explained.

The pipeline follows `reference/sillytavern.md` §1.4-§1.11; :class:`_Scan` runs it as named
phases (its docstring lists them):

1. host cap: books reserved whole, in composition order, up to 10,000 entries;
2. entries sorted by ``order`` descending (stable) per the character strategy;
3. timed effects (sticky / cooldown / delay) evaluated against the chat-length clock;
4. scan loops (initial, recursion, min-activations, delay-until-recursion levels) with the
   per-entry checks of §1.7 in ST's order;
5. per loop: inclusion groups, probability (seeded, reproducible rolls), token budget;
6. host caps on the activated list (4,096 candidates, lore bytes ≤ 2 × profile budget);
7. positions (ascending ``order`` inside a bucket) and one decision per entry.

Everything is a pure function of its inputs: the RNG is derived from ``seed``, timed-effect
state comes in and goes out as a value, and token counting / macro substitution are injected.
"""

from __future__ import annotations

from innkeeper_tavern.pure.formats.worldbook import SelectiveLogic
from innkeeper_tavern.pure.worldbook.cache import MatcherCache, RefusedBook
from innkeeper_tavern.pure.worldbook.candidates import Item, Items, Verdict
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
       :meth:`evaluate` s them (§1.7), then :meth:`apply_groups`, :meth:`roll_probability`,
       :meth:`spend_budget` and :meth:`next_state`;
    6. :meth:`finish` — host caps on the activated list, positions, new timed effects and one
       decision per entry.
    """

    def __init__(self, request: ActivationRequest, cache: MatcherCache) -> None:
        self.request = request
        self.settings = request.settings
        self.cache = cache
        self.limits = request.host_limits.clamped()
        self.diagnostics: list[WorldBookRuntimeDiagnostic] = []
        #: (book, slot) → the verdict of every entry a loop evaluated
        self.verdicts: dict[tuple[int, int], Verdict] = {}
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
        self.activated_order: list[Item] = []
        self.activated_content: dict[tuple[int, int], str] = {}
        self.activated_keys: set[tuple[int, int]] = set()
        self.failed_probability: set[tuple[int, int]] = set()
        self.activated_groups: set[str] = set()
        settings = self.settings
        budget = max(1, round(settings.budget_percent * settings.max_context_tokens / 100))
        if settings.budget_cap > 0:
            budget = min(budget, settings.budget_cap)
        self.budget = budget
        self.used_tokens = 0
        self.book_used: dict[int, int] = {}
        self.overflowed = False

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
        self.items = Items(self.compiled, self.books, self.settings.character_strategy)

    # ------------------------------------------------------------------ 2. read the chat

    def read_chat(self) -> None:
        """The bounded scan input (§1.5) and its text in each case mode the books need."""
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
        """§1.10: age the persisted sticky / cooldown effects against the chat-length clock."""
        self.sticky_active, self.cooldown_active, self.timed_state = start_timed_effects(
            self.request.timed_state, self.items.by_lore_id, self.clock
        )

    # ------------------------------------------------------------------ 5. scan loops

    def run_loops(self) -> None:
        """§1.9: scan loops until no state asks for another (or the loop cap is reached)."""
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
            now: list[tuple[Item, Verdict]] = []
            for item in self.candidates():
                key = item.key
                if key in self.activated_keys or key in self.failed_probability:
                    continue
                verdict = self.evaluate(item)
                self.verdicts[key] = verdict
                if verdict.activated:
                    now.append((item, verdict))
            now = self.apply_groups(now)
            survivors = self.roll_probability(now)
            newly = self.spend_budget(survivors)
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
        candidate_keys: set[tuple[int, int]] = set()
        for book_index, hits in self.book_hits.items():
            book = self.compiled[book_index]
            assert book is not None
            for needle in hits.found:
                for slot in book.postings[needle]:
                    candidate_keys.add((book_index, slot))
            for slot in book.always:
                candidate_keys.add((book_index, slot))
        for lore_id in self.sticky_active | self.request.forced:
            found_item = self.items.by_lore_id(lore_id)
            if found_item is not None:
                candidate_keys.add(found_item.key)
        return sorted((self.items.get(k) for k in candidate_keys), key=lambda it: it.rank)

    def evaluate(self, item: Item) -> Verdict:
        """§1.7 checks 2-13 for one entry in the current loop."""
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
        return _secondary_verdict(entry.selective_logic, primary, secondary, item, loop)

    def apply_groups(self, now: list[tuple[Item, Verdict]]) -> list[tuple[Item, Verdict]]:
        """§1.8 inclusion groups over this loop's activations: sticky members first, then in
        sorted order."""
        sticky_active = self.sticky_active
        now.sort(key=lambda pair: 0 if pair[0].entry.lore_id in sticky_active else 1)
        return apply_groups(
            now, self.request, sticky_active, self.activated_groups, self.state.loop
        )

    def roll_probability(self, now: list[tuple[Item, Verdict]]) -> list[tuple[Item, Verdict]]:
        """§1.8 probability: a seeded roll per entry below 100 % (sticky entries skip it)."""
        survivors: list[tuple[Item, Verdict]] = []
        for item, verdict in now:
            entry = item.entry.entry
            sticky = item.entry.lore_id in self.sticky_active
            if not entry.use_probability or entry.probability >= 100 or sticky:
                survivors.append((item, verdict))
                continue
            drawn = roll(self.request.seed, "probability", item.entry.lore_id, self.state.loop)
            drawn *= 100
            verdict.roll = drawn
            if drawn <= entry.probability:
                survivors.append((item, verdict))
            else:
                verdict.activated = False
                verdict.reason = Reason.PROBABILITY
                verdict.detail = f"rolled {drawn:.2f} > {entry.probability:g}"
                self.failed_probability.add(item.key)
        return survivors

    def spend_budget(self, survivors: list[tuple[Item, Verdict]]) -> list[tuple[Item, str]]:
        """§1.8 token budget (the global one and a book's own) over this loop's survivors; the
        content is macro-substituted first (this text is inserted and recursed on). Returns the
        newly activated entries with their content."""
        request = self.request
        budget = self.budget
        newly: list[tuple[Item, str]] = []
        for item, verdict in survivors:
            entry = item.entry.entry
            content = self.substitute(item.entry.content)
            tokens = request.count_tokens(content)
            verdict.tokens = tokens
            if not entry.ignore_budget:
                if self.overflowed or self.used_tokens + tokens >= budget:
                    self.overflowed = True
                    verdict.activated = False
                    verdict.reason = Reason.BUDGET
                    verdict.detail = (
                        f"{self.used_tokens} + {tokens} tokens reach the budget {budget}"
                    )
                    continue
                book_budget = item.compiled.book.token_budget
                spent = self.book_used.get(item.book, 0)
                if book_budget is not None and spent + tokens > book_budget:
                    verdict.activated = False
                    verdict.reason = Reason.BOOK_BUDGET
                    verdict.detail = (
                        f"{spent} + {tokens} tokens exceed the book budget {book_budget}"
                    )
                    continue
                self.book_used[item.book] = spent + tokens
            self.used_tokens += tokens
            newly.append((item, content))
        for item, content in newly:
            self.activated_keys.add(item.key)
            self.activated_order.append(item)
            self.activated_content[item.key] = content
            self.activated_groups.update(item.entry.groups)
        return newly

    def next_state(self, newly: list[tuple[Item, str]]) -> State | None:
        """§1.9: the next loop's kind (recursion, min activations, a delay level) or ``None``."""
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
            and len(self.activated_keys) < settings.min_activations
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
            # §1.9: delay-until-recursion levels run even with recursion off. The lowest level
            # is current from the start; each level gets at least one recursion pass.
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
        placed = cap_and_place(
            self.activated_order,
            self.verdicts,
            self.activated_content,
            self.limits,
            request.postprocess,
        )
        decisions = book_decisions(
            request,
            self.compiled,
            self.refused,
            self.verdicts,
            placed,
            set(self.timed_state.cooldown),
            self.clock,
        )
        return ActivationResult(
            activated=activated_entries(placed, self.verdicts),
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


def _secondary_verdict(
    logic: SelectiveLogic,
    primary: tuple[str, ...],
    secondary: tuple[str, ...],
    item: Item,
    loop: int,
) -> Verdict:
    """§1.7 secondary-key logic for an entry whose primary keys matched."""
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
