"""Key tests of one activation: the scan texts, each book's hits and key matching per entry.

The rules: docs/worldbook.md#wi-scan-buffer and docs/worldbook.md#wi-key-matching.

Plain keys are answered from the automata's hits (one pass over the newest-first buffer answers
every scan depth: a key matches at depth ``d`` iff its earliest end is inside the prefix);
macro-bearing keys are substituted per request and ``/regex/`` keys run under a timeout and a
per-activation budget.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from innkeeper_tavern.pure.worldbook.candidates import Item
from innkeeper_tavern.pure.worldbook.compiler import SOURCE_FLAGS
from innkeeper_tavern.pure.worldbook.matcher import (
    CompiledBook,
    KeyRef,
    SegmentHits,
    is_word_char,
    key_label,
)
from innkeeper_tavern.pure.worldbook.model import ActivationSettings, WorldBookRuntimeDiagnostic
from innkeeper_tavern.pure.worldbook.request import MAX_SCAN_DEPTH, ActivationRequest
from innkeeper_tavern.pure.worldbook.scan import SCAN_JOINER, SCAN_PREFIX, ScanInput

__all__ = [
    "BookHits",
    "KeyTests",
    "LoopState",
    "State",
    "Texts",
    "build_texts",
    "plain_in",
    "scan_book",
    "scan_recursion",
]


class State(Enum):
    """The kind of scan loop (docs/worldbook.md#wi-loops)."""

    INITIAL = 1
    RECURSION = 2
    MIN_ACTIVATIONS = 3


@dataclass(slots=True)
class LoopState:
    """Where the scan loops are; the key tests read it."""

    kind: State = State.INITIAL
    loop: int = 0
    #: extra scan depth of min-activations loops
    skew: int = 0
    #: the current delay-until-recursion level
    level: int = 0
    #: activated content fed back into the scan, one chunk per loop
    recursion_parts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Texts:
    """The scan material in both case modes with per-depth prefix ends."""

    messages: tuple[str, ...]
    chat: dict[bool, str]
    prefix_end: dict[bool, list[int]]
    sources: dict[str, dict[bool, str]]
    inject: dict[bool, list[str]]


def build_texts(scan: ScanInput, modes: set[bool]) -> Texts:
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
    for name in SOURCE_FLAGS:
        text = getattr(scan.sources, name)
        if text:
            sources[name] = {True: text, False: text.lower()}
    inject = {True: list(scan.inject), False: [t.lower() for t in scan.inject]}
    return Texts(
        messages=scan.messages, chat=chat, prefix_end=prefix_end, sources=sources, inject=inject
    )


@dataclass(slots=True)
class BookHits:
    """Scan results of one compiled book for this request."""

    chat: dict[bool, SegmentHits] = field(default_factory=dict)
    sources: dict[bool, dict[str, SegmentHits]] = field(default_factory=dict)
    inject: dict[bool, list[SegmentHits]] = field(default_factory=dict)
    recursion: dict[bool, SegmentHits] = field(default_factory=dict)
    found: set[int] = field(default_factory=set)


def scan_book(book: CompiledBook, texts: Texts, settings: ActivationSettings) -> BookHits:
    """Run the automata of ``book`` over the chat buffer, sources and inject texts."""
    hits = BookHits()
    global_cs = settings.case_sensitive
    modes = {value if value is not None else global_cs for value in book.case_values}
    flags = {name for name in book.source_flags if name in texts.sources}
    for mode in modes:
        hits.chat[mode] = book.scan(texts.chat[mode], mode)
        hits.sources[mode] = {name: book.scan(texts.sources[name][mode], mode) for name in flags}
        hits.inject[mode] = [book.scan(text, mode) for text in texts.inject[mode]]
        hits.recursion[mode] = SegmentHits()
        hits.found.update(hits.chat[mode].sub)
        for source_hits in hits.sources[mode].values():
            hits.found.update(source_hits.sub)
        for inject_hits in hits.inject[mode]:
            hits.found.update(inject_hits.sub)
    return hits


def _merge(into: SegmentHits, other: SegmentHits) -> None:
    for needle, end in other.sub.items():
        into.sub.setdefault(needle, end)
    for needle, end in other.whole.items():
        into.whole.setdefault(needle, end)


def scan_recursion(
    book_hits: Mapping[int, BookHits], compiled: Sequence[CompiledBook | None], chunk: str
) -> None:
    """Add the hits of one loop's recursed content to every book's recursion hits."""
    lowered = chunk.lower()
    for book_index, hits in book_hits.items():
        book = compiled[book_index]
        assert book is not None
        for mode in list(hits.recursion):
            found = book.scan(chunk if mode else lowered, mode)
            _merge(hits.recursion[mode], found)
            hits.found.update(found.sub)


def plain_in(haystack: str, key: str, case_sensitive: bool, whole_words: bool) -> bool:
    """Plain-key test on a built haystack, used for macro-bearing keys.

    docs/worldbook.md#wi-key-matching.
    """
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


_EMPTY_HITS: Final = SegmentHits()


class KeyTests:
    """The scan texts and key matching for the entries of one activation.

    Which of an entry's keys match now (docs/worldbook.md#wi-scan-buffer,
    docs/worldbook.md#wi-key-matching).
    """

    def __init__(
        self,
        request: ActivationRequest,
        scan: ScanInput,
        texts: Texts,
        book_hits: dict[int, BookHits],
        state: LoopState,
        diagnostics: list[WorldBookRuntimeDiagnostic],
        substitute: Callable[[str], str],
    ) -> None:
        self.request = request
        self.settings = request.settings
        self.scan = scan
        self.texts = texts
        self.book_hits = book_hits
        self.state = state
        self.diagnostics = diagnostics
        self.substitute = substitute
        self.regex_spent = 0.0
        self.regex_exhausted = False
        self._dynamic_cache: dict[str, str] = {}
        self._haystacks: dict[tuple[object, ...], str] = {}

    def new_loop(self) -> None:
        """Forget what depends on the previous loop (the recursion text of haystacks)."""
        self._haystacks.clear()

    def haystack(self, item: Item, depth: int) -> str:
        """ST's raw haystack for one entry, cached per (depth, sources) this loop.

        docs/worldbook.md#wi-scan-buffer.
        """
        texts = self.texts
        enabled = tuple(name for name in item.entry.scan_sources if name in texts.sources)
        key = (depth, enabled)
        found = self._haystacks.get(key)
        if found is None:
            parts: list[str] = []
            if depth > 0:
                parts.append(SCAN_PREFIX + SCAN_JOINER.join(texts.messages[:depth]))
            parts.extend(texts.sources[name][True] for name in enabled)
            parts.extend(self.scan.inject)
            recursion_parts = self.state.recursion_parts
            if self.state.kind != State.MIN_ACTIVATIONS and recursion_parts:
                parts.append("\n".join(recursion_parts))
            found = SCAN_JOINER.join(parts)
            self._haystacks[key] = found
        return found

    def depth(self, item: Item) -> int:
        """The entry's scan depth: its own, its book's or the global one (plus the skew)."""
        entry = item.entry.entry
        if entry.scan_depth is not None:
            depth = entry.scan_depth
        elif item.compiled.book.scan_depth is not None:
            depth = item.compiled.book.scan_depth
        else:
            depth = self.settings.scan_depth + self.state.skew
        return max(0, min(depth, MAX_SCAN_DEPTH, len(self.texts.messages)))

    def match_set(self, item: Item) -> Collection[int]:
        """The needles that match for ``item`` in this loop, for an entry whose keys are all
        plain (:attr:`~.matcher.CompiledEntry.plain`): the same for every entry of its book with
        the same :attr:`~.matcher.CompiledEntry.match_class`, so the engine keeps it per loop.

        Whole-word hits already hold the multi-word needles (substring hits,
        docs/worldbook.md#wi-key-matching), so one container answers :meth:`matched` for every
        plain key of such an entry.
        """
        settings, texts = self.settings, self.texts
        entry = item.entry.entry
        cs = entry.case_sensitive if entry.case_sensitive is not None else settings.case_sensitive
        ww = (
            entry.match_whole_words
            if entry.match_whole_words is not None
            else settings.match_whole_words
        )
        hits = self.book_hits[item.book]
        chat = hits.chat[cs]
        ends = chat.whole if ww else chat.sub
        limit = texts.prefix_end[cs][self.depth(item)]
        found: Collection[int] = (
            ends
            if limit >= len(texts.chat[cs])
            else {needle for needle, end in ends.items() if end <= limit}
        )
        extra: list[dict[int, int]] = []
        for name in item.entry.scan_sources:
            source = hits.sources[cs].get(name)
            if source is not None:
                extra.append(source.whole if ww else source.sub)
        for inject in hits.inject[cs]:
            extra.append(inject.whole if ww else inject.sub)
        if self.state.kind != State.MIN_ACTIVATIONS:
            recursion = hits.recursion[cs]
            extra.append(recursion.whole if ww else recursion.sub)
        extra = [more for more in extra if more]
        if not extra:
            return found
        union = set(found)
        for more in extra:
            union.update(more)
        return union

    def key_matches(self, item: Item, ref: KeyRef, cs: bool, ww: bool, depth: int) -> bool:
        """Whether one key of ``item`` matches (any kind)."""
        if ref.kind == "empty":
            return False
        if ref.kind == "regex":
            return self.regex_test(item, ref, self.haystack(item, depth), ref.raw.strip())
        if ref.kind == "dynamic":
            key = self._dynamic_cache.get(ref.raw)
            if key is None:
                key = self.substitute(ref.raw).strip()
                self._dynamic_cache[ref.raw] = key
            if not key:
                return False
            if item.compiled.dynamic_regex(key) is not None:
                return self.regex_test(item, None, self.haystack(item, depth), key)
            return plain_in(self.haystack(item, depth), key, cs, ww)
        needle = ref.needle
        whole = ww and not item.compiled.needle_has_space[needle]
        chat = self.book_hits[item.book].chat[cs]
        end = (chat.whole if whole else chat.sub).get(needle)
        if end is not None and end <= self.texts.prefix_end[cs][depth]:
            return True
        return self.plain_elsewhere(item, needle, cs, whole)

    def plain_elsewhere(self, item: Item, needle: int, cs: bool, whole: bool) -> bool:
        """A plain key outside the scanned chat: the entry's sources, injects, recursion."""
        hits = self.book_hits[item.book]
        for name in item.entry.scan_sources:
            source = hits.sources[cs].get(name, _EMPTY_HITS)
            if needle in (source.whole if whole else source.sub):
                return True
        for inject in hits.inject[cs]:
            if needle in (inject.whole if whole else inject.sub):
                return True
        if self.state.kind != State.MIN_ACTIVATIONS:
            recursion = hits.recursion[cs]
            if needle in (recursion.whole if whole else recursion.sub):
                return True
        return False

    def matched(
        self, item: Item, refs: tuple[KeyRef, ...], cs: bool, ww: bool, depth: int
    ) -> tuple[str, ...]:
        """The raw keys of ``refs`` that match (:meth:`key_matches`; plain keys seen in the
        scanned chat, the common case, are checked here without a call per key)."""
        chat = self.book_hits[item.book].chat[cs]
        sub, whole_ends = chat.sub, chat.whole
        has_space = item.compiled.needle_has_space
        limit = self.texts.prefix_end[cs][depth]
        out: list[str] = []
        for ref in refs:
            if ref.kind == "plain":
                needle = ref.needle
                whole = ww and not has_space[needle]
                end = (whole_ends if whole else sub).get(needle)
                if (end is not None and end <= limit) or self.plain_elsewhere(
                    item, needle, cs, whole
                ):
                    out.append(ref.raw)
            elif self.key_matches(item, ref, cs, ww, depth):
                out.append(ref.raw)
        return tuple(out)

    def regex_test(self, item: Item, pattern: KeyRef | None, haystack: str, key: str) -> bool:
        """One regex key under its timeout and the activation's regex budget."""
        compiled_regex = pattern.regex if pattern is not None else item.compiled.dynamic_regex(key)
        if compiled_regex is None:
            return False
        if key in item.compiled.poisoned:
            return False
        if self.regex_exhausted:
            return False
        request = self.request
        remaining = request.regex_budget - self.regex_spent
        timeout = max(0.0, min(request.regex_timeout, remaining))
        started = request.clock()
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
            self.regex_spent += request.clock() - started
            if self.regex_spent >= request.regex_budget and not self.regex_exhausted:
                self.regex_exhausted = True
                self.diagnostics.append(
                    WorldBookRuntimeDiagnostic(
                        code="WORLD_BOOK_REGEX_BUDGET_SPENT",
                        message="regex-key time budget of this activation is spent",
                    )
                )
