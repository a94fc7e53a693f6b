"""The Author's Note (issue 30, item 5): set in the page, it lands at its depth in the request
the fake OpenAI-compatible server records, and "Why" shows it. Driven from `/` by accessible
names on a fresh data dir; the API is called only to check results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


NOTE = "Remember the storm over the hills."


def test_authors_note_at_depth_2_lands_at_depth_2(
    browser: Any, server: Any, fake_llm: Any, seraphina: Path
) -> None:
    page = browser
    page.import_and_play(seraphina)
    page.send("Hello there.")
    page.one("button", "Author's note").click()
    panel = page.one("region", "Author's note")
    page.fill_in(panel, "Note text", NOTE)
    page.fill_in(panel, "Depth", "deep")
    page.one("button", "Save note").click()
    page.wait(lambda: "Depth must be a whole number" in panel.text, "the bad depth named")
    session = page.head_session()
    stored = server.call("GET", f"/pmp-dsh-tavern/api/v1/authors-note?sessionId={session}")
    assert stored["authorsNote"] is None  # nothing was sent
    page.fill_in(panel, "Depth", "2")
    page.one("button", "Save note").click()
    page.wait(lambda: "Saved" in panel.text, "saved")
    stored = server.call("GET", f"/pmp-dsh-tavern/api/v1/authors-note?sessionId={session}")
    assert stored["authorsNote"] == {"text": NOTE, "depth": 2, "role": "system", "interval": 1}

    first_reply = page.body(page.replies()[-1])
    page.send("What now?")
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
