"""The Author's Note (issue 30, item 5): set in the page, it lands at its depth in the request
the fake OpenAI-compatible server records, and "Why" shows it. Driven from `/` by accessible
names on a fresh data dir; the API is called only to check results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def import_card(page: Any, card: Path) -> None:
    page.open()
    page.wait(lambda: page.driver.execute_script("return document.body.dataset.ready"), "library")
    file_input = page.wait(
        lambda: [
            e
            for e in page.driver.find_elements("css selector", "input[type=file]")
            if e.accessible_name == "Import"
        ],
        "file input named Import",
    )[0]
    file_input.send_keys(str(card))
    page.wait(
        lambda: "imported: Seraphina" in page.driver.find_element("css selector", ".results").text,
        "import row",
    )
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")


def replies(page: Any) -> list[Any]:
    return [
        a
        for a in page.by_role("article")
        if "assistant" in (a.get_attribute("class") or "")
        and "greeting" not in (a.get_attribute("class") or "")
        and "streaming" not in (a.get_attribute("class") or "")
    ]


def body(article: Any) -> str:
    return str(article.find_element("css selector", ".body").text)


def send(page: Any, text: str) -> None:
    before = len(replies(page))
    page.one("textbox", "Message").send_keys(text)
    page.one("button", "Send").click()
    page.wait(
        lambda: len(replies(page)) == before + 1 and text in body(replies(page)[-1]),
        f"reply to {text!r}",
    )
    page.wait(lambda: page.by_role("button", "Continue"), "the reply's actions")


def fill(page: Any, region: Any, name: str, value: str) -> None:
    box = page.wait(
        lambda: [
            e
            for e in region.find_elements("css selector", "input, textarea")
            if e.is_displayed() and e.accessible_name == name
        ],
        f"field {name!r}",
    )[0]
    box.clear()
    box.send_keys(value)


NOTE = "Remember the storm over the hills."


def test_authors_note_at_depth_2_lands_at_depth_2(
    browser: Any, server: Any, fake_llm: Any, seraphina: Path
) -> None:
    page = browser
    import_card(page, seraphina)
    send(page, "Hello there.")
    page.one("button", "Author's note").click()
    panel = page.one("region", "Author's note")
    fill(page, panel, "Note text", NOTE)
    fill(page, panel, "Depth", "deep")
    page.one("button", "Save note").click()
    page.wait(lambda: "Depth must be a whole number" in panel.text, "the bad depth named")
    session = page.head_session()
    stored = server.call("GET", f"/pmp-dsh-tavern/api/v1/authors-note?sessionId={session}")
    assert stored["authorsNote"] is None  # nothing was sent
    fill(page, panel, "Depth", "2")
    page.one("button", "Save note").click()
    page.wait(lambda: "Saved" in panel.text, "saved")
    stored = server.call("GET", f"/pmp-dsh-tavern/api/v1/authors-note?sessionId={session}")
    assert stored["authorsNote"] == {"text": NOTE, "depth": 2, "role": "system", "interval": 1}

    first_reply = body(replies(page)[-1])
    send(page, "What now?")
    sent = fake_llm.bodies[-1]["messages"]
    at = [i for i, m in enumerate(sent) if NOTE in str(m.get("content"))]
    assert len(at) == 1, sent
    assert sent[at[0]]["role"] == "system"
    chat = {"Hello there.", first_reply, "What now?"}
    after = [m["content"] for m in sent[at[0] + 1 :] if m["content"] in chat]
    before = [m["content"] for m in sent[: at[0]] if m["content"] in chat]
    assert after == [first_reply, "What now?"]  # depth 2: two chat messages after it
    assert before == ["Hello there."]
    # The first request, before the note, had none.
    assert not any(NOTE in str(m.get("content")) for m in fake_llm.bodies[0]["messages"])

    page.one("button", "Why").click()
    why = page.one("region", "Why")
    page.wait(
        lambda: (
            "Author's note: depth 2, system, every 1 user message(s)" in why.text
            and "in-chat:d2:" in why.text
        ),
        "the note and its depth-2 section in Why",
    )
    assert page.problems() == []
