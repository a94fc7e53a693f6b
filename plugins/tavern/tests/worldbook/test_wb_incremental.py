"""An edited book's incrementally derived compiled form activates exactly like a fresh compile.

Random books go through random edit sequences (replace, insert, delete, append, several at
once); after each edit the same request runs against a long-lived cache (which derives the new
revision from the previous one) and against a fresh cache (which compiles from scratch). The
encoded results — activated entries, positions, every decision, diagnostics, timed state —
must be identical. A refused (over-cap) book is refused once per revision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry, parse_world_book
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationSettings,
    BookInput,
    BookSource,
    DecisionList,
    HostLimits,
    MatcherCache,
    Reason,
    TimedEffectsState,
    activate,
    audit_books,
)
from innkeeper_tavern.pure.worldbook.compiler import compile_book
from innkeeper_tavern.pure.worldbook.incremental import derive_book

from .test_wb_corpus_and_properties import _entries

#: Built at import: the host's plugin tests purge and re-import Tavern modules, after which a
#: lazily resolved ``type=WorldBook`` would look its annotations up in the wrong module.
_BOOK = msgspec.json.Decoder(WorldBook)
_KEYS = ["ship", "storm", "港口", "Élan", "cat", "red dragon", "/dra?g/i", "{{char}}", "new key"]
_TEXTS = ["the ship in a storm", "red dragon!", "a cat at the 港口", "new key here", "Élan"]

_edit = st.tuples(
    st.sampled_from(["replace", "insert", "delete", "append", "keys"]),
    st.integers(0, 40),
    _entries,
    st.lists(st.sampled_from(_KEYS), max_size=3),
)


def _apply(entries: list[WorldBookEntry], edit: tuple[str, int, WorldBookEntry, list[str]]) -> None:
    kind, where, entry, keys = edit
    uid = max((int(e.uid) for e in entries), default=0) + 1
    fresh = msgspec.structs.replace(entry, uid=uid)
    if kind == "append" or not entries:
        entries.append(fresh)
        return
    index = where % len(entries)
    if kind == "replace":
        entries[index] = msgspec.structs.replace(fresh, uid=entries[index].uid)
    elif kind == "insert":
        entries.insert(index, fresh)
    elif kind == "delete":
        del entries[index]
    else:
        entries[index] = msgspec.structs.replace(entries[index], keys=tuple(keys))


def _request(book: WorldBook, revision: int, state: TimedEffectsState) -> ActivationRequest:
    return ActivationRequest(
        books=[
            BookInput(resource_id="a", book=book, revision=revision),
            BookInput(resource_id="c", book=book, source=BookSource.CHARACTER, revision=revision),
        ],
        context=ActivationContext(
            messages=tuple(
                ActivationMessage(id=str(i), role="user", text=t) for i, t in enumerate(_TEXTS)
            )
        ),
        settings=ActivationSettings(scan_depth=4, recursive=True, max_context_tokens=2_000),
        seed=revision,
        timed_state=state,
        substitute=lambda text: text.replace("{{char}}", "cat"),
        host_limits=HostLimits(max_runtime_entries=120, max_lore_candidates=50),
    )


def _encoded(result: Any) -> bytes:
    return msgspec.json.encode(result.materialized())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entries, max_size=30), st.lists(st.lists(_edit, min_size=1, max_size=3)))
def test_derived_books_activate_like_fresh_compiles(
    start: list[WorldBookEntry], edits: list[list[tuple[str, int, WorldBookEntry, list[str]]]]
) -> None:
    entries = list({e.uid: e for e in start}.values())
    cache = MatcherCache()
    state = TimedEffectsState()
    for revision in range(len(edits) + 1):
        if revision:
            for edit in edits[revision - 1]:
                _apply(entries, edit)
        # A fresh copy of every entry, as a re-read document would give.
        book = _BOOK.decode(msgspec.json.encode(WorldBook(entries=tuple(entries))))
        request = _request(book, revision, state)
        incremental = activate(request, cache)
        fresh = activate(request, MatcherCache())
        assert _encoded(incremental) == _encoded(fresh)
        assert audit_books(request.books, incremental, max_decisions=20) == audit_books(
            request.books, fresh, max_decisions=20
        )
        # The derived book's always-evaluated and request-dependent entries (patched, not
        # recomputed) are a fresh compile's, in entry order.
        derived, compiled = cache.get("a", book, revision), compile_book("a", book)
        for name in ("always", "dynamic"):
            assert [derived.position[s] for s in getattr(derived, name)] == getattr(compiled, name)
        state = incremental.timed_state
    if edits and entries:
        assert cache.derived > 0
    # A resource keeps its newest revision and the one before it, not one per edit.
    assert len(cache) <= 4


def test_one_entry_edit_derives_and_keeps_unchanged_entries() -> None:
    entries = tuple(
        WorldBookEntry(uid=i, keys=(f"key{i}", "shared"), content=f"lore {i}") for i in range(500)
    )
    first = compile_book("b", WorldBook(entries=entries))
    first.scan("key3 shared", False)  # build the automaton
    built = [first.entry_at(slot) for slot in (199, 201, 300)]  # as a turn that looked at them
    edited = list(entries)
    edited[200] = msgspec.structs.replace(entries[200], keys=("brand new",), content="edited")
    derived = derive_book(first, "b", WorldBook(entries=tuple(edited)))
    assert derived is not None
    # Unchanged entries keep their slots and the compiled entries already built.
    assert derived.slot_at[199] == 199 and derived.slot_at[201] == 201
    assert derived.entry_at(199) is built[0] and derived.entry_at(201) is built[1]
    assert derived.entry_at(derived.slot_at[200]).entry.content == "edited"
    # The big automaton is shared; only the new key is in the overlay.
    assert derived.mode(False).automaton is first.mode(False).automaton
    overlay = derived.mode(False).overlay
    assert overlay is not None and overlay.first == len(first.needles)
    assert overlay.covered == len(derived.needles) == len(first.needles) + 1
    hits = derived.scan("a brand new key200 day", False)
    assert {derived.needles[n] for n in hits.whole} == {"brand new", "key200"}
    slot = derived.slot_at[200]  # a new slot; the old one is free
    assert (slot, derived.position[slot], derived.raw[200], derived.position[200]) == (
        500,
        200,
        None,
        -1,
    )
    assert derived.postings[derived.needle_ids["brand new"]] == [500]
    assert derived.postings[derived.needle_ids["key200"]] == []
    # The previous revision's posting lists are untouched (a running turn may read them).
    assert first.postings[first.needle_ids["key200"]] == [200]
    # A removal before entry 300 shifts its position, not its slot.
    del edited[10]
    again = derive_book(derived, "b", WorldBook(entries=tuple(edited)))
    assert again is not None and again.slot_at[299] == 300 and again.entry_at(300) is built[2]
    assert again.position[300] == 299 and again.position[500] == 199 and again.raw[10] is None
    # A big change compiles from scratch.
    rewritten = tuple(msgspec.structs.replace(e, content="all new") for e in edited)
    assert derive_book(again, "b", WorldBook(entries=rewritten)) is None


def test_over_cap_book_is_refused_once_per_revision() -> None:
    small = WorldBook(
        entries=tuple(WorldBookEntry(uid=i, keys=("ship",), content="x") for i in range(8))
    )
    big = WorldBook(entries=tuple(WorldBookEntry(uid=i, keys=(f"k{i}",)) for i in range(20)))
    cache = MatcherCache()
    request = ActivationRequest(
        books=[
            BookInput(resource_id="small", book=small, revision=1),
            BookInput(resource_id="big", book=big, revision=1),
        ],
        context=ActivationContext(messages=(ActivationMessage(id="1", role="user", text="ship"),)),
        host_limits=HostLimits(max_runtime_entries=20),
    )
    first = activate(request, cache)
    second = activate(request, cache)
    assert [d.code for d in first.diagnostics] == ["WORLD_BOOK_RUNTIME_TOTAL_LIMIT"]
    assert len(first.activated) == 8 and len(first.decisions) == 28
    refused = [d for d in second.decisions if d.resource_id == "big"]
    assert len(refused) == 20 and all(d.reason == Reason.HOST_ENTRY_CAP for d in refused)
    # The refusal and its decisions are cached: the same objects come back next turn.
    assert first.decisions[10] is second.decisions[10]
    assert len(cache) == 1  # the refused book was never compiled
    (small_audit, big_audit) = audit_books(request.books, second, max_decisions=10)
    assert len(small_audit["decisions"]) == 8 and len(big_audit["decisions"]) == 2
    assert big_audit["resource"]["entryCount"] == 20


def test_st_exports_empty_character_filters_keep_no_match_activations_cheap() -> None:
    # SillyTavern writes an empty characterFilter into every entry; it rejects nothing, so it
    # must not make every entry's decision request-dependent (evaluated on every turn).
    path = (
        Path(__file__).resolve().parents[5]
        / "shared/sillytavern-corpus/prolix-oc-st-presets/worldbooks/The Long Reclamation.json"
    )
    book = parse_world_book(json.loads(path.read_bytes()))
    assert all(e.character_filter is not None for e in book.entries)
    request = ActivationRequest(
        books=[BookInput(resource_id="r", book=book, revision=1)],
        context=ActivationContext(messages=(ActivationMessage(id="1", role="user", text="zzz"),)),
    )
    cache = MatcherCache()
    first, second = activate(request, cache), activate(request, cache)
    assert isinstance(second.decisions, DecisionList)
    (part,) = second.decisions.books
    evaluated = {i for i, d in part.explicit.items()}
    constant = {i for i, e in enumerate(book.entries) if e.constant}
    assert evaluated == constant  # only entries that always evaluate
    rejected = [i for i in range(len(book.entries)) if i not in constant]
    assert all(first.decisions[i] is second.decisions[i] for i in rejected)
