"""An edited, added or deleted entry leaves the incrementally updated book exactly as a full
compile of the new revision would be, in what a turn reads and in how it activates.

The compiled book of each revision is derived from the previous one (:func:`derive_book`) after
a previous turn built its look-ups (lore ids, uids, decisions), so the patched look-ups are the
ones compared. Books repeat uids (the last entry of a uid is the one the audit shows), carry
running timed effects and forced lore ids (which read the lore-id look-up), and have a budget
small enough to overflow (entries met afterwards are decided when read). Each revision is
compared with a fresh compile: the compiled structure (per-position entry details, which
entries each plain key selects, always-evaluated and request-dependent entries, case modes,
sources, delay levels, diagnostics, look-ups) and the encoded activation and audit.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationSettings,
    BookInput,
    MatcherCache,
    TimedEffectsState,
    activate,
    audit_books,
    compile_book,
)
from innkeeper_tavern.pure.worldbook.incremental import derive_book, share_unchanged_entries
from innkeeper_tavern.pure.worldbook.matcher import CompiledBook

from .test_wb_corpus_and_properties import _entries

_BOOK = msgspec.json.Decoder(WorldBook)
_TEXTS = ["the ship in a storm", "red dragon! cat", "a cat at the 港口", "Élan x", "storm ship"]

_edit = st.tuples(
    st.sampled_from(["replace", "insert", "delete", "append", "same-uid"]),
    st.integers(0, 60),
    _entries,
)


def _apply(entries: list[WorldBookEntry], edit: tuple[str, int, WorldBookEntry]) -> None:
    kind, where, entry = edit
    if kind == "append" or not entries:
        entries.append(entry)
        return
    index = where % len(entries)
    if kind == "replace":
        entries[index] = entry
    elif kind == "insert":
        entries.insert(index, entry)
    elif kind == "delete":
        del entries[index]
    else:  # a second entry with an existing uid
        entries.insert(index, msgspec.structs.replace(entry, uid=entries[-1].uid))


def _request(book: WorldBook, revision: int, state: TimedEffectsState) -> ActivationRequest:
    return ActivationRequest(
        books=[BookInput(resource_id="a", book=book, revision=revision)],
        context=ActivationContext(
            messages=tuple(
                ActivationMessage(id=str(i), role="user", text=t) for i, t in enumerate(_TEXTS)
            )
        ),
        settings=ActivationSettings(scan_depth=5, recursive=False, max_context_tokens=120),
        seed=revision,
        timed_state=state,
        forced=frozenset({"a:3", "a:7"}),
    )


def _structure(book: CompiledBook) -> dict[str, Any]:
    """What a turn reads of a compiled book, by entry position (slots are internal)."""
    positions = range(len(book.slot_at))
    selects = {
        book.needles[needle]: sorted({book.position[slot] for slot in slots})
        for needle, slots in enumerate(book.postings)
        if slots
    }
    details = []
    for position in positions:
        entry = book.entry_at(book.slot_at[position])
        details.append(
            (
                entry.lore_id,
                entry.content,
                sorted(entry.decorators),
                [
                    (r.raw, r.kind, book.needles[r.needle] if r.needle >= 0 else "")
                    for r in entry.primary
                ],
                [
                    (r.raw, r.kind, book.needles[r.needle] if r.needle >= 0 else "")
                    for r in entry.secondary
                ],
                entry.groups,
                entry.always_evaluate,
                entry.static_rejection,
                entry.scan_sources,
                entry.plain,
                entry.certain,
                entry.deferrable,
                entry.plain_content,
                entry.fingerprint,
            )
        )
    return {
        "details": details,
        "selects": selects,
        "always": sorted(book.position[slot] for slot in book.always),
        "dynamic": sorted(book.position[slot] for slot in book.dynamic),
        "case": book.case_values,
        "sources": book.source_flags,
        "delays": book.delay_levels,
        "diagnostics": book.compile_diagnostics,
        "uids": book.uid_entries,
        "lore": {k: [book.position[s] for s in v] for k, v in book.lore_index.items()},
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entries, max_size=25), st.lists(st.lists(_edit, min_size=1, max_size=3)))
def test_incremental_update_equals_a_full_compile(
    start: list[WorldBookEntry], edits: list[list[tuple[str, int, WorldBookEntry]]]
) -> None:
    entries = list(start)
    cache = MatcherCache()
    state = TimedEffectsState()
    previous: WorldBook | None = None
    for revision in range(len(edits) + 1):
        if revision:
            for edit in edits[revision - 1]:
                _apply(entries, edit)
        book = _BOOK.decode(msgspec.json.encode(WorldBook(entries=tuple(entries))))
        if previous is not None and revision % 2:
            # As PATCH stores it: unchanged entries keep the previous revision's objects.
            book = share_unchanged_entries(previous, book)
        request = _request(book, revision, state)
        incremental = activate(request, cache)
        fresh = activate(request, MatcherCache())
        assert msgspec.json.encode(incremental.materialized()) == msgspec.json.encode(
            fresh.materialized()
        )
        assert audit_books(request.books, incremental, max_decisions=200) == audit_books(
            request.books, fresh, max_decisions=200
        )
        assert _structure(cache.get("a", book, revision)) == _structure(compile_book("a", book))
        state = incremental.timed_state
        previous = book


def test_a_derived_book_patches_the_lookups_of_its_previous_revision() -> None:
    entries = [WorldBookEntry(uid=i % 40, keys=(f"k{i}",), content=f"c{i}") for i in range(60)]
    first = compile_book("b", WorldBook(entries=tuple(entries)))
    assert first.uid_entries["5"].content == "c45" and first.lore_index["b:5"] == [5, 45]
    edited = list(entries)
    edited[45] = msgspec.structs.replace(entries[45], uid=99, content="moved")
    del edited[5]
    derived = derive_book(first, "b", WorldBook(entries=tuple(edited)))
    assert derived is not None
    # Built from the previous revision's look-ups, not from scratch: and equal to a fresh one.
    assert derived._uid_entries is not None and derived._lore_index is not None
    fresh = compile_book("b", WorldBook(entries=tuple(edited)))
    assert derived.uid_entries == fresh.uid_entries
    assert "5" not in derived.uid_entries and derived.uid_entries["99"].content == "moved"
    assert {k: [derived.position[s] for s in v] for k, v in derived.lore_index.items()} == {
        k: [fresh.position[s] for s in v] for k, v in fresh.lore_index.items()
    }


def test_the_uid_lookup_alone_is_patched_without_a_pass_over_the_book() -> None:
    # The audit builds the uid look-up; the lore-id one is built only for timed or forced lore.
    import random

    rng = random.Random(9)
    book = WorldBook(
        entries=tuple(WorldBookEntry(uid=i, keys=(f"k{i}",), content=f"c{i}") for i in range(50))
    )
    compiled = compile_book("b", book)
    compiled.uid_entries  # noqa: B018 - built, as a turn's audit builds it
    for step in range(80):
        entries = list(book.entries)
        where = rng.randrange(len(entries))
        uid = rng.choice([1000 + step, entries[rng.randrange(len(entries))].uid, "7", 7])
        new = WorldBookEntry(uid=uid, keys=("k",), content=f"s{step}")
        kind = rng.choice(["replace", "insert", "delete"])
        if kind == "replace":
            entries[where] = new
        elif kind == "insert":
            entries.insert(where, new)
        elif len(entries) > 1:
            del entries[where]
        book = WorldBook(entries=tuple(entries))
        derived = derive_book(compiled, "b", book)
        assert derived is not None and derived._uid_entries is not None
        assert derived._lore_index is None
        assert derived.uid_entries == compile_book("b", book).uid_entries
        compiled = derived
