"""Compiled key matching: one Aho-Corasick automaton over every plain key of a book.

A book is compiled once per revision (:class:`~.cache.MatcherCache`; an edit derives the next
revision's compiled form from the previous one, :mod:`.incremental`). Plain keys go into two
automata built on demand: lower-cased keys for case-insensitive entries, raw keys for
case-sensitive ones. A scan reports, for each key, the earliest end offset of any occurrence and
of any *whole-word* occurrence (bounded by the text edge or a JavaScript ASCII ``\\W``
character, §1.6). Because the chat part of ST's haystack for scan depth ``d`` is a prefix of the
full newest-first buffer, one pass answers every depth: a key matches at depth ``d`` iff its
earliest end is within the prefix.

Keys with macros are substituted per request (they depend on ``{{char}}``/``{{user}}``), and
``/regex/`` keys are evaluated separately under a timeout (:mod:`.jsregex`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import ahocorasick_rs
import msgspec

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook.jsregex import JsRegex, JsRegexError, compile_js_regex

__all__ = [
    "SOURCE_FLAGS",
    "CompiledBook",
    "CompiledEntry",
    "KeyRef",
    "KeyTable",
    "SegmentHits",
    "assemble_book",
    "compile_book",
    "compile_entry",
    "entry_counts",
    "is_word_char",
    "parse_decorators",
]

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
    """An entry plus everything derived from it once per book revision.

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
    #: cached decision object for a static rejection (engine-owned)
    static_decision: object | None = None
    #: ``(uid, code, message)`` found while classifying this entry's keys
    diagnostics: tuple[tuple[int | str, str, str], ...] = ()
    #: names of the :data:`SOURCE_FLAGS` texts the entry also scans (its ``match_*`` flags)
    scan_sources: tuple[str, ...] = ()

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
    """One automaton (case-insensitive or case-sensitive) and its needle mapping.

    ``automaton`` covers needles ``[0, covered)``; a book derived by an edit shares it and puts
    the needles added since into ``overlay`` (a small automaton of its own), so an edit never
    rebuilds the big one (:mod:`.incremental`).
    """

    automaton: ahocorasick_rs.AhoCorasick | None
    #: pattern index → needle ids sharing that pattern
    needles_of: list[list[int]]
    covered: int = 0
    overlay: _Mode | None = None


def _mode_over(needles: Sequence[str], first: int, case_sensitive: bool) -> _Mode:
    """An automaton over ``needles[first:]`` (pattern index → needle ids)."""
    pattern_of: dict[str, int] = {}
    needles_of: list[list[int]] = []
    for needle_id in range(first, len(needles)):
        needle = needles[needle_id]
        pattern = needle if case_sensitive else needle.lower()
        index = pattern_of.get(pattern)
        if index is None:
            index = len(needles_of)
            pattern_of[pattern] = index
            needles_of.append([])
        needles_of[index].append(needle_id)
    if not pattern_of:
        return _Mode(automaton=None, needles_of=needles_of, covered=len(needles))
    automaton = ahocorasick_rs.AhoCorasick(
        list(pattern_of), matchkind=ahocorasick_rs.MATCHKIND_STANDARD
    )
    return _Mode(automaton=automaton, needles_of=needles_of, covered=len(needles))


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
    for pattern, end in sub.items():
        for needle_id in needles_of[pattern]:
            out.sub[needle_id] = end
    for pattern, end in whole.items():
        for needle_id in needles_of[pattern]:
            out.whole[needle_id] = end


@dataclass(slots=True)
class CompiledBook:
    """A book compiled for matching; immutable after :func:`compile_book` except lazy caches."""

    resource_id: str
    book: WorldBook
    entries: list[CompiledEntry]
    needles: list[str]
    needle_has_space: list[bool]
    #: needle id → slots of entries that use it as a *primary* key
    postings: list[list[int]]
    always: list[int]
    compile_diagnostics: list[tuple[int | str, str, str]]
    #: distinct ``case_sensitive`` values of the entries (``None`` = global setting)
    case_values: frozenset[bool | None] = frozenset()
    #: ``match*`` source names any entry opts into
    source_flags: frozenset[str] = frozenset()
    #: distinct ``delay_until_recursion`` levels > 0
    delay_levels: frozenset[int] = frozenset()
    #: key text → needle id (every key ever classified for this book's lineage)
    needle_ids: dict[str, int] = field(default_factory=dict)
    #: slot → entry (``None`` for a slot an edit freed) and slot → position (``-1`` if freed)
    by_slot: list[CompiledEntry | None] = field(default_factory=list)
    position: list[int] = field(default_factory=list)
    #: entries whose rejection depends on the request (no :attr:`CompiledEntry.static_rejection`)
    dynamic: list[int] = field(default_factory=list)
    #: how many entries have each ``case_sensitive`` value, ``match*`` flag and delay level
    #: (kept so an edit updates :attr:`case_values` & co. without visiting every entry)
    counts: dict[tuple[str, object], int] = field(default_factory=dict)
    _modes: dict[bool, _Mode] = field(default_factory=dict)
    _lore_index: dict[str, list[int]] | None = None
    _uid_entries: dict[str, WorldBookEntry] | None = None
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

    def _build_mode(self, case_sensitive: bool, shared: _Mode | None = None) -> _Mode:
        if shared is not None:
            # A derived book: share the big automaton, index only the needles added since.
            overlay = _mode_over(self.needles, shared.covered, case_sensitive)
            return _Mode(
                automaton=shared.automaton,
                needles_of=shared.needles_of,
                covered=shared.covered,
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
                # §1.6: a multi-word key is a plain substring test even with whole words on.
                out.whole[needle_id] = end
        return out

    @property
    def lore_index(self) -> dict[str, list[int]]:
        """Lore id → entry slots (several when uids repeat), built on first use."""
        found = self._lore_index
        if found is None:
            index: dict[str, list[int]] = {}
            for compiled_entry in self.entries:
                index.setdefault(compiled_entry.lore_id, []).append(compiled_entry.index)
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


def _split_groups(group: str) -> tuple[str, ...]:
    # §1.8: comma-separated membership, split on `,\s*`, empties dropped.
    return tuple(part.strip() for part in group.split(",") if part.strip())


#: ST source name → the entry flag that opts into matching it (§1.5).
SOURCE_FLAGS: Final = {
    "persona_description": "match_persona_description",
    "character_description": "match_character_description",
    "character_personality": "match_character_personality",
    "character_depth_prompt": "match_character_depth_prompt",
    "scenario": "match_scenario",
    "creator_notes": "match_creator_notes",
}


@dataclass(slots=True)
class KeyTable:
    """The needles of a book lineage: key text → id, plus per-needle facts. Append-only."""

    needles: list[str] = field(default_factory=list)
    needle_ids: dict[str, int] = field(default_factory=dict)
    needle_has_space: list[bool] = field(default_factory=list)

    def needle(self, key: str) -> int:
        """The id of ``key``, added on first sight."""
        found = self.needle_ids.get(key)
        if found is None:
            found = len(self.needles)
            self.needle_ids[key] = found
            self.needles.append(key)
            self.needle_has_space.append(len(key.split()) > 1)
        return found


def compile_entry(
    index: int, entry: WorldBookEntry, resource_id: str, table: KeyTable
) -> CompiledEntry:
    """Classify one entry's keys (plain keys get needle ids in ``table``)."""
    diagnostics: list[tuple[int | str, str, str]] = []

    def classify(raw: str) -> KeyRef:
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
                        entry.uid,
                        "WORLD_BOOK_REGEX_KEY_INVALID",
                        f"{key_label(key)}: {exc}; matched as text",
                    )
                )
                compiled = None
            if compiled is not None:
                return KeyRef(raw=raw, kind="regex", regex=compiled)
        return KeyRef(raw=raw, kind="plain", needle=table.needle(key))

    decorators, content = parse_decorators(entry.content)
    primary = tuple(classify(k) for k in entry.keys)
    secondary = tuple(classify(k) for k in entry.secondary_keys)
    always_evaluate = (
        entry.constant
        or bool(decorators)
        or any(k.kind in ("regex", "dynamic") for k in primary)
        or bool(entry.sticky)
    )
    return CompiledEntry(
        index=index,
        entry=entry,
        lore_id=f"{resource_id}:{entry.uid}",
        content=content,
        decorators=decorators,
        primary=primary,
        secondary=secondary,
        groups=_split_groups(entry.group),
        always_evaluate=always_evaluate,
        static_rejection=not (entry.triggers or _filters(entry) or entry.delay),
        diagnostics=tuple(diagnostics),
        scan_sources=tuple(name for name, attr in SOURCE_FLAGS.items() if getattr(entry, attr)),
    )


def _filters(entry: WorldBookEntry) -> bool:
    """Whether the entry's character filter can reject anything (ST writes an empty one,
    ``{isExclude: false, names: [], tags: []}``, into every entry)."""
    found = entry.character_filter
    return found is not None and bool(found.names or found.tags)


def entry_counts(entry: WorldBookEntry) -> list[tuple[str, object]]:
    """What one entry contributes to :attr:`CompiledBook.counts`."""
    out: list[tuple[str, object]] = [("case", entry.case_sensitive)]
    out.extend(("source", name) for name, attr in SOURCE_FLAGS.items() if getattr(entry, attr))
    if entry.delay_until_recursion > 0:
        out.append(("delay", entry.delay_until_recursion))
    return out


def assemble_book(
    resource_id: str,
    book: WorldBook,
    entries: list[CompiledEntry],
    table: KeyTable,
    postings: list[list[int]],
    counts: dict[tuple[str, object], int],
    by_slot: list[CompiledEntry | None] | None = None,
    position: list[int] | None = None,
    always: list[int] | None = None,
    dynamic: list[int] | None = None,
) -> CompiledBook:
    """A :class:`CompiledBook` from compiled entries and their key table (no automaton yet).

    Without ``by_slot``/``position`` the entries' slots are their positions; ``always`` and
    ``dynamic`` (slots in entry order) are computed from the entries unless given.
    """
    live = [key for key, count in counts.items() if count > 0]
    if always is None:
        always = [e.index for e in entries if e.always_evaluate]
    if dynamic is None:
        dynamic = [e.index for e in entries if not e.static_rejection]
    return CompiledBook(
        resource_id=resource_id,
        book=book,
        entries=entries,
        needles=table.needles,
        needle_has_space=table.needle_has_space,
        postings=postings,
        always=always,
        compile_diagnostics=[d for e in entries if e.diagnostics for d in e.diagnostics],
        case_values=frozenset(v for k, v in live if k == "case"),  # type: ignore[misc]
        source_flags=frozenset(str(v) for k, v in live if k == "source"),
        delay_levels=frozenset(v for k, v in live if k == "delay"),  # type: ignore[misc]
        needle_ids=table.needle_ids,
        dynamic=dynamic,
        counts=counts,
        by_slot=by_slot if by_slot is not None else list(entries),
        position=position if position is not None else list(range(len(entries))),
    )


def compile_book(resource_id: str, book: WorldBook) -> CompiledBook:
    """Classify every key of ``book`` and index the plain ones (automata are built lazily)."""
    table = KeyTable()
    entries: list[CompiledEntry] = []
    postings: list[list[int]] = []
    counts: dict[tuple[str, object], int] = {}
    for index, entry in enumerate(book.entries):
        compiled_entry = compile_entry(index, entry, resource_id, table)
        entries.append(compiled_entry)
        while len(postings) < len(table.needles):
            postings.append([])
        for ref in compiled_entry.primary:
            if ref.kind == "plain":
                posting = postings[ref.needle]
                if not posting or posting[-1] != index:  # an entry may repeat a key
                    posting.append(index)
        for key in entry_counts(entry):
            counts[key] = counts.get(key, 0) + 1
    while len(postings) < len(table.needles):
        postings.append([])
    return assemble_book(resource_id, book, entries, table, postings, counts)


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
