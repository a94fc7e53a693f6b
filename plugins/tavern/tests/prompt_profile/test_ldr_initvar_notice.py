"""A session-bound book's `[initvar]` is not silently ignored (issue 10, item 10)."""

from __future__ import annotations

from typing import Any

BOOK = {
    "name": "Stats",
    "entries": {
        "0": {
            "uid": 0,
            "key": [],
            "comment": "[initvar] starting stats",
            "content": "hp: 10\ngold: 5\n",
            "disable": True,
        }
    },
}


async def test_initvar_in_a_session_bound_book_is_explained(tavern: Any) -> None:
    card = (await tavern.v1("POST", "/characters", {"name": "Ada"}, 201))["character"]["id"]
    book = await tavern.import_world_book_json(BOOK, "stats.json")
    session = await tavern.new_session()
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})

    notes = [
        d
        for d in (await tavern.active(session))["diagnostics"]
        if d["code"] == "MVU_INITVAR_NOT_USED"
    ]
    assert len(notes) == 1
    assert notes[0]["details"] == {
        "bookId": book,
        "initvarEntries": 1,
        "bindingSources": ["session"],
    }
    assert "link the book to the card" in notes[0]["message"]

    # Linked to the card, the book is one MVU reads: no notice.
    await tavern.v1("PUT", f"/characters/{card}/world-books", {"worldBookIds": [book]})
    codes = [d["code"] for d in (await tavern.active(session))["diagnostics"]]
    assert "MVU_INITVAR_NOT_USED" not in codes
