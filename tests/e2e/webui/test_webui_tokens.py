"""Token counts (issue 30, item 8): each message's and the next request's whole prompt, with the
Assembler's own estimate. Driven from `/` on a fresh data dir; the API is called only to check
results (the messages and the Assembler's preview)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def estimate(text: str) -> int:
    """The Assembler's estimate (innkeeper_assembler.wire.estimate_tokens)."""
    return (2 * len(text) + 6) // 7 or 1


def chat_of(page: Any, server: Any) -> list[tuple[str, str]]:
    """(role, text) of the shown session's user/assistant messages, read over HTTP."""
    session = page.head_session()
    view = server.call("GET", f"/pmp-dsh-tavern/api/v2/sessions/{session}/messages")
    return [
        (m["role"], m["text"])
        for m in view["messages"]
        if m["role"] in ("user", "assistant") and m["origin"]["kind"] in ("user", "assistant")
    ]


def test_token_counts_per_message_and_for_the_next_prompt(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    page, server, card = page_and_server
    page.import_and_play(card)
    page.send("How far is the village?")
    chat = [(role, text) for role, text in chat_of(page, server)]
    articles = [
        a for a in page.by_role("article") if "greeting" not in (a.get_attribute("class") or "")
    ]
    shown = [
        int(re.search(r"(\d+) tokens", a.find_element("css selector", "header").text).group(1))
        for a in articles
        if a.find_elements("css selector", "header .tokens")
    ]
    assert shown == [estimate(text) for _, text in chat]
    line = page.wait(
        lambda: [e for e in page.driver.find_elements("css selector", "p.tokens") if e.text],
        "the next-prompt count",
    )[0]
    preview = server.call(
        "POST", "/dsh-assembler/api/v1/preview", {"sessionId": page.head_session()}
    )["preview"]
    total = sum(estimate(m["content"]) for m in preview["messages"])
    assert line.text.startswith(f"Next prompt: {total} tokens")
    assert page.problems() == []
