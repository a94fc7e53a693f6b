"""Impersonate, Continue and Delete in the chat (issue 30, item 6), driven from `/` by
accessible names on a fresh data dir; the API is called only to check results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def chat_of(page: Any, server: Any) -> list[tuple[str, str]]:
    """(role, text) of the shown session's user/assistant messages, read over HTTP."""
    session = page.head_session()
    view = server.call("GET", f"/pmp-dsh-tavern/api/v2/sessions/{session}/messages")
    return [
        (m["role"], m["text"])
        for m in view["messages"]
        if m["role"] in ("user", "assistant") and m["origin"]["kind"] in ("user", "assistant")
    ]


def ready_play(page: Any) -> None:
    page.wait(
        lambda: page.driver.execute_script("return document.body.dataset.ready") == "play", "play"
    )


def test_continue_extends_the_last_reply_in_place(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    page, server, card = page_and_server
    page.import_and_play(card)
    page.send("Hello there")
    first = page.body(page.replies()[-1])
    page.one("button", "Continue").click()
    page.wait(
        lambda: len(page.replies()) == 1 and "Reply 2" in page.body(page.replies()[-1]),
        "the continuation inside the same reply",
    )
    page.wait(lambda: page.by_role("button", "Continue"), "the turn ended")
    extended = page.body(page.replies()[-1])
    assert extended.startswith(first) and len(extended) > len(first)
    # Durable: after a reload the one reply still holds both parts; the log has no new input.
    page.driver.refresh()
    ready_play(page)
    page.wait(
        lambda: len(page.replies()) == 1 and "Reply 2" in page.body(page.replies()[0]), "reload"
    )
    assert page.body(page.replies()[0]) == extended
    chat = chat_of(page, server)
    assert [role for role, _ in chat] == ["user", "assistant", "assistant"]
    assert chat[0][1] == "Hello there"
    # The timeline still has one node, whose variant ends where the reply began.
    assert page.problems() == []


def test_impersonate_fills_the_box_and_sends_nothing(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    page, server, card = page_and_server
    page.import_and_play(card)
    page.send("Knock knock")
    before = chat_of(page, server)
    page.one("button", "Impersonate").click()
    box = page.one("textbox", "Message")
    page.wait(lambda: "Reply 2" in (box.get_attribute("value") or ""), "the box filled")
    page.wait(lambda: not page.one("button", "Impersonate").get_attribute("disabled"), "done")
    assert len(page.replies()) == 1
    assert chat_of(page, server) == before  # nothing was sent or added
    # The text is the player's to send: sending it is an ordinary turn.
    page.one("button", "Send").click()
    page.wait(lambda: len(page.replies()) == 2, "the sent impersonation answered")
    assert [r for r, _ in chat_of(page, server)] == ["user", "assistant"] * 2
    assert page.problems() == []


def test_delete_from_here_then_undo_then_delete_and_reload(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    page, server, card = page_and_server
    page.import_and_play(card)
    for text in ("one", "two", "three"):
        page.send(text)
    assert len(page.replies()) == 3
    # "Delete from here" on the second reply: it and the third are gone.
    page.by_role("button", "Delete from here")[1].click()
    page.wait(lambda: len(page.replies()) == 1, "two replies deleted")
    assert "one" in page.body(page.replies()[0])
    assert [text for role, text in chat_of(page, server) if role == "user"] == ["one"]
    # Undo while the page is open: all three are back, and the session shown has them.
    page.one("button", "Undo").click()
    page.wait(lambda: len(page.replies()) == 3, "undo")
    assert [t for r, t in chat_of(page, server) if r == "user"] == ["one", "two", "three"]
    # The last message alone: "Delete message".
    page.one("button", "Delete message").click()
    page.wait(lambda: len(page.replies()) == 2, "the last exchange deleted")
    page.driver.refresh()
    ready_play(page)
    page.wait(lambda: len(page.replies()) == 2, "still deleted after a reload")
    assert not page.by_role("button", "Undo")  # undo lives only while the page is open
    assert [t for r, t in chat_of(page, server) if r == "user"] == ["one", "two"]
    # The chat goes on from there: a new message becomes the third node of the same path.
    page.send("four")
    assert [t for r, t in chat_of(page, server) if r == "user"] == ["one", "two", "four"]
    page.driver.refresh()
    ready_play(page)
    page.wait(lambda: len(page.replies()) == 3 and "four" in page.body(page.replies()[-1]), "path")
    assert page.problems() == []
