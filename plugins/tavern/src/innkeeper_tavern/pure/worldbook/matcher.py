"""Compiled key matching: one Aho-Corasick automaton over every plain key of a book.

A book is compiled once per revision (:mod:`.compiler`, kept by :class:`~.cache.MatcherCache`;
an edit derives the next revision's compiled form from the previous one, :mod:`.incremental`).
Plain keys go into two
automata built on demand: lower-cased keys for case-insensitive entries, raw keys for
case-sensitive ones. A scan reports, for each key, the earliest end offset of any occurrence and
of any *whole-word* occurrence (bounded by the text edge or a JavaScript ASCII ``\\W``
character, docs/worldbook.md#wi-key-matching). Because the chat part of ST's haystack for scan
depth ``d`` is a prefix of the full newest-first buffer, one pass answers every depth: a key
matches at depth ``d`` iff its earliest end is within the prefix.

Keys with macros are substituted per request (they depend on ``{{char}}``/``{{user}}``), and
``/regex/`` keys are evaluated separately under a timeout (:mod:`.jsregex`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple

import ahocorasick_rs
import msgspec

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook.jsregex import JsRegex, JsRegexError, compile_js_regex

if TYPE_CHECKING:
    from .compiler import BookIndex, KeyTable

__all__ = [
    "CompiledBook",
    "CompiledEntry",
    "KeyRef",
    "SegmentHits",
    "is_word_char",
    "key_label",
    "parse_decorators",
    "uid_entries",
]

#: Dynamic (macro-bearing) regex keys compiled per book and kept.
DYNAMIC_REGEX_CACHE_SIZE: Final = 256

_WORD_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
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
    """Split ``@@decorator`` lines off the top of ``content``; return (known set, rest).

    Decorators: docs/worldbook.md#wi-book-order.

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
    """An entry plus everything derived from it once per book revision (built on first use).

    ``index`` is the entry's *slot*: a stable id within the book's lineage (what postings,
    :attr:`CompiledBook.always` and the engine's keys refer to). A fresh compile numbers slots
    by position; after an incremental edit they differ, and :attr:`CompiledBook.position` maps a
    slot to the entry's place in the book.
    """

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
    #: names of the SOURCE_FLAGS texts the entry also scans (its ``match_*`` flags)
    scan_sources: tuple[str, ...] = ()
    #: True when the entry's verdict follows from its plain keys' hits alone (no pre-check can
    #: reject it, no decorator, not constant, only plain or empty keys): the engine's fast path
    plain: bool = False
    #: what, besides the book and the loop, decides which of its plain keys match, numbered per
    #: book lineage: one id per distinct ``(case_sensitive, match_whole_words, scan_depth,
    #: scan_sources)``
    match_class: int = 0
    #: True when no probability roll applies (probability off or 100)
    certain: bool = True
    #: True when, once the budget has overflowed, the entry can only be rejected and its
    #: verdict can wait until it is read: plain, certain, no macro in its content, no
    #: ``ignoreBudget``
    deferrable: bool = False
    #: True when the content holds no macro (``{{``, ``<``, ``\\{``): substituting it is identity
    plain_content: bool = False
    #: the needle ids of the plain primary keys (whether any matched, without naming them)
    primary_needles: tuple[int, ...] = ()

    @property
    def fingerprint(self) -> str:
        """Hash of the normalized entry; editing the entry drops its timed effects.

        docs/worldbook.md#wi-timed-effects.
        """
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
    """One automaton (case-insensitive or case-sensitive) and its needle mapping.

    ``automaton`` covers needles ``[first, covered)``; a book derived by an edit shares it and
    puts the needles added since into ``overlay`` (a small automaton of its own), so an edit
    never rebuilds the big one (:mod:`.incremental`).
    """

    automaton: ahocorasick_rs.AhoCorasick | None
    #: pattern index → needle ids sharing that pattern; ``None`` when every needle is its own
    #: pattern (pattern ``i`` is needle ``first + i``, the usual case)
    needles_of: list[list[int]] | None
    covered: int = 0
    first: int = 0
    overlay: _Mode | None = None


def _mode_over(needles: Sequence[str], first: int, case_sensitive: bool) -> _Mode:
    """An automaton over ``needles[first:]``."""
    chunk = needles[first:]
    patterns = chunk if case_sensitive else [needle.lower() for needle in chunk]
    if not patterns:
        return _Mode(automaton=None, needles_of=None, covered=len(needles), first=first)
    distinct = list(dict.fromkeys(patterns))
    needles_of: list[list[int]] | None = None
    if len(distinct) < len(patterns):
        # Needles that differ only in case share one pattern of the case-insensitive automaton.
        pattern_of = {pattern: index for index, pattern in enumerate(distinct)}
        needles_of = [[] for _ in distinct]
        for offset, pattern in enumerate(patterns):
            needles_of[pattern_of[pattern]].append(first + offset)
    automaton = ahocorasick_rs.AhoCorasick(distinct, matchkind=ahocorasick_rs.MATCHKIND_STANDARD)
    return _Mode(automaton=automaton, needles_of=needles_of, covered=len(needles), first=first)


def _scan_mode(mode: _Mode, text: str, out: SegmentHits) -> None:
    """Add the earliest (whole-word) end of every needle of ``mode`` found in ``text``."""
    if mode.automaton is None:
        return
    sub: dict[int, int] = {}
    whole: dict[int, int] = {}
    size = len(text)
    words = _WORD_CHARS
    for pattern, start, end in mode.automaton.find_matches_as_indexes(text, overlapping=True):
        if pattern in whole:
            continue
        if pattern not in sub:
            sub[pattern] = end
        if (start == 0 or text[start - 1] not in words) and (end == size or text[end] not in words):
            whole[pattern] = end
    # Translate pattern indices to needle ids.
    needles_of = mode.needles_of
    if needles_of is None:
        first = mode.first
        for pattern, end in sub.items():
            out.sub[first + pattern] = end
        for pattern, end in whole.items():
            out.whole[first + pattern] = end
        return
    for pattern, end in sub.items():
        for needle_id in needles_of[pattern]:
            out.sub[needle_id] = end
    for pattern, end in whole.items():
        for needle_id in needles_of[pattern]:
            out.whole[needle_id] = end


@dataclass(slots=True)
class CompiledBook:
    """A book compiled for matching (:func:`~.compiler.compile_book`); immutable except for the
    caches it fills on first use: the automata, each entry's :class:`CompiledEntry`, the lore
    index, compiled dynamic regex keys and what the engine keeps per revision."""

    resource_id: str
    book: WorldBook
    #: the lineage's key table (:class:`~.compiler.KeyTable`): needles and classified keys
    table: KeyTable
    needles: list[str]
    needle_has_space: list[bool]
    #: key text → needle id (every key ever classified for this book's lineage)
    needle_ids: dict[str, int]
    #: needle id → slots of entries that use it as a *primary* key
    postings: list[list[int]]
    #: slots of entries evaluated on every loop (constant, sticky, decorators, regex or macro
    #: primary keys) and of entries whose rejection depends on the request (triggers,
    #: character filter, delay), both in entry order
    always: list[int]
    dynamic: list[int]
    compile_diagnostics: list[tuple[int | str, str, str]]
    #: slot → the entry (``None`` for a slot an edit freed), position → slot, and slot →
    #: position (``-1`` if freed)
    raw: list[WorldBookEntry | None]
    slot_at: list[int]
    position: list[int]
    #: slot → compiled entry, built by :meth:`entry_at` on first use
    by_slot: list[CompiledEntry | None]
    #: slot → ``(uid, code, message)`` diagnostics of its keys
    diagnostics_of: dict[int, tuple[tuple[int | str, str, str], ...]]
    #: how many entries have each ``case_sensitive`` value, ``match*`` flag and delay level
    #: (kept so an edit updates :attr:`case_values` & co. without visiting every entry)
    counts: dict[tuple[str, object], int]
    #: distinct ``case_sensitive`` values of the entries (``None`` = global setting)
    case_values: frozenset[bool | None] = frozenset()
    #: ``match*`` source names any entry opts into
    source_flags: frozenset[str] = frozenset()
    #: distinct ``delay_until_recursion`` levels > 0
    delay_levels: frozenset[int] = frozenset()
    _modes: dict[bool, _Mode] = field(default_factory=dict)
    _lore_index: dict[str, list[int]] | None = None
    _uid_entries: dict[str, WorldBookEntry] | None = None
    _dynamic_regex: OrderedDict[str, JsRegex | None] = field(default_factory=OrderedDict)
    #: regex keys that timed out once: skipped for the rest of this revision
    poisoned: set[str] = field(default_factory=set)
    #: slot → the shared decision of a request-independent rejection (engine-owned)
    static_decisions: dict[int, object] = field(default_factory=dict)
    #: what the engine derives once per revision (its own keys)
    engine_cache: dict[object, object] = field(default_factory=dict)
    #: guards the lazy caches when activations run in several worker threads
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def assemble(
        cls,
        resource_id: str,
        book: WorldBook,
        *,
        table: KeyTable,
        postings: list[list[int]],
        index: BookIndex,
        raw: list[WorldBookEntry | None],
        slot_at: list[int],
        position: list[int],
        by_slot: list[CompiledEntry | None],
        diagnostics_of: dict[int, tuple[tuple[int | str, str, str], ...]] | None = None,
    ) -> CompiledBook:
        """A compiled book from its key index; ``index`` holds the always-evaluated and dynamic
        slots, counts and (unless ``diagnostics_of`` is given) diagnostics."""
        counts = index.counts
        live = [key for key, count in counts.items() if count > 0]
        diagnostics = index.diagnostics if diagnostics_of is None else diagnostics_of
        ordered = (
            [d for slot in slot_at if slot in diagnostics for d in diagnostics[slot]]
            if diagnostics
            else []
        )
        return cls(
            resource_id=resource_id,
            book=book,
            table=table,
            needles=table.needles,
            needle_has_space=table.needle_has_space,
            needle_ids=table.needle_ids,
            postings=postings,
            always=index.always,
            dynamic=index.dynamic,
            compile_diagnostics=ordered,
            raw=raw,
            slot_at=slot_at,
            position=position,
            by_slot=by_slot,
            diagnostics_of=diagnostics,
            counts=counts,
            case_values=frozenset(v for k, v in live if k == "case"),  # type: ignore[misc]
            source_flags=frozenset(str(v) for k, v in live if k == "source"),
            delay_levels=frozenset(v for k, v in live if k == "delay"),  # type: ignore[misc]
        )

    def entry_at(self, slot: int) -> CompiledEntry:
        """The compiled entry in ``slot`` (built on first use; the slot must be live)."""
        found = self.by_slot[slot]
        if found is None:
            from .compiler import compile_entry  # here: the compiler imports this module

            entry = self.raw[slot]
            assert entry is not None, "a freed slot has no entry"
            found = compile_entry(slot, entry, self.resource_id, self.table)
            self.by_slot[slot] = found
        return found

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

    def _build_mode(self, case_sensitive: bool, shared: _Mode | None = None) -> _Mode:
        if shared is not None:
            # A derived book: share the big automaton, index only the needles added since.
            overlay = _mode_over(self.needles, shared.covered, case_sensitive)
            return _Mode(
                automaton=shared.automaton,
                needles_of=shared.needles_of,
                covered=shared.covered,
                first=shared.first,
                overlay=overlay,
            )
        return _mode_over(self.needles, 0, case_sensitive)

    def share_modes(self, previous: CompiledBook, max_overlay: int) -> None:
        """Reuse ``previous``'s automata (plus an overlay of at most ``max_overlay`` needles)."""
        for case_sensitive, mode in previous._modes.items():
            if len(self.needles) - mode.covered <= max_overlay:
                self._modes[case_sensitive] = self._build_mode(case_sensitive, mode)

    def scan(self, text: str, case_sensitive: bool) -> SegmentHits:
        """Earliest (whole-word) end offset of every needle found in ``text``.

        ``text`` must already be lower-cased for the case-insensitive mode.
        """
        out = SegmentHits()
        if not text:
            return out
        mode: _Mode | None = self.mode(case_sensitive)
        while mode is not None:
            _scan_mode(mode, text, out)
            mode = mode.overlay
        for needle_id, end in out.sub.items():
            if self.needle_has_space[needle_id]:
                # docs/worldbook.md#wi-key-matching: a multi-word key is a plain substring test
                # even with whole words on.
                out.whole[needle_id] = end
        return out

    @property
    def lore_index(self) -> dict[str, list[int]]:
        """Lore id → entry slots in entry order (several when uids repeat), built on first use."""
        found = self._lore_index
        if found is None:
            index: dict[str, list[int]] = {}
            prefix = f"{self.resource_id}:"
            raw = self.raw
            for slot in self.slot_at:
                entry = raw[slot]
                assert entry is not None
                index.setdefault(f"{prefix}{entry.uid}", []).append(slot)
            self._lore_index = found = index
        return found

    @property
    def uid_entries(self) -> dict[str, WorldBookEntry]:
        """``str(uid)`` → entry (the last one when uids repeat), built on first use."""
        found = self._uid_entries
        if found is None:
            self._uid_entries = found = uid_entries(self.book)
        return found

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


def uid_entries(book: WorldBook) -> dict[str, WorldBookEntry]:
    """``str(uid)`` → entry of ``book`` (the last one when uids repeat)."""
    return {str(e.uid): e for e in book.entries}
