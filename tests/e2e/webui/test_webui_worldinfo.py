"""The world-info editor and Test activation (issue 30, item 2), driven from `/` by accessible
names on a fresh data dir; the API is called only to check results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_add_a_lore_entry_test_it_and_see_it_fire_in_why(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    page, server, card = page_and_server
    page.import_and_play(card)
    page.send("Hello.")  # the chat (and its session) starts with the first message
    page.one("button", "World info").click()
    panel = page.one("region", "World info")
    page.wait(lambda: "No world book is bound" in panel.text, "no book yet")
    page.fill_in(panel, "Book name", "Lantern lore")
    page.one("button", "Create book").click()
    page.one("button", "New entry").click()
    panel = page.one("region", "World info")
    page.fill_in(panel, "Title", "Cursed lantern")
    page.fill_in(panel, "Keys", "lantern, lamp")
    page.fill_in(panel, "Content", "The lantern whispers of the drowned city.")
    # Bad input is said and nothing is sent; the form keeps what was typed.
    page.fill_in(panel, "Order", "soon")
    page.one("button", "Save entry").click()
    page.wait(lambda: "Order: soon" in page.one("region", "World info").text, "the bad field named")
    books = server.call("GET", "/pmp-dsh-tavern/api/v1/world-books")["worldBooks"]
    (summary,) = books
    assert summary["entryCount"] == 0
    page.fill_in(page.one("region", "World info"), "Order", "5")
    page.one("button", "Save entry").click()
    page.wait(
        lambda: any("Cursed lantern" in li.text for li in page.by_role("list", "Entries")[0]
                    .find_elements("css selector", "li")),
        "the entry listed",
    )  # fmt: skip
    stored = server.call("GET", f"/pmp-dsh-tavern/api/v1/world-books/{summary['id']}")
    (entry,) = stored["worldBook"]["book"]["entries"]
    assert (entry["keys"], entry["order"], entry["comment"]) == (
        ["lantern", "lamp"],
        5,
        "Cursed lantern",
    )
    # The book is bound to this chat.
    session = page.head_session()
    bound = server.call("GET", f"/pmp-dsh-tavern/api/v1/world-book-selection?sessionId={session}")
    assert bound["selection"]["worldBookIds"] == [summary["id"]]

    # Test activation: which entries fire and why, in the engine's words.
    page.fill_in(page.one("region", "World info"), "Text to test", "I lift the lamp.")
    page.one("button", "Test activation").click()
    page.wait(
        lambda: (
            "Cursed lantern: fires — key-match (lamp)" in page.one("list", "Test activation").text
        ),
        "the entry fires",
    )
    page.fill_in(page.one("region", "World info"), "Text to test", "Nothing here.")
    page.one("button", "Test activation").click()
    page.wait(
        lambda: "does not fire — no-key-match" in page.one("list", "Test activation").text,
        "the entry does not fire",
    )
    assert (
        server.call("GET", f"/pmp-dsh-tavern/api/v1/world-books/{summary['id']}")["worldBook"][
            "updatedAt"
        ]
        == stored["worldBook"]["updatedAt"]
    )  # a test writes nothing

    # The next turn: the entry fires, and Why says so.
    page.send("I pick up the lantern.")
    page.one("button", "Why").click()
    why = page.one("region", "Why")
    page.wait(
        lambda: any(
            "Cursed lantern" in r.text and "fired" in r.text
            for r in why.find_elements("css selector", "tr")
        ),
        "the entry fired in Why",
    )
    page.shot("worldinfo")
    assert page.problems() == []
