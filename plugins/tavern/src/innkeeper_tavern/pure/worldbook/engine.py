"""World-book activation: SillyTavern's scan loop, selection pipeline and positions, explained.

The pipeline follows `reference/sillytavern.md` §1.4-§1.11:

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

import hashlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Final

from innkeeper_tavern.pure.formats.worldbook import Position, Role, SelectiveLogic, WorldBookEntry
from innkeeper_tavern.pure.worldbook.cache import MatcherCache, RefusedBook
from innkeeper_tavern.pure.worldbook.decisions import (
    BookDecisions,
    DecisionList,
    LazyDecisions,
    refused_decisions,
    static_decision,
)
from innkeeper_tavern.pure.worldbook.matcher import (
    CompiledBook,
    CompiledEntry,
    KeyRef,
    SegmentHits,
    is_word_char,
    key_label,
)
from innkeeper_tavern.pure.worldbook.model import (
    ActivatedEntry,
    ActivationResult,
    ActivationSettings,
    BookInput,
    BookSource,
    BudgetReport,
    CharacterStrategy,
    DepthGroup,
    EntryDecision,
    HostLimits,
    PositionedText,
    Positions,
    Reason,
    ScanSummary,
    TimedEffect,
    TimedEffectsState,
    WorldBookRuntimeDiagnostic,
)
from innkeeper_tavern.pure.worldbook.scan import (
    SCAN_JOINER,
    SCAN_PREFIX,
    ActivationContext,
    ScanInput,
    ScanLimits,
    build_scan_input,
)

__all__ = [
    "MAX_SCAN_LOOPS",
    "REGEX_KEY_TIMEOUT_SECONDS",
    "REGEX_REQUEST_BUDGET_SECONDS",
    "ActivationRequest",
    "CharacterIdentity",
    "activate",
    "estimate_tokens",
]

#: Wall-clock budget of one regex-key test; a pathological pattern is cut off and diagnosed.
#: Host bound (`docs/contract/world-info.md#profile-budget`: no unbounded match work).
REGEX_KEY_TIMEOUT_SECONDS: Final = 0.05
#: Total regex time for one activation; when spent, remaining regex keys are skipped.
REGEX_REQUEST_BUDGET_SECONDS: Final = 0.5
#: Scan loops per activation when ST's ``max_recursion_steps`` is 0 ("unlimited"). Each loop is
#: O(entries); this keeps a 10,000-entry chain from costing 10,000 passes.
MAX_SCAN_LOOPS: Final = 64
#: ST's ``MAX_SCAN_DEPTH`` (§1.5).
MAX_SCAN_DEPTH: Final = 1_000
#: Characters per token of :func:`estimate_tokens` (a conservative English-ish average).
CHARS_PER_TOKEN: Final = 3.5


def estimate_tokens(text: str) -> int:
    """Default token estimator: ``ceil(len / 3.5)``; replace it with a real tokenizer."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


_DEFAULT_SETTINGS: Final = ActivationSettings()
_NO_EFFECTS: Final = TimedEffectsState()
_DEFAULT_HOST_LIMITS: Final = HostLimits()
_DEFAULT_SCAN_LIMITS: Final = ScanLimits()


class _State(Enum):
    INITIAL = 1
    RECURSION = 2
    MIN_ACTIVATIONS = 3


@dataclass(frozen=True, slots=True)
class CharacterIdentity:
    """The active character for ``characterFilter`` (name = avatar file name without extension)."""

    name: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationRequest:
    """Everything one activation depends on. Books come in composition order.

    ``substitute`` runs macros over keys and content (identity when ``None``); ``count_tokens``
    is the one replaceable token estimator; ``forced`` lore ids are activated as if by an
    extension; ``dry_run`` computes decisions without starting new timed effects.
    ``postprocess`` runs on each activated entry's content before it is placed (ST applies its
    WORLD_INFO regex scripts there, §1.11); an empty result drops the entry (``empty-content``).
    """

    books: Sequence[BookInput]
    context: ActivationContext | None = None
    scan: ScanInput | None = None
    settings: ActivationSettings = _DEFAULT_SETTINGS
    seed: int = 0
    timed_state: TimedEffectsState = _NO_EFFECTS
    generation_type: str = "normal"
    character: CharacterIdentity | None = None
    forced: frozenset[str] = frozenset()
    substitute: Callable[[str], str] | None = None
    count_tokens: Callable[[str], int] = estimate_tokens
    host_limits: HostLimits = _DEFAULT_HOST_LIMITS
    scan_limits: ScanLimits = _DEFAULT_SCAN_LIMITS
    dry_run: bool = False
    regex_timeout: float = REGEX_KEY_TIMEOUT_SECONDS
    regex_budget: float = REGEX_REQUEST_BUDGET_SECONDS
    clock: Callable[[], float] = time.perf_counter
    postprocess: Callable[[str, WorldBookEntry], str] | None = None


def _roll(seed: int, purpose: str, key: str, loop: int) -> float:
    """A reproducible uniform draw in [0, 1) for one decision (auditable: seed + what + loop)."""
    digest = hashlib.blake2b(f"{seed}|{purpose}|{key}|{loop}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(slots=True)
class _Verdict:
    """Mutable interim decision of one entry (the last loop's verdict wins unless activated)."""

    reason: Reason
    detail: str = ""
    matched_primary: tuple[str, ...] = ()
    matched_secondary: tuple[str, ...] = ()
    score: int = 0
    group_winner: str | None = None
    roll: float | None = None
    tokens: int | None = None
    loop: int = 0
    activated: bool = False


@dataclass(slots=True)
class _Item:
    """One entry in the request-wide sorted list."""

    book: int
    entry: CompiledEntry
    compiled: CompiledBook
    key: tuple[int, int] = (0, 0)
    #: the entry's place in the request-wide sort (:class:`_Items`)
    rank: tuple[int, float, int, int, int] = (0, 0.0, 0, 0, 0)

    def __post_init__(self) -> None:
        self.key = (self.book, self.entry.index)


class _Items:
    """The request-wide sorted entry list (§1.4), materialized only where it is looked at.

    ST sorts every entry of every book once per request: chat lore, persona lore, then global
    and character lore per the character strategy, each by ``order`` descending, ties in
    composition then entry order. That order is the tuple :attr:`_Item.rank`: ``(bucket,
    -order, sub-bucket, book, entry)`` (the sub-bucket keeps global before character lore when
    the strategy merges them), so candidates can be ordered without sorting the whole book.
    """

    def __init__(
        self,
        compiled: Sequence[CompiledBook | None],
        books: Sequence[BookInput],
        strategy: CharacterStrategy,
    ) -> None:
        self.compiled = compiled
        if strategy == CharacterStrategy.EVENLY:
            global_rank, char_rank = (2, 0), (2, 1)
        elif strategy == CharacterStrategy.GLOBAL_FIRST:
            global_rank, char_rank = (2, 0), (3, 0)
        else:
            global_rank, char_rank = (3, 0), (2, 0)
        of_source = {
            BookSource.SESSION: (0, 0),
            BookSource.USER: (1, 0),
            BookSource.PRESET: global_rank,
            BookSource.CHARACTER: char_rank,
            BookSource.EMBEDDED: char_rank,
        }
        self._bucket = [of_source[b.source] for b in books]
        self._made: dict[tuple[int, int], _Item] = {}

    def get(self, key: tuple[int, int]) -> _Item:
        """The item of entry ``key = (book, slot)`` of an admitted book."""
        found = self._made.get(key)
        if found is None:
            book_index, slot = key
            book = self.compiled[book_index]
            assert book is not None
            compiled_entry = book.by_slot[slot]
            assert compiled_entry is not None
            found = _Item(book_index, compiled_entry, book)
            bucket, sub = self._bucket[book_index]
            order = -compiled_entry.entry.order
            found.rank = (bucket, order, sub, book_index, book.position[slot])
            self._made[key] = found
        return found

    def by_lore_id(self, lore_id: str) -> _Item | None:
        """The entry with this lore id (the last in sort order when several share it)."""
        best: _Item | None = None
        for book_index, book in enumerate(self.compiled):
            if book is None:
                continue
            for slot in book.lore_index.get(lore_id, ()):
                item = self.get((book_index, slot))
                if best is None or item.rank > best.rank:
                    best = item
        return best


@dataclass(slots=True)
class _Texts:
    """The scan material in both case modes with per-depth prefix ends."""

    messages: tuple[str, ...]
    chat: dict[bool, str]
    prefix_end: dict[bool, list[int]]
    sources: dict[str, dict[bool, str]]
    inject: dict[bool, list[str]]


_SOURCE_FLAGS: Final = (
    ("persona_description", "match_persona_description"),
    ("character_description", "match_character_description"),
    ("character_personality", "match_character_personality"),
    ("character_depth_prompt", "match_character_depth_prompt"),
    ("scenario", "match_scenario"),
    ("creator_notes", "match_creator_notes"),
)


def _build_texts(scan: ScanInput, modes: set[bool]) -> _Texts:
    """The chat buffer (and its per-depth prefix ends) for each needed case mode."""
    chat: dict[bool, str] = {}
    prefix_end: dict[bool, list[int]] = {}
    for case_sensitive in modes:
        msgs = scan.messages if case_sensitive else tuple(m.lower() for m in scan.messages)
        ends = [0]
        length = len(SCAN_PREFIX)
        for index, message in enumerate(msgs):
            length += (len(SCAN_JOINER) if index else 0) + len(message)
            ends.append(length)
        chat[case_sensitive] = SCAN_PREFIX + SCAN_JOINER.join(msgs) if msgs else ""
        prefix_end[case_sensitive] = ends
    sources: dict[str, dict[bool, str]] = {}
    for name, _ in _SOURCE_FLAGS:
        text = getattr(scan.sources, name)
        if text:
            sources[name] = {True: text, False: text.lower()}
    inject = {True: list(scan.inject), False: [t.lower() for t in scan.inject]}
    return _Texts(
        messages=scan.messages, chat=chat, prefix_end=prefix_end, sources=sources, inject=inject
    )


@dataclass(slots=True)
class _BookHits:
    """Scan results of one compiled book for this request."""

    chat: dict[bool, SegmentHits] = field(default_factory=dict)
    sources: dict[bool, dict[str, SegmentHits]] = field(default_factory=dict)
    inject: dict[bool, list[SegmentHits]] = field(default_factory=dict)
    recursion: dict[bool, SegmentHits] = field(default_factory=dict)
    found: set[int] = field(default_factory=set)


def _merge(into: SegmentHits, other: SegmentHits) -> None:
    for needle, end in other.sub.items():
        into.sub.setdefault(needle, end)
    for needle, end in other.whole.items():
        into.whole.setdefault(needle, end)


class _Run:
    """One activation in progress (keeps the per-request mutable state in one place)."""

    def __init__(self, request: ActivationRequest, cache: MatcherCache) -> None:
        self.request = request
        self.settings = request.settings
        self.cache = cache
        self.limits = request.host_limits.clamped()
        self.diagnostics: list[WorldBookRuntimeDiagnostic] = []
        self.decisions: dict[tuple[int, int], _Verdict] = {}
        #: book index → the cached refusal of a book the host cap did not admit
        self.refused: dict[int, RefusedBook] = {}
        self.regex_spent = 0.0
        self.regex_exhausted = False
        self.substitute = request.substitute or (lambda text: text)
        self._dynamic_cache: dict[str, str] = {}

    # ------------------------------------------------------------------ setup

    def admit_books(self) -> tuple[list[CompiledBook | None], list[BookInput]]:
        """Reserve books whole in composition order
        (`docs/contract/world-info.md#profile-budget`)."""
        reserved = 0
        compiled: list[CompiledBook | None] = []
        for book_index, book_input in enumerate(self.request.books):
            count = len(book_input.book.entries)
            if reserved + count > self.limits.max_runtime_entries:
                compiled.append(None)
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
            compiled.append(book)
        return compiled, list(self.request.books)

    # ------------------------------------------------------------------ matching

    def scan_book(self, book: CompiledBook, texts: _Texts) -> _BookHits:
        """Run the automata of ``book`` over the chat buffer, sources and inject texts."""
        hits = _BookHits()
        global_cs = self.settings.case_sensitive
        modes = {value if value is not None else global_cs for value in book.case_values}
        flags = {name for name in book.source_flags if name in texts.sources}
        for mode in modes:
            hits.chat[mode] = book.scan(texts.chat[mode], mode)
            hits.sources[mode] = {
                name: book.scan(texts.sources[name][mode], mode) for name in flags
            }
            hits.inject[mode] = [book.scan(text, mode) for text in texts.inject[mode]]
            hits.recursion[mode] = SegmentHits()
            hits.found.update(hits.chat[mode].sub)
            for source_hits in hits.sources[mode].values():
                hits.found.update(source_hits.sub)
            for inject_hits in hits.inject[mode]:
                hits.found.update(inject_hits.sub)
        return hits

    def regex_test(self, item: _Item, pattern: KeyRef | None, haystack: str, key: str) -> bool:
        compiled_regex = pattern.regex if pattern is not None else item.compiled.dynamic_regex(key)
        if compiled_regex is None:
            return False
        if key in item.compiled.poisoned:
            return False
        if self.regex_exhausted:
            return False
        remaining = self.request.regex_budget - self.regex_spent
        timeout = max(0.0, min(self.request.regex_timeout, remaining))
        started = self.request.clock()
        try:
            return compiled_regex.search(haystack, timeout=timeout)
        except TimeoutError:
            item.compiled.poisoned.add(key)
            self.diagnostics.append(
                WorldBookRuntimeDiagnostic(
                    code="WORLD_BOOK_REGEX_KEY_TIMEOUT",
                    message=f"regex key {key_label(key)} exceeded {timeout:.3f}s and is skipped",
                    resource_id=item.compiled.resource_id,
                    uid=item.entry.entry.uid,
                )
            )
            return False
        finally:
            self.regex_spent += self.request.clock() - started
            if self.regex_spent >= self.request.regex_budget and not self.regex_exhausted:
                self.regex_exhausted = True
                self.diagnostics.append(
                    WorldBookRuntimeDiagnostic(
                        code="WORLD_BOOK_REGEX_BUDGET_SPENT",
                        message="regex-key time budget of this activation is spent",
                    )
                )


_EMPTY_HITS: Final = SegmentHits()


def activate(request: ActivationRequest, cache: MatcherCache | None = None) -> ActivationResult:
    """Decide which entries of ``request.books`` activate, where they go and why.

    Pass a long-lived :class:`~innkeeper_tavern.pure.worldbook.matcher.MatcherCache` so each book
    revision is compiled once. Never raises for bad book content: problems become diagnostics.
    """
    run = _Run(request, cache if cache is not None else MatcherCache())
    settings = request.settings
    if request.scan is not None:
        scan = request.scan
    else:
        scan = build_scan_input(
            request.context or ActivationContext(),
            include_names=settings.include_names,
            limits=request.scan_limits,
        )
    if scan.truncated:
        run.diagnostics.append(
            WorldBookRuntimeDiagnostic(
                code="WORLD_BOOK_SCAN_TEXT_TRUNCATED",
                message=(
                    f"scan input bounded to {len(scan.messages)} of {scan.total_messages} "
                    f"messages, {scan.scanned_chars} characters"
                ),
                severity="info",
            )
        )
    compiled, books = run.admit_books()
    items = _Items(compiled, books, settings.character_strategy)
    modes_needed = {
        value if value is not None else settings.case_sensitive
        for book in compiled
        if book is not None
        for value in book.case_values
    }
    texts = _build_texts(scan, modes_needed)
    book_hits: dict[int, _BookHits] = {}
    for book_index, book in enumerate(compiled):
        if book is not None:
            book_hits[book_index] = run.scan_book(book, texts)

    clock = scan.chat_length
    sticky_active, cooldown_active, state = _start_timed_effects(
        request.timed_state, items.by_lore_id, clock
    )

    # ---------------------------------------------------------------- scan loops
    activated_order: list[_Item] = []
    activated_content: dict[tuple[int, int], str] = {}
    activated_keys: set[tuple[int, int]] = set()
    failed_probability: set[tuple[int, int]] = set()
    activated_groups: set[str] = set()
    recursion_parts: list[str] = []
    budget = max(1, round(settings.budget_percent * settings.max_context_tokens / 100))
    if settings.budget_cap > 0:
        budget = min(budget, settings.budget_cap)
    used_tokens = 0
    book_used: dict[int, int] = {}
    overflowed = False
    delay_levels = sorted(
        {level for book in compiled if book is not None for level in book.delay_levels}
    )
    level_index = 0
    current_level = delay_levels[0] if delay_levels else 0
    level_ran = False
    skew = 0
    loop = 0
    state_kind = _State.INITIAL
    max_loops = MAX_SCAN_LOOPS
    if settings.max_recursion_steps > 0:
        max_loops = min(max_loops, settings.max_recursion_steps)
    haystack_cache: dict[tuple[object, ...], str] = {}

    def haystack(item: _Item, depth: int) -> str:
        """ST's raw haystack for one entry (§1.5), cached per (depth, sources) this loop."""
        enabled = tuple(name for name in item.entry.scan_sources if name in texts.sources)
        key = (depth, enabled)
        found = haystack_cache.get(key)
        if found is None:
            parts: list[str] = []
            if depth > 0:
                parts.append(SCAN_PREFIX + SCAN_JOINER.join(texts.messages[:depth]))
            parts.extend(texts.sources[name][True] for name in enabled)
            parts.extend(scan.inject)
            if state_kind != _State.MIN_ACTIVATIONS and recursion_parts:
                parts.append("\n".join(recursion_parts))
            found = SCAN_JOINER.join(parts)
            haystack_cache[key] = found
        return found

    def entry_depth(item: _Item) -> int:
        entry = item.entry.entry
        if entry.scan_depth is not None:
            depth = entry.scan_depth
        elif item.compiled.book.scan_depth is not None:
            depth = item.compiled.book.scan_depth
        else:
            depth = settings.scan_depth + skew
        return max(0, min(depth, MAX_SCAN_DEPTH, len(texts.messages)))

    def key_matches(item: _Item, ref: KeyRef, cs: bool, ww: bool, depth: int) -> bool:
        if ref.kind == "empty":
            return False
        if ref.kind == "regex":
            return run.regex_test(item, ref, haystack(item, depth), ref.raw.strip())
        if ref.kind == "dynamic":
            key = run._dynamic_cache.get(ref.raw)
            if key is None:
                key = run.substitute(ref.raw).strip()
                run._dynamic_cache[ref.raw] = key
            if not key:
                return False
            if item.compiled.dynamic_regex(key) is not None:
                return run.regex_test(item, None, haystack(item, depth), key)
            return _plain_in(haystack(item, depth), key, cs, ww)
        needle = ref.needle
        whole = ww and not item.compiled.needle_has_space[needle]
        chat = book_hits[item.book].chat[cs]
        end = (chat.whole if whole else chat.sub).get(needle)
        if end is not None and end <= texts.prefix_end[cs][depth]:
            return True
        return plain_elsewhere(item, needle, cs, whole)

    def plain_elsewhere(item: _Item, needle: int, cs: bool, whole: bool) -> bool:
        """A plain key outside the scanned chat: the entry's sources, injects, recursion."""
        hits = book_hits[item.book]
        for name in item.entry.scan_sources:
            source = hits.sources[cs].get(name, _EMPTY_HITS)
            if needle in (source.whole if whole else source.sub):
                return True
        for inject in hits.inject[cs]:
            if needle in (inject.whole if whole else inject.sub):
                return True
        if state_kind != _State.MIN_ACTIVATIONS:
            recursion = hits.recursion[cs]
            if needle in (recursion.whole if whole else recursion.sub):
                return True
        return False

    def matched(
        item: _Item, refs: tuple[KeyRef, ...], cs: bool, ww: bool, depth: int
    ) -> tuple[str, ...]:
        """The raw keys of ``refs`` that match (:func:`key_matches`; plain keys seen in the
        scanned chat, the common case, are checked here without a call per key)."""
        chat = book_hits[item.book].chat[cs]
        sub, whole_ends = chat.sub, chat.whole
        has_space = item.compiled.needle_has_space
        limit = texts.prefix_end[cs][depth]
        out: list[str] = []
        for ref in refs:
            if ref.kind == "plain":
                needle = ref.needle
                whole = ww and not has_space[needle]
                end = (whole_ends if whole else sub).get(needle)
                if (end is not None and end <= limit) or plain_elsewhere(item, needle, cs, whole):
                    out.append(ref.raw)
            elif key_matches(item, ref, cs, ww, depth):
                out.append(ref.raw)
        return tuple(out)

    def evaluate(item: _Item) -> _Verdict:
        """§1.7 checks 2-13 for one entry in the current loop."""
        entry = item.entry.entry
        lore_id = item.entry.lore_id
        sticky = lore_id in sticky_active
        pre = _pre_checks(item, request, cooldown_active, sticky, clock)
        if pre is not None:
            return _Verdict(reason=pre, loop=loop)
        if entry.delay_until_recursion and not sticky:
            if state_kind != _State.RECURSION:
                return _Verdict(reason=Reason.DELAY_UNTIL_RECURSION, loop=loop)
            if entry.delay_until_recursion > current_level:
                return _Verdict(
                    reason=Reason.DELAY_UNTIL_RECURSION,
                    detail=f"level {entry.delay_until_recursion} > {current_level}",
                    loop=loop,
                )
        if (
            state_kind == _State.RECURSION
            and settings.recursive
            and entry.exclude_recursion
            and not sticky
        ):
            return _Verdict(reason=Reason.EXCLUDE_RECURSION, loop=loop)
        if "@@activate" in item.entry.decorators:
            return _Verdict(reason=Reason.DECORATOR_ACTIVATE, activated=True, loop=loop)
        if "@@dont_activate" in item.entry.decorators:
            return _Verdict(reason=Reason.DECORATOR_DONT_ACTIVATE, loop=loop)
        if lore_id in request.forced:
            return _Verdict(reason=Reason.FORCED, activated=True, loop=loop)
        if entry.constant:
            return _Verdict(reason=Reason.CONSTANT, activated=True, loop=loop)
        if sticky:
            return _Verdict(reason=Reason.STICKY, activated=True, loop=loop)
        if not item.entry.primary:
            return _Verdict(reason=Reason.NO_KEYS, loop=loop)
        cs = entry.case_sensitive if entry.case_sensitive is not None else settings.case_sensitive
        ww = (
            entry.match_whole_words
            if entry.match_whole_words is not None
            else settings.match_whole_words
        )
        depth = entry_depth(item)
        primary = matched(item, item.entry.primary, cs, ww, depth)
        if not primary:
            return _Verdict(reason=Reason.NO_KEY_MATCH, loop=loop)
        if not (entry.selective and item.entry.secondary):
            return _Verdict(
                reason=Reason.KEY_MATCH,
                matched_primary=primary,
                score=len(primary),
                activated=True,
                loop=loop,
            )
        secondary = matched(item, item.entry.secondary, cs, ww, depth)
        total = len(item.entry.secondary)
        logic = entry.selective_logic
        hit_any = bool(secondary)
        hit_all = len(secondary) == total
        passed = {
            SelectiveLogic.AND_ANY: hit_any,
            SelectiveLogic.NOT_ALL: not hit_all,
            SelectiveLogic.NOT_ANY: not hit_any,
            SelectiveLogic.AND_ALL: hit_all,
        }[logic]
        if not passed:
            return _Verdict(
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
        return _Verdict(
            reason=Reason.KEY_MATCH,
            matched_primary=primary,
            matched_secondary=secondary,
            score=score,
            activated=True,
            loop=loop,
        )

    while True:
        loop += 1
        haystack_cache.clear()
        if state_kind == _State.RECURSION:
            level_ran = True
        # Candidates: entries whose primary keys were seen anywhere, plus always-evaluated ones.
        candidate_keys: set[tuple[int, int]] = set()
        for book_index, hits in book_hits.items():
            book = compiled[book_index]
            assert book is not None
            for needle in hits.found:
                for slot in book.postings[needle]:
                    candidate_keys.add((book_index, slot))
            for slot in book.always:
                candidate_keys.add((book_index, slot))
        for lore_id in sticky_active | request.forced:
            found_item = items.by_lore_id(lore_id)
            if found_item is not None:
                candidate_keys.add(found_item.key)

        now: list[tuple[_Item, _Verdict]] = []
        ordered_candidates = sorted((items.get(k) for k in candidate_keys), key=lambda it: it.rank)
        for item in ordered_candidates:
            key = item.key
            if key in activated_keys or key in failed_probability:
                continue
            verdict = evaluate(item)
            run.decisions[key] = verdict
            if verdict.activated:
                now.append((item, verdict))
        # §1.8: sticky first, then sorted order.
        now.sort(key=lambda pair: 0 if pair[0].entry.lore_id in sticky_active else 1)
        now = _apply_groups(now, request, sticky_active, activated_groups, loop)
        # Probability.
        survivors: list[tuple[_Item, _Verdict]] = []
        for item, verdict in now:
            entry = item.entry.entry
            sticky = item.entry.lore_id in sticky_active
            if not entry.use_probability or entry.probability >= 100 or sticky:
                survivors.append((item, verdict))
                continue
            roll = _roll(request.seed, "probability", item.entry.lore_id, loop) * 100
            verdict.roll = roll
            if roll <= entry.probability:
                survivors.append((item, verdict))
            else:
                verdict.activated = False
                verdict.reason = Reason.PROBABILITY
                verdict.detail = f"rolled {roll:.2f} > {entry.probability:g}"
                failed_probability.add(item.key)
        # Budget (content is macro-substituted first: this text is inserted and recursed on).
        newly: list[tuple[_Item, _Verdict, str]] = []
        for item, verdict in survivors:
            entry = item.entry.entry
            content = run.substitute(item.entry.content)
            tokens = request.count_tokens(content)
            verdict.tokens = tokens
            if not entry.ignore_budget:
                if overflowed or used_tokens + tokens >= budget:
                    overflowed = True
                    verdict.activated = False
                    verdict.reason = Reason.BUDGET
                    verdict.detail = f"{used_tokens} + {tokens} tokens reach the budget {budget}"
                    continue
                book_budget = item.compiled.book.token_budget
                spent = book_used.get(item.book, 0)
                if book_budget is not None and spent + tokens > book_budget:
                    verdict.activated = False
                    verdict.reason = Reason.BOOK_BUDGET
                    verdict.detail = (
                        f"{spent} + {tokens} tokens exceed the book budget {book_budget}"
                    )
                    continue
                book_used[item.book] = spent + tokens
            used_tokens += tokens
            newly.append((item, verdict, content))
        for item, _verdict, content in newly:
            activated_keys.add(item.key)
            activated_order.append(item)
            activated_content[item.key] = content
            activated_groups.update(item.entry.groups)
        # Next state (§1.9).
        recursed = [c for i, _, c in newly if not i.entry.entry.prevent_recursion]
        next_state: _State | None = None
        if settings.recursive and not overflowed and recursed:
            next_state = _State.RECURSION
            chunk = "\n".join(recursed)
            recursion_parts.append(chunk)
            _scan_recursion(book_hits, compiled, chunk)
        if (
            next_state is None
            and state_kind == _State.MIN_ACTIVATIONS
            and recursion_parts
            and settings.recursive
        ):
            next_state = _State.RECURSION
        if (
            next_state is None
            and settings.min_activations > 0
            and len(activated_keys) < settings.min_activations
            and not overflowed
        ):
            depth_now = settings.scan_depth + skew
            too_deep = (
                settings.min_activations_depth_max > 0
                and depth_now >= settings.min_activations_depth_max
            ) or depth_now >= len(texts.messages)
            if not too_deep:
                skew += 1
                next_state = _State.MIN_ACTIVATIONS
        if next_state is None and delay_levels:
            # §1.9: delay-until-recursion levels run even with recursion off. The lowest level
            # is current from the start; each level gets at least one recursion pass.
            if not level_ran:
                next_state = _State.RECURSION
            elif level_index + 1 < len(delay_levels):
                level_index += 1
                current_level = delay_levels[level_index]
                level_ran = False
                next_state = _State.RECURSION
        if next_state is None:
            break
        if loop >= max_loops:
            if settings.max_recursion_steps == 0:
                run.diagnostics.append(
                    WorldBookRuntimeDiagnostic(
                        code="WORLD_BOOK_SCAN_LOOPS_LIMITED",
                        message=f"stopped after {loop} scan loops",
                        severity="info",
                    )
                )
            break
        state_kind = next_state

    summary = ScanSummary(
        scanned_messages=len(scan.messages),
        total_messages=scan.total_messages,
        scanned_chars=scan.scanned_chars,
        truncated=scan.truncated,
        chat_length=scan.chat_length,
    )
    return _finish(
        run,
        request,
        activated_order,
        activated_content,
        compiled,
        books,
        state,
        clock,
        BudgetReport(limit=budget, used=used_tokens, overflowed=overflowed),
        loop,
        summary,
    )


def _plain_in(haystack: str, key: str, case_sensitive: bool, whole_words: bool) -> bool:
    """§1.6 plain-key test on a built haystack (used for macro-bearing keys)."""
    text = haystack if case_sensitive else haystack.lower()
    needle = key if case_sensitive else key.lower()
    if not whole_words or len(needle.split()) > 1:
        return needle in text
    # Whole word: an occurrence bounded by the text edge or a JavaScript ASCII \W character.
    start = text.find(needle)
    while start != -1:
        end = start + len(needle)
        if (start == 0 or not is_word_char(text[start - 1])) and (
            end == len(text) or not is_word_char(text[end])
        ):
            return True
        start = text.find(needle, start + 1)
    return False


def _pre_checks(
    item: _Item,
    request: ActivationRequest,
    cooldown_active: set[str],
    sticky: bool,
    clock: int,
) -> Reason | None:
    """§1.7 checks 2-5: disabled, triggers, character filter, delay, cooldown."""
    entry = item.entry.entry
    if entry.disable:
        return Reason.DISABLED
    if entry.triggers and request.generation_type not in entry.triggers:
        return Reason.TRIGGER
    filt = entry.character_filter
    if filt is not None:
        character = request.character
        if filt.names:
            included = character is not None and character.name in filt.names
            if included == filt.is_exclude:
                return Reason.CHARACTER_FILTER
        if filt.tags:
            included = character is not None and any(t in filt.tags for t in character.tags)
            if included == filt.is_exclude:
                return Reason.CHARACTER_FILTER
    if entry.delay and clock < entry.delay:
        return Reason.DELAY
    if item.entry.lore_id in cooldown_active and not sticky:
        return Reason.COOLDOWN
    return None


def _start_timed_effects(
    state: TimedEffectsState, by_lore_id: Callable[[str], _Item | None], clock: int
) -> tuple[set[str], set[str], TimedEffectsState]:
    """§1.10: age the persisted effects at the start of a scan.

    Effects set when the chat was no longer than now are dropped unless protected (the chat did
    not advance: swipe, regenerate, deletion). Effects of an entry that no longer configures them
    are dropped; effects of unknown or edited entries are kept until they end. An ending sticky
    effect starts a protected cooldown when the entry has one.
    """
    sticky: dict[str, TimedEffect] = {}
    cooldown: dict[str, TimedEffect] = {}

    def current(key: str, effect: TimedEffect) -> _Item | None:
        item = by_lore_id(key)
        if item is not None and item.entry.fingerprint == effect.hash:
            return item
        return None

    for key, effect in state.sticky.items():
        if clock <= effect.start and not effect.protected:
            continue
        item = current(key, effect)
        if item is not None and not item.entry.entry.sticky:
            continue
        if clock >= effect.end:
            if item is not None and item.entry.entry.cooldown:
                cooldown[key] = TimedEffect(
                    hash=effect.hash,
                    start=clock,
                    end=clock + item.entry.entry.cooldown,
                    protected=True,
                )
            continue
        sticky[key] = effect
    for key, effect in state.cooldown.items():
        if key in cooldown:
            continue
        if clock <= effect.start and not effect.protected:
            continue
        item = current(key, effect)
        if item is not None and not item.entry.entry.cooldown:
            continue
        if clock >= effect.end:
            continue
        cooldown[key] = effect
    sticky_active = {k for k, e in sticky.items() if current(k, e) is not None}
    cooldown_active = {k for k, e in cooldown.items() if current(k, e) is not None}
    return sticky_active, cooldown_active, TimedEffectsState(sticky=sticky, cooldown=cooldown)


def _apply_groups(
    now: list[tuple[_Item, _Verdict]],
    request: ActivationRequest,
    sticky_active: set[str],
    activated_groups: set[str],
    loop: int,
) -> list[tuple[_Item, _Verdict]]:
    """§1.8 inclusion groups over one loop's candidates (before probability)."""
    settings = request.settings
    members_of: dict[str, list[int]] = {}
    for index, (item, _) in enumerate(now):
        for name in item.entry.groups:
            members_of.setdefault(name, []).append(index)
    if not members_of:
        return now
    removed: set[int] = set()

    def lose(index: int, reason: Reason, detail: str, winner: str | None = None) -> None:
        removed.add(index)
        verdict = now[index][1]
        verdict.activated = False
        verdict.reason = reason
        verdict.detail = detail
        verdict.group_winner = winner

    for name, members in members_of.items():
        live = [m for m in members if m not in removed]
        if not live:
            continue
        sticky_members = [m for m in live if now[m][0].entry.lore_id in sticky_active]
        if sticky_members:
            winner = now[sticky_members[0]][0].entry.lore_id
            for m in live:
                if m not in sticky_members:
                    lose(m, Reason.GROUP_LOST, f"group {name!r}: a sticky member holds it", winner)
            continue
        scoring = settings.use_group_scoring or any(
            now[m][0].entry.entry.use_group_scoring for m in live
        )
        if scoring:
            best = max(now[m][1].score for m in live)
            for m in live:
                entry = now[m][0].entry.entry
                opted = (
                    entry.use_group_scoring
                    if entry.use_group_scoring is not None
                    else settings.use_group_scoring
                )
                if opted and now[m][1].score < best:
                    lose(m, Reason.GROUP_SCORE, f"group {name!r}: score {now[m][1].score} < {best}")
            live = [m for m in live if m not in removed]
        if name in activated_groups:
            for m in live:
                lose(m, Reason.GROUP_ALREADY_ACTIVATED, f"group {name!r} already has an entry")
            continue
        if len(live) <= 1:
            continue
        overriding = [m for m in live if now[m][0].entry.entry.group_override]
        if overriding:
            chosen = max(overriding, key=lambda m: (now[m][0].entry.entry.order, -m))
            detail = f"group {name!r}: override by highest order"
        else:
            weights = [max(0.0, now[m][0].entry.entry.group_weight) for m in live]
            total = sum(weights)
            roll = _roll(request.seed, "group", name, loop) * total
            chosen = live[-1]
            cumulative = 0.0
            for m, weight in zip(live, weights, strict=True):
                cumulative += weight
                if roll <= cumulative:
                    chosen = m
                    break
            detail = f"group {name!r}: weighted roll {roll:.2f} of {total:g}"
        winner = now[chosen][0].entry.lore_id
        for m in live:
            if m != chosen:
                lose(m, Reason.GROUP_LOST, detail, winner)
    return [pair for index, pair in enumerate(now) if index not in removed]


def _scan_recursion(
    book_hits: Mapping[int, _BookHits], compiled: Sequence[CompiledBook | None], chunk: str
) -> None:
    lowered = chunk.lower()
    for book_index, hits in book_hits.items():
        book = compiled[book_index]
        assert book is not None
        for mode in list(hits.recursion):
            found = book.scan(chunk if mode else lowered, mode)
            _merge(hits.recursion[mode], found)
            hits.found.update(found.sub)


def _buckets(placed: Sequence[tuple[_Item, str]]) -> Positions:
    """§1.11: prepend in rank order, i.e. ascending ``order``, later activation first on ties."""
    lists: dict[Position, list[PositionedText]] = {p: [] for p in Position}
    depth_groups: dict[tuple[int, Role], list[PositionedText]] = {}
    outlets: dict[str, list[PositionedText]] = {}
    for item, content in reversed(placed):
        entry = item.entry.entry
        text = PositionedText(lore_id=item.entry.lore_id, content=content)
        if entry.position == Position.AT_DEPTH:
            depth_groups.setdefault((max(0, entry.depth), entry.role), []).append(text)
        elif entry.position == Position.OUTLET:
            outlets.setdefault(entry.outlet_name, []).append(text)
        else:
            lists[entry.position].append(text)
    return Positions(
        before=tuple(lists[Position.BEFORE_CHAR]),
        after=tuple(lists[Position.AFTER_CHAR]),
        an_top=tuple(lists[Position.AN_TOP]),
        an_bottom=tuple(lists[Position.AN_BOTTOM]),
        em_top=tuple(lists[Position.EM_TOP]),
        em_bottom=tuple(lists[Position.EM_BOTTOM]),
        at_depth=tuple(
            DepthGroup(depth=depth, role=role, entries=tuple(entries))
            for (depth, role), entries in sorted(depth_groups.items())
        ),
        outlets={name: tuple(entries) for name, entries in sorted(outlets.items())},
    )


def _finish(
    run: _Run,
    request: ActivationRequest,
    activated_order: list[_Item],
    activated_content: dict[tuple[int, int], str],
    compiled: list[CompiledBook | None],
    books: list[BookInput],
    state: TimedEffectsState,
    clock: int,
    budget: BudgetReport,
    loops: int,
    summary: ScanSummary,
) -> ActivationResult:
    """Host caps, positions, new timed effects and one decision per entry."""
    limits = run.limits
    ranked = sorted(activated_order, key=lambda item: -item.entry.entry.order)
    placed: list[tuple[_Item, str]] = []
    kept = 0
    lore_bytes = 0
    bytes_full = False
    for item in ranked:
        verdict = run.decisions[item.key]
        content = activated_content[item.key]
        if kept >= limits.max_lore_candidates:
            verdict.activated = False
            verdict.reason = Reason.HOST_CANDIDATE_CAP
            verdict.detail = f"more than {limits.max_lore_candidates} activated entries"
            continue
        size = len(content.encode("utf-8"))
        if bytes_full or lore_bytes + size > limits.max_lore_bytes:
            bytes_full = True
            verdict.activated = False
            verdict.reason = Reason.HOST_BYTES_CAP
            verdict.detail = f"lore bodies exceed {limits.max_lore_bytes} bytes"
            continue
        kept += 1
        lore_bytes += size
        entry = item.entry.entry
        if request.postprocess is not None:
            content = request.postprocess(content, entry)
        if not content.strip():
            verdict.activated = False
            verdict.reason = Reason.EMPTY_CONTENT
            continue
        if entry.position == Position.OUTLET and not entry.outlet_name:
            verdict.activated = False
            verdict.reason = Reason.OUTLET_UNNAMED
            continue
        placed.append((item, content))

    sticky = dict(state.sticky)
    cooldown = dict(state.cooldown)
    if not request.dry_run:
        for item, _ in placed:
            entry = item.entry.entry
            lore_id = item.entry.lore_id
            if entry.sticky and lore_id not in sticky:
                sticky[lore_id] = TimedEffect(
                    hash=item.entry.fingerprint, start=clock, end=clock + entry.sticky
                )
            if entry.cooldown and lore_id not in cooldown:
                cooldown[lore_id] = TimedEffect(
                    hash=item.entry.fingerprint, start=clock, end=clock + entry.cooldown
                )

    activated = tuple(
        ActivatedEntry(
            lore_id=item.entry.lore_id,
            resource_id=item.compiled.resource_id,
            uid=item.entry.entry.uid,
            comment=item.entry.entry.comment,
            content=content,
            position=item.entry.entry.position,
            order=item.entry.entry.order,
            depth=item.entry.entry.depth,
            role=item.entry.entry.role,
            outlet_name=item.entry.entry.outlet_name,
            tokens=run.decisions[item.key].tokens or 0,
            loop=run.decisions[item.key].loop,
        )
        for item, content in placed
    )
    placed_keys = {item.key for item, _ in placed}
    cooldown_now = set(state.cooldown)
    parts: list[BookDecisions] = []
    for book_index, book in enumerate(compiled):
        if book is None:
            parts.append(refused_decisions(run.refused[book_index]))
            continue
        # Entries (by slot) whose decision depends on this request; the rest share a cached one.
        explicit_keys = {i for b, i in run.decisions if b == book_index}
        explicit_keys.update(book.dynamic)
        for lore_id in cooldown_now:
            explicit_keys.update(book.lore_index.get(lore_id, ()))
        pending: dict[int, tuple[CompiledBook, CompiledEntry, _Verdict, bool]] = {}
        activated_positions: set[int] = set()
        for slot in explicit_keys:
            key = (book_index, slot)
            compiled_entry = book.by_slot[slot]
            assert compiled_entry is not None
            found = run.decisions.get(key)
            if found is None:
                item = _Item(book_index, compiled_entry, book)
                pre = _pre_checks(item, request, cooldown_now, False, clock)
                if pre is None:
                    pre = Reason.NO_KEYS if not compiled_entry.primary else Reason.NO_KEY_MATCH
                found = _Verdict(reason=pre)
            position = book.position[slot]
            placed_here = key in placed_keys
            pending[position] = (book, compiled_entry, found, placed_here)
            if placed_here:
                activated_positions.add(position)
        parts.append(
            BookDecisions(
                resource_id=book.resource_id,
                book=book.book,
                explicit=LazyDecisions(pending, _decision, activated_positions),
                implicit=partial(static_decision, book),
                entries_by_uid=partial(getattr, book, "uid_entries"),
            )
        )
    decisions = DecisionList(parts)
    return ActivationResult(
        activated=activated,
        positions=_buckets(placed),
        decisions=decisions,
        budget=budget,
        diagnostics=tuple(run.diagnostics),
        timed_state=TimedEffectsState(sticky=sticky, cooldown=cooldown),
        loops=loops,
        seed=request.seed,
        scan=summary,
    )


def _decision(
    book: CompiledBook, compiled_entry: CompiledEntry, verdict: _Verdict, placed: bool
) -> EntryDecision:
    entry = compiled_entry.entry
    return EntryDecision(
        lore_id=compiled_entry.lore_id,
        resource_id=book.resource_id,
        uid=entry.uid,
        comment=entry.comment,
        activated=placed,
        reason=verdict.reason,
        detail=verdict.detail,
        matched_primary=verdict.matched_primary,
        matched_secondary=verdict.matched_secondary,
        group=entry.group,
        group_winner=verdict.group_winner,
        roll=verdict.roll,
        probability=(
            entry.probability if entry.use_probability and entry.probability < 100 else None
        ),
        tokens=verdict.tokens,
        requested_position=entry.position,
        applied_position=entry.position if placed else None,
        loop=verdict.loop,
    )
