"""Compiled key matching: one Aho-Corasick automaton over every plain key of a book.

A book is compiled once per revision (:class:`MatcherCache`). Plain keys go into two automata
built on demand: lower-cased keys for case-insensitive entries, raw keys for case-sensitive ones.
A scan reports, for each key, the earliest end offset of any occurrence and of any *whole-word*
occurrence (bounded by the text edge or a JavaScript ASCII ``\\W`` character, §1.6). Because the
chat part of ST's haystack for scan depth ``d`` is a prefix of the full newest-first buffer, one
pass answers every depth: a key matches at depth ``d`` iff its earliest end is within the prefix.

Keys with macros are substituted per request (they depend on ``{{char}}``/``{{user}}``), and
``/regex/`` keys are evaluated separately under a timeout (:mod:`.jsregex`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import ahocorasick_rs
import msgspec

from innkeeper_tavern.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.worldbook.jsregex import JsRegex, JsRegexError, compile_js_regex

__all__ = [
    "MATCHER_CACHE_SIZE",
    "CompiledBook",
    "CompiledEntry",
    "KeyRef",
    "MatcherCache",
    "SegmentHits",
    "compile_book",
    "is_word_char",
    "parse_decorators",
]

#: Compiled books kept per cache (least recently used are dropped).
MATCHER_CACHE_SIZE: Final = 64
#: Dynamic (macro-bearing) regex keys compiled per book and kept.
DYNAMIC_REGEX_CACHE_SIZE: Final = 256

_WORD_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_MACRO_HINT: Final = re.compile(r"\{\{|<(?:user|bot|char|charifnotgroup|group)>", re.IGNORECASE)
_KNOWN_DECORATORS: Final = frozenset({"@@activate", "@@dont_activate"})


#: Characters of a key quoted in a diagnostic (diagnostics may be logged; keep them short).
DIAGNOSTIC_KEY_CHARS: Final = 60


def key_label(key: str) -> str:
    """A short quotation of ``key`` for diagnostics."""
    if len(key) <= DIAGNOSTIC_KEY_CHARS:
        return repr(key)
    return repr(key[:DIAGNOSTIC_KEY_CHARS] + "…")


def is_word_char(char: str) -> bool:
    """JavaScript ``\\w`` (ASCII letters, digits, underscore)."""
    return char in _WORD_CHARS


def parse_decorators(content: str) -> tuple[frozenset[str], str]:
    """Split ``@@decorator`` lines off the top of ``content`` (§1.4); return (known set, rest).

    A ``@@@x`` line is a fallback for the preceding unknown decorator; the first line that does
    not start with ``@@`` ends the block.
    """
    if not content.startswith("@@"):
        return frozenset(), content
    lines = content.split("\n")
    found: set[str] = set()
    pending_unknown = False
    index = 0
    for index, line in enumerate(lines):  # noqa: B007 - index is used after the loop
        stripped = line.strip()
        if not stripped.startswith("@@"):
            break
        if stripped.startswith("@@@"):
            if pending_unknown and stripped[1:] in _KNOWN_DECORATORS:
                found.add(stripped[1:])
                pending_unknown = False
            continue
        if stripped in _KNOWN_DECORATORS:
            found.add(stripped)
            pending_unknown = False
        else:
            pending_unknown = True
    else:
        index = len(lines)
    return frozenset(found), "\n".join(lines[index:])


class KeyRef(NamedTuple):
    """One key of an entry, classified at compile time.

    ``kind``: ``"plain"`` (``needle`` indexes :attr:`CompiledBook.needles`), ``"regex"``,
    ``"dynamic"`` (contains macros; substituted per request) or ``"empty"`` (never matches).
    """

    raw: str
    kind: str
    needle: int = -1
    regex: JsRegex | None = None


@dataclass(slots=True)
class CompiledEntry:
    """An entry plus everything derived from it once per book revision."""

    index: int
    entry: WorldBookEntry
    lore_id: str
    content: str
    decorators: frozenset[str]
    primary: tuple[KeyRef, ...]
    secondary: tuple[KeyRef, ...]
    groups: tuple[str, ...]
    always_evaluate: bool
    #: True when the entry's rejection without a key hit never depends on the request
    #: (no triggers, character filter or delay): its decision object can be reused.
    static_rejection: bool = False
    _fingerprint: str | None = None
    #: cached decision object for a static rejection (engine-owned)
    static_decision: object | None = None

    @property
    def fingerprint(self) -> str:
        """Hash of the normalized entry; editing the entry drops its timed effects (§1.10)."""
        if self._fingerprint is None:
            digest = hashlib.blake2b(msgspec.json.encode(self.entry), digest_size=8)
            self._fingerprint = digest.hexdigest()
        return self._fingerprint


@dataclass(slots=True)
class SegmentHits:
    """Earliest end offsets per needle in one text: any occurrence and whole-word occurrences."""

    sub: dict[int, int] = field(default_factory=dict)
    whole: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Mode:
    """One automaton (case-insensitive or case-sensitive) and its needle mapping."""

    automaton: ahocorasick_rs.AhoCorasick | None
    #: pattern index → needle ids sharing that pattern
    needles_of: list[list[int]]


@dataclass(slots=True)
class CompiledBook:
    """A book compiled for matching; immutable after :func:`compile_book` except lazy caches."""

    resource_id: str
    book: WorldBook
    entries: list[CompiledEntry]
    needles: list[str]
    needle_has_space: list[bool]
    #: needle id → indices of entries that use it as a *primary* key
    postings: list[list[int]]
    always: list[int]
    compile_diagnostics: list[tuple[int | str, str, str]]
    #: distinct ``case_sensitive`` values of the entries (``None`` = global setting)
    case_values: frozenset[bool | None] = frozenset()
    #: ``match*`` source names any entry opts into
    source_flags: frozenset[str] = frozenset()
    #: distinct ``delay_until_recursion`` levels > 0
    delay_levels: frozenset[int] = frozenset()
    _modes: dict[bool, _Mode] = field(default_factory=dict)
    _dynamic_regex: OrderedDict[str, JsRegex | None] = field(default_factory=OrderedDict)
    #: regex keys that timed out once: skipped for the rest of this revision
    poisoned: set[str] = field(default_factory=set)
    #: guards the lazy caches when activations run in several worker threads
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def mode(self, case_sensitive: bool) -> _Mode:
        """The automaton for one case mode, built on first use."""
        found = self._modes.get(case_sensitive)
        if found is None:
            with self._lock:
                found = self._modes.get(case_sensitive)
                if found is None:
                    found = self._build_mode(case_sensitive)
                    self._modes[case_sensitive] = found
        return found

    def _build_mode(self, case_sensitive: bool) -> _Mode:
        pattern_of: dict[str, int] = {}
        needles_of: list[list[int]] = []
        for needle_id, needle in enumerate(self.needles):
            pattern = needle if case_sensitive else needle.lower()
            index = pattern_of.get(pattern)
            if index is None:
                index = len(needles_of)
                pattern_of[pattern] = index
                needles_of.append([])
            needles_of[index].append(needle_id)
        if not pattern_of:
            return _Mode(automaton=None, needles_of=needles_of)
        automaton = ahocorasick_rs.AhoCorasick(
            list(pattern_of), matchkind=ahocorasick_rs.MATCHKIND_STANDARD
        )
        return _Mode(automaton=automaton, needles_of=needles_of)

    def scan(self, text: str, case_sensitive: bool) -> SegmentHits:
        """Earliest (whole-word) end offset of every needle found in ``text``.

        ``text`` must already be lower-cased for the case-insensitive mode.
        """
        hits = SegmentHits()
        mode = self.mode(case_sensitive)
        if mode.automaton is None or not text:
            return hits
        sub = hits.sub
        whole = hits.whole
        size = len(text)
        words = _WORD_CHARS
        for pattern, start, end in mode.automaton.find_matches_as_indexes(text, overlapping=True):
            if pattern in whole:
                continue
            if pattern not in sub:
                sub[pattern] = end
            if (start == 0 or text[start - 1] not in words) and (
                end == size or text[end] not in words
            ):
                whole[pattern] = end
        # Translate pattern indices to needle ids.
        out = SegmentHits()
        for pattern, end in sub.items():
            for needle_id in mode.needles_of[pattern]:
                out.sub[needle_id] = end
        for pattern, end in whole.items():
            for needle_id in mode.needles_of[pattern]:
                out.whole[needle_id] = end
        for needle_id, end in out.sub.items():
            if self.needle_has_space[needle_id]:
                # §1.6: a multi-word key is a plain substring test even with whole words on.
                out.whole[needle_id] = end
        return out

    def dynamic_regex(self, key: str) -> JsRegex | None:
        """Compile (and cache) a regex key produced by macro substitution; ``None`` if plain."""
        with self._lock:
            if key in self._dynamic_regex:
                self._dynamic_regex.move_to_end(key)
                return self._dynamic_regex[key]
        try:
            compiled = compile_js_regex(key)
        except JsRegexError:
            compiled = None
        with self._lock:
            self._dynamic_regex[key] = compiled
            if len(self._dynamic_regex) > DYNAMIC_REGEX_CACHE_SIZE:
                self._dynamic_regex.popitem(last=False)
        return compiled


def _split_groups(group: str) -> tuple[str, ...]:
    # §1.8: comma-separated membership, split on `,\s*`, empties dropped.
    return tuple(part.strip() for part in group.split(",") if part.strip())


def compile_book(resource_id: str, book: WorldBook) -> CompiledBook:
    """Classify every key of ``book`` and index the plain ones (automata are built lazily)."""
    needles: list[str] = []
    needle_ids: dict[str, int] = {}
    postings: list[list[int]] = []
    diagnostics: list[tuple[int | str, str, str]] = []
    entries: list[CompiledEntry] = []
    always: list[int] = []

    def classify(raw: str, entry_index: int, primary: bool, uid: int | str) -> KeyRef:
        key = raw.strip()
        if not key:
            return KeyRef(raw=raw, kind="empty")
        if ("{{" in key or "<" in key) and _MACRO_HINT.search(key):
            return KeyRef(raw=raw, kind="dynamic")
        if key[0] == "/":
            try:
                compiled = compile_js_regex(key)
            except JsRegexError as exc:
                diagnostics.append(
                    (
                        uid,
                        "WORLD_BOOK_REGEX_KEY_INVALID",
                        f"{key_label(key)}: {exc}; matched as text",
                    )
                )
                compiled = None
            if compiled is not None:
                return KeyRef(raw=raw, kind="regex", regex=compiled)
        needle = needle_ids.get(key)
        if needle is None:
            needle = len(needles)
            needle_ids[key] = needle
            needles.append(key)
            postings.append([])
        if primary:
            postings[needle].append(entry_index)
        return KeyRef(raw=raw, kind="plain", needle=needle)

    for index, entry in enumerate(book.entries):
        decorators, content = parse_decorators(entry.content)
        primary = tuple(classify(k, index, True, entry.uid) for k in entry.keys)
        secondary = tuple(classify(k, index, False, entry.uid) for k in entry.secondary_keys)
        always_evaluate = (
            entry.constant
            or bool(decorators)
            or any(k.kind in ("regex", "dynamic") for k in primary)
            or bool(entry.sticky)
        )
        compiled_entry = CompiledEntry(
            index=index,
            entry=entry,
            lore_id=f"{resource_id}:{entry.uid}",
            content=content,
            decorators=decorators,
            primary=primary,
            secondary=secondary,
            groups=_split_groups(entry.group),
            always_evaluate=always_evaluate,
            static_rejection=not (entry.triggers or entry.character_filter or entry.delay),
        )
        entries.append(compiled_entry)
        if always_evaluate:
            always.append(index)
    source_names = {
        "persona_description": "match_persona_description",
        "character_description": "match_character_description",
        "character_personality": "match_character_personality",
        "character_depth_prompt": "match_character_depth_prompt",
        "scenario": "match_scenario",
        "creator_notes": "match_creator_notes",
    }
    # Dedupe postings (an entry may repeat a key).
    postings = [sorted(set(p)) if len(p) > 1 else p for p in postings]
    return CompiledBook(
        resource_id=resource_id,
        book=book,
        entries=entries,
        needles=needles,
        needle_has_space=[len(n.split()) > 1 for n in needles],
        postings=postings,
        always=always,
        compile_diagnostics=diagnostics,
        case_values=frozenset(e.case_sensitive for e in book.entries),
        source_flags=frozenset(
            name
            for name, attr in source_names.items()
            if any(getattr(e, attr) for e in book.entries)
        ),
        delay_levels=frozenset(
            e.delay_until_recursion for e in book.entries if e.delay_until_recursion > 0
        ),
    )


class MatcherCache:
    """LRU of compiled books keyed by ``(resource_id, revision)``.

    When a caller has no revision, the key is the book object's identity, which is only safe while
    the caller keeps the same immutable :class:`WorldBook` alive (the cache holds a reference).
    Look-ups are locked, so activations may run in worker threads (regex keys can use up to
    ``REGEX_REQUEST_BUDGET_SECONDS`` of CPU: keep them off the event loop).
    """

    def __init__(self, size: int = MATCHER_CACHE_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, object], CompiledBook] = OrderedDict()
        #: request-level derived data (e.g. the merged sort order of several books)
        self.plans: OrderedDict[tuple[object, ...], object] = OrderedDict()

    def plan(self, key: tuple[object, ...], build: Callable[[], object]) -> object:
        """A derived value for ``key`` (which must hold its compiled books), built on a miss."""
        with self._lock:
            return self._plan(key, build)

    def _plan(self, key: tuple[object, ...], build: Callable[[], object]) -> object:
        found = self.plans.get(key)
        if found is None:
            found = build()
            self.plans[key] = found
            while len(self.plans) > self._size:
                self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(key)
        return found

    def get(
        self,
        resource_id: str,
        book: WorldBook,
        revision: str | int | None,
        build: Callable[[str, WorldBook], CompiledBook] = compile_book,
    ) -> CompiledBook:
        """The compiled book for this revision, compiling it on a miss."""
        with self._lock:
            return self._get(resource_id, book, revision, build)

    def _get(
        self,
        resource_id: str,
        book: WorldBook,
        revision: str | int | None,
        build: Callable[[str, WorldBook], CompiledBook],
    ) -> CompiledBook:
        key: tuple[str, object] = (resource_id, revision if revision is not None else id(book))
        found = self._items.get(key)
        if found is not None and (revision is not None or found.book is book):
            self._items.move_to_end(key)
            return found
        compiled = build(resource_id, book)
        self._items[key] = compiled
        while len(self._items) > self._size:
            self._items.popitem(last=False)
        return compiled

    def __len__(self) -> int:
        return len(self._items)


def needles_found(hits: Iterable[SegmentHits]) -> set[int]:
    """Every needle id with at least one occurrence in any of ``hits``."""
    out: set[int] = set()
    for hit in hits:
        out.update(hit.sub)
    return out


def entries_for(book: CompiledBook, needle_ids: Sequence[int] | set[int]) -> set[int]:
    """Indices of entries with at least one of ``needle_ids`` as a primary key."""
    out: set[int] = set()
    postings = book.postings
    for needle_id in needle_ids:
        out.update(postings[needle_id])
    return out


__all__ += ["entries_for", "needles_found"]
