"""Whole-book scans of the loader (own-book fingerprint, `[initvar]` count) run once per revision.

A turn over unchanged books must not rescan them; an edit must be seen on the next turn.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import msgspec

from innkeeper_tavern.features.prompt_profile import PROFILE_LOADER, WORLD_BOOK_ADAPTER
from innkeeper_tavern.features.prompt_profile.book_memo import BookMemo
from innkeeper_tavern.features.prompt_profile.book_twins import book_fingerprint, fingerprint_update
from innkeeper_tavern.features.prompt_profile.initvar_notice import initvar_entries, initvar_update
from innkeeper_tavern.pure.formats.worldbook import WorldBook, parse_world_book

ENTRY = {"uid": 0, "key": [], "comment": "[initvar] stats", "content": "hp: 10\n", "disable": True}
BOOK = {"name": "Stats", "entries": {"0": ENTRY}}


def book(*contents: str) -> WorldBook:
    entries = {str(i): {"uid": i, "key": [f"k{i}"], "content": c} for i, c in enumerate(contents)}
    return parse_world_book({"entries": entries})


def test_the_memo_derives_once_per_revision_and_is_bounded() -> None:
    calls: list[WorldBook] = []

    def derive(b: WorldBook) -> str:
        calls.append(b)
        return book_fingerprint(b)

    memo = BookMemo(derive, size=2)
    first, edited = book("a", "b"), book("a", "c")
    assert memo.get("x", "r1", first) == memo.get("x", "r1", first) == book_fingerprint(first)
    assert len(calls) == 1
    assert memo.get("x", "r2", edited) == book_fingerprint(edited) != book_fingerprint(first)
    assert len(calls) == 2
    memo.get("y", "r1", first)
    assert len(memo) == 2  # ("x", "r1") was the least recently used
    memo.get("x", "r1", first)
    assert len(calls) == 4


def test_the_fingerprint_is_the_entries_as_a_multiset() -> None:
    assert book_fingerprint(book("a", "b")) == book_fingerprint(book("a", "b"))
    swapped = parse_world_book(
        {
            "entries": {
                "0": {"uid": 5, "key": ["k1"], "content": "b"},
                "1": {"key": ["k0"], "content": "a"},
            }
        }
    )
    assert book_fingerprint(swapped) == book_fingerprint(book("a", "b"))
    assert book_fingerprint(book("a", "b")) != book_fingerprint(book("a", "b "))


async def test_turns_reuse_the_initvar_count_until_the_book_changes(tavern: Any) -> None:
    card = (await tavern.v1("POST", "/characters", {"name": "Ada"}, 201))["character"]["id"]
    book_id = await tavern.import_world_book_json(BOOK, "stats.json")
    session = await tavern.new_session()
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.v1(
        "POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book_id]}
    )
    adapter = tavern.host.get(PROFILE_LOADER).ctx.slot(WORLD_BOOK_ADAPTER)
    counted: list[int] = []

    def counting(b: WorldBook) -> int:
        counted.append(len(b.entries))
        return initvar_entries(b)

    adapter.initvars.derive = counting

    async def initvar_notes() -> list[int]:
        return [
            d["details"]["initvarEntries"]
            for d in (await tavern.active(session))["diagnostics"]
            if d["code"] == "MVU_INITVAR_NOT_USED"
        ]

    for _ in range(3):
        assert await initvar_notes() == [1]
        await tavern.prompt(session, "hello")
    assert counted == [1]  # one scan for three previews and three turns

    doc = (await tavern.v1("GET", f"/world-books/{book_id}"))["worldBook"]["book"]
    second = copy.deepcopy(doc["entries"][0])
    second.update(uid=1, comment="[InitVar] more")
    doc["entries"].append(second)
    await tavern.v1("PATCH", f"/world-books/{book_id}", {"book": doc})
    assert await initvar_notes() == [2]  # the edit is a new revision: seen on the next turn,
    assert await initvar_notes() == [2]
    assert counted == [1]  # by the changed entries (one added), not by rescanning the book
    assert adapter.initvars.updated == 1

    # One entry saved through the editor's route: the same.
    revision = (await tavern.v1("GET", f"/world-books/{book_id}"))["worldBook"]["updatedAt"]
    await tavern.v1(
        "PUT",
        f"/world-books/{book_id}/entries/0",
        {"entry": {**doc["entries"][0], "comment": "plain"}, "expectedRevision": revision},
    )
    assert await initvar_notes() == [1]
    assert counted == [1] and adapter.initvars.updated == 2


def test_an_updated_value_equals_a_derived_one_on_random_edits() -> None:
    rng = random.Random(3)
    comments = ["[initvar] a", "lore", "[INITVAR]", "x"]

    def entry(uid: int) -> dict[str, Any]:
        return {"uid": uid, "key": [rng.choice("abc")], "comment": rng.choice(comments),
                "content": rng.choice(["p", "q", "r"])}  # fmt: skip

    raw = [entry(i) for i in range(40)]
    current = parse_world_book({"entries": raw})
    counts = BookMemo(initvar_entries, update=initvar_update)
    prints = BookMemo(book_fingerprint, update=fingerprint_update)
    for revision in range(60):
        entries = list(current.entries)
        edit = rng.choice(["replace", "insert", "delete", "many"])
        if edit == "many":
            entries = [parse_world_book({"entries": [entry(i)]}).entries[0] for i in range(300)]
        else:
            at = rng.randrange(len(entries) + 1)
            fresh = parse_world_book({"entries": [entry(1000 + revision)]}).entries[0]
            if edit == "insert" or not entries:
                entries.insert(at, fresh)
            elif edit == "delete":
                del entries[min(at, len(entries) - 1)]
            else:
                entries[min(at, len(entries) - 1)] = fresh
        current = msgspec.structs.replace(current, entries=tuple(entries))
        assert counts.get("b", str(revision), current) == initvar_entries(current)
        assert prints.get("b", str(revision), current) == book_fingerprint(current)
    assert 0 < counts.updated < 60  # big changes were derived, small ones updated
