"""Compiling a book for matching: the key index now, each entry's details when first looked at.

:func:`compile_book` makes one pass over the entries and keeps only what a scan and the
candidate selection need: every key classified once per distinct key text (plain, ``/regex/``,
macro-bearing or empty; invalid regex keys diagnosed), plain keys numbered as needles with
posting lists of the entries using them as primary keys, the always-evaluated and
request-dependent entries, and counts of case modes, source flags and delay levels. The
automata are built on the first scan (:meth:`~.matcher.CompiledBook.mode`), and an entry's
:class:`~.matcher.CompiledEntry` (decorators, groups, key references) on the first
:meth:`~.matcher.CompiledBook.entry_at`: a turn looks at the entries whose keys occur, not at the
whole book. An edit reuses all of it (:mod:`.incremental`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from innkeeper_tavern.pure.formats.worldbook import CharacterFilter, WorldBook, WorldBookEntry

from .jsregex import JsRegex, JsRegexError, compile_js_regex
from .matcher import (
    CompiledBook,
    CompiledEntry,
    KeyRef,
    key_label,
    parse_decorators,
)

__all__ = [
    "SOURCE_FLAGS",
    "BookIndex",
    "KeyTable",
    "compile_book",
    "compile_entry",
    "entry_counts",
    "index_entries",
]

_MACRO_HINT: Final = re.compile(r"\{\{|<(?:user|bot|char|charifnotgroup|group)>", re.IGNORECASE)

#: ST source name → the entry flag that opts into matching it (docs/worldbook.md#wi-scan-buffer).
SOURCE_FLAGS: Final = {
    "persona_description": "match_persona_description",
    "character_description": "match_character_description",
    "character_personality": "match_character_personality",
    "character_depth_prompt": "match_character_depth_prompt",
    "scenario": "match_scenario",
    "creator_notes": "match_creator_notes",
}
_FLAG_ITEMS: Final = tuple(SOURCE_FLAGS.items())
#: Key kinds whose match follows from the automata alone (an empty key never matches).
_PLAIN_KINDS: Final = ("plain", "empty")
#: The character filter SillyTavern writes into every entry (it rejects nothing).
_NO_FILTER: Final = CharacterFilter()


#: :attr:`KeyTable.codes` of a key that never matches (empty) and of a regex or macro key.
EMPTY: Final = -1
SPECIAL: Final = -2


@dataclass(slots=True)
class KeyTable:
    """The keys of a book lineage: each distinct key text classified once, plain keys numbered.

    Append-only: a derived revision copies it and adds the keys its edit brought.
    """

    needles: list[str] = field(default_factory=list)
    needle_ids: dict[str, int] = field(default_factory=dict)
    needle_has_space: list[bool] = field(default_factory=list)
    #: raw key text → its needle id (a plain key), :data:`EMPTY` or :data:`SPECIAL`
    codes: dict[str, int] = field(default_factory=dict)
    #: raw key text → compiled regex (the valid ``/regex/`` keys)
    regexes: dict[str, JsRegex] = field(default_factory=dict)
    #: raw key text → the diagnostic message of an invalid regex key (matched as text)
    invalid: dict[str, str] = field(default_factory=dict)
    #: raw key text → its :class:`KeyRef` (made for the entries the engine looks at)
    refs: dict[str, KeyRef] = field(default_factory=dict)
    #: the ids of :attr:`~.matcher.CompiledEntry.match_class`
    classes: dict[tuple[object, ...], int] = field(default_factory=dict)

    def copy(self) -> KeyTable:
        """An independent table with the same keys (for the next revision)."""
        return KeyTable(
            needles=list(self.needles),
            needle_ids=dict(self.needle_ids),
            needle_has_space=list(self.needle_has_space),
            codes=dict(self.codes),
            regexes=dict(self.regexes),
            invalid=dict(self.invalid),
            refs=dict(self.refs),
            classes=dict(self.classes),
        )

    def code(self, raw: str) -> int:
        """Classify one key text (memoized in :attr:`codes`); a new plain key gets a needle."""
        found = self.codes.get(raw)
        if found is not None:
            return found
        key = raw.strip()
        if not key:
            found = EMPTY
        elif ("{{" in key or "<" in key) and _MACRO_HINT.search(key):
            found = SPECIAL
        else:
            compiled = None
            if key[0] == "/":
                try:
                    compiled = compile_js_regex(key)
                except JsRegexError as exc:
                    self.invalid[raw] = f"{key_label(key)}: {exc}; matched as text"
            if compiled is not None:
                self.regexes[raw] = compiled
                found = SPECIAL
            else:
                found = self.needle_ids.get(key)
                if found is None:
                    found = len(self.needles)
                    self.needle_ids[key] = found
                    self.needles.append(key)
                    # stripped: a second part means inner whitespace (a multi-word key,
                    # docs/worldbook.md#wi-key-matching)
                    self.needle_has_space.append(len(key.split(maxsplit=1)) > 1)
        self.codes[raw] = found
        return found

    def ref(self, raw: str) -> KeyRef:
        """The :class:`KeyRef` of one key text (memoized)."""
        found = self.refs.get(raw)
        if found is None:
            code = self.code(raw)
            if code >= 0:
                found = KeyRef(raw, "plain", code)
            elif code == EMPTY:
                found = KeyRef(raw, "empty")
            elif raw in self.regexes:
                found = KeyRef(raw, "regex", -1, self.regexes[raw])
            else:
                found = KeyRef(raw, "dynamic")
            self.refs[raw] = found
        return found


@dataclass(slots=True)
class BookIndex:
    """What :func:`index_entries` found in a run of entries (slots ascending)."""

    always: list[int] = field(default_factory=list)
    dynamic: list[int] = field(default_factory=list)
    counts: dict[tuple[str, object], int] = field(default_factory=dict)
    #: slot → ``(uid, code, message)`` of its invalid regex keys, in key order
    diagnostics: dict[int, tuple[tuple[int | str, str, str], ...]] = field(default_factory=dict)
    #: slot → needle ids of its plain primary keys (when no posting lists were passed)
    plain: dict[int, list[int]] = field(default_factory=dict)


def index_entries(
    entries: Sequence[WorldBookEntry],
    first_slot: int,
    table: KeyTable,
    postings: list[list[int]] | None,
) -> BookIndex:
    """Index ``entries`` (numbered from ``first_slot``): classify their keys and append their
    slots to the posting lists of their plain primary keys (``postings`` grows with the table;
    without it, each entry's plain primary needles are listed in :attr:`BookIndex.plain`).

    This is the cost of compiling a book, so it is written as a few tight passes: one over the
    primary keys (a dictionary look-up for any key text seen before), the others over one or two
    fields each.
    """
    out = BookIndex()
    codes, code_of = table.codes, table.code
    needles = table.needles
    special: list[int] = []
    if postings is None:
        for slot, entry in enumerate(entries, first_slot):
            mine: list[int] = []
            for raw in entry.keys:
                code = codes.get(raw)
                if code is None:
                    code = code_of(raw)
                if code >= 0:
                    if code not in mine:
                        mine.append(code)
                elif code == SPECIAL:
                    special.append(slot)
            out.plain[slot] = mine
    else:
        # Two extra lists at the end catch the codes SPECIAL (-2) and EMPTY (-1) by negative
        # indexing, so the loop has no branch on the kind of key. A posting list may name a slot
        # twice (an entry repeating a key): its readers take sets.
        postings.extend([] for _ in range(len(needles) - len(postings)))
        postings.append(special)
        postings.append([])
        for slot, entry in enumerate(entries, first_slot):
            for raw in entry.keys:
                code = codes.get(raw)
                if code is None:
                    code = code_of(raw)  # a key text not seen before
                    if len(postings) - 2 < len(needles):
                        postings.insert(-2, [])  # its new needle's list, before the two
                postings[code].append(slot)
        del postings[-2:]
    # Secondary keys need needles too (their hits come from the same automata).
    for raw in [raw for entry in entries for raw in entry.secondary_keys if raw not in codes]:
        code_of(raw)
    if postings is not None:
        postings.extend([] for _ in range(len(needles) - len(postings)))
    invalid = table.invalid
    if invalid:
        for slot, entry in enumerate(entries, first_slot):
            problems = [
                (entry.uid, "WORLD_BOOK_REGEX_KEY_INVALID", invalid[raw])
                for raw in (*entry.keys, *entry.secondary_keys)
                if raw in invalid
            ]
            if problems:
                out.diagnostics[slot] = tuple(problems)
    # Entries with any field an ordinary entry leaves at its default, looked at one by one.
    unusual = [
        (slot, entry)
        for slot, entry in enumerate(entries, first_slot)
        if entry.constant
        or entry.sticky
        or entry.triggers
        or entry.delay
        or entry.delay_until_recursion
        or entry.match_persona_description
        or entry.match_character_description
        or entry.match_character_personality
        or entry.match_character_depth_prompt
        or entry.match_scenario
        or entry.match_creator_notes
        or entry.content[:2] == "@@"
        or (entry.character_filter is not None and entry.character_filter != _NO_FILTER)
    ]
    evaluated = [
        slot
        for slot, entry in unusual
        if entry.constant
        or entry.sticky
        or (entry.content[:2] == "@@" and parse_decorators(entry.content)[0])
    ]
    out.always = sorted({*evaluated, *special}) if special else evaluated
    out.dynamic = [
        slot for slot, entry in unusual if entry.triggers or entry.delay or _filters(entry)
    ]
    counts = out.counts
    for case, count in Counter([entry.case_sensitive for entry in entries]).items():
        counts[("case", case)] = count
    for _, entry in unusual:
        for counted in entry_counts(entry)[1:]:
            counts[counted] = counts.get(counted, 0) + 1
    return out


def compile_entry(
    slot: int, entry: WorldBookEntry, resource_id: str, table: KeyTable
) -> CompiledEntry:
    """The details of one entry (its keys were classified by :func:`index_entries`)."""
    ref = table.ref
    decorators, content = parse_decorators(entry.content)
    primary = tuple(ref(k) for k in entry.keys)
    secondary = tuple(ref(k) for k in entry.secondary_keys)
    always_evaluate = (
        entry.constant
        or bool(decorators)
        or any(k.kind in ("regex", "dynamic") for k in primary)
        or bool(entry.sticky)
    )
    static_rejection = not (entry.triggers or _filters(entry) or entry.delay)
    scan_sources = tuple(name for name, attr in _FLAG_ITEMS if getattr(entry, attr))
    plain = (
        static_rejection
        and not (entry.disable or entry.constant or decorators)
        and not (entry.delay_until_recursion or entry.exclude_recursion)
        and bool(primary)
        and all(k.kind in _PLAIN_KINDS for k in primary)
        and (not entry.selective or all(k.kind in _PLAIN_KINDS for k in secondary))
    )
    certain = not entry.use_probability or entry.probability >= 100
    # MacroSession.expand returns a text without these unchanged without looking further
    plain_content = "{{" not in content and "<" not in content and "\\{" not in content
    return CompiledEntry(
        index=slot,
        entry=entry,
        lore_id=f"{resource_id}:{entry.uid}",
        content=content,
        decorators=decorators,
        primary=primary,
        secondary=secondary,
        groups=_split_groups(entry.group),
        always_evaluate=always_evaluate,
        static_rejection=static_rejection,
        scan_sources=scan_sources,
        plain=plain,
        match_class=table.classes.setdefault(
            (entry.case_sensitive, entry.match_whole_words, entry.scan_depth, scan_sources),
            len(table.classes),
        ),
        certain=certain,
        plain_content=plain_content,
        deferrable=plain and certain and plain_content and not entry.ignore_budget,
        primary_needles=tuple(k.needle for k in primary if k.kind == "plain"),
    )


def _split_groups(group: str) -> tuple[str, ...]:
    # docs/worldbook.md#wi-selection: comma-separated membership, split on `,\s*`, empties dropped.
    if not group:
        return ()
    return tuple(part.strip() for part in group.split(",") if part.strip())


def _filters(entry: WorldBookEntry) -> bool:
    """Whether the entry's character filter can reject anything (ST writes an empty one,
    ``{isExclude: false, names: [], tags: []}``, into every entry)."""
    found = entry.character_filter
    return found is not None and bool(found.names or found.tags)


def entry_counts(entry: WorldBookEntry) -> list[tuple[str, object]]:
    """What one entry contributes to :attr:`CompiledBook.counts`."""
    out: list[tuple[str, object]] = [("case", entry.case_sensitive)]
    for name, attr in _FLAG_ITEMS:
        if getattr(entry, attr):
            out.append(("source", name))
    if entry.delay_until_recursion > 0:
        out.append(("delay", entry.delay_until_recursion))
    return out


def compile_book(resource_id: str, book: WorldBook) -> CompiledBook:
    """Index every key of ``book`` (automata and entry details are built on first use)."""
    table = KeyTable()
    postings: list[list[int]] = []
    entries = book.entries
    index = index_entries(entries, 0, table, postings)
    return CompiledBook.assemble(
        resource_id,
        book,
        table=table,
        postings=postings,
        index=index,
        raw=list(entries),
        slot_at=list(range(len(entries))),
        position=list(range(len(entries))),
        by_slot=[None] * len(entries),
    )


def entries_for(book: CompiledBook, needle_ids: Sequence[int] | set[int]) -> set[int]:
    """Slots of entries with at least one of ``needle_ids`` as a primary key."""
    out: set[int] = set()
    postings = book.postings
    for needle_id in needle_ids:
        out.update(postings[needle_id])
    return out


__all__ += ["entries_for"]
