"""Whole-book scans of the loader (own-book fingerprint, `[initvar]` count) run once per revision.

A turn over unchanged books must not rescan them; an edit must be seen on the next turn.
"""

from __future__ import annotations

import copy
from typing import Any

from innkeeper_tavern.features.prompt_profile import PROFILE_LOADER, WORLD_BOOK_ADAPTER
from innkeeper_tavern.features.prompt_profile.book_memo import BookMemo
from innkeeper_tavern.features.prompt_profile.book_twins import book_fingerprint
from innkeeper_tavern.features.prompt_profile.initvar_notice import initvar_entries
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
    assert await initvar_notes() == [2]  # the edit is a new revision: counted again
    assert await initvar_notes() == [2]
    assert counted == [1, 2]
