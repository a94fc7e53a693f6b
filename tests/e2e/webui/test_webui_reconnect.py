"""Browser test: the chat stream survives a server restart without missing or repeating a reply."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


def reply_texts(page: Any) -> list[str]:
    """The text of every finished assistant reply in the chat (greeting and live copy excluded)."""
    script = """return [...document.querySelectorAll('article.msg.assistant')]
      .filter((a) => !a.classList.contains('greeting') && !a.classList.contains('streaming'))
      .map((a) => a.querySelector('.body').textContent)"""
    return list(page.driver.execute_script(script))


def connection_notice(page: Any) -> bool:
    return bool(
        page.driver.execute_script(
            "const el = document.querySelector('.notice[role=status]'); return !!el && !el.hidden"
        )
    )


def test_reply_once_after_a_server_restart(page_and_server: tuple[Any, Any, Path, Path]) -> None:
    page, server, card, play_dir = page_and_server
    server.import_card(card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina", play_dir)
    page.one("textbox", "Message").send_keys("hello before")
    page.one("button", "Send").click()
    page.wait(lambda: any("to: hello before" in t for t in reply_texts(page)), "first reply")
    assert page.problems() == []

    session = page.head_session()
    server.host.stop()  # the server closes the stream; the client starts retrying
    page.wait(lambda: connection_notice(page), "the connection-lost notice")
    assert page.one("textbox", "Message").is_enabled()
    server.host.start()
    # Another client sends at once: the reply is usually complete before this page has
    # reconnected (its back-off has grown), so the page must find it by re-reading, not by events.
    server.call(
        "POST",
        f"/pmp-dsh-tavern/api/v2/sessions/{session}/user-message",
        {"text": "while away", "requestId": "req-reconnect-test"},
    )
    page.wait(
        lambda: (
            any("to: while away" in t for t in reply_texts(page)) and not connection_notice(page)
        ),
        "the reply sent while the page was away",
    )
    page.shot("08-reconnected")
    # The outage itself shows as cut or refused event streams (the chat's and the orb's); nothing
    # else may fail.
    outage = page.problems()
    assert outage, "the outage left no trace: was the stream really cut?"
    assert all("/events" in p or "(EventSource)" in p for p in outage), "\n".join(outage)

    # The stream is live again: a reply sent from this page streams in and shows once.
    before = int(
        page.driver.execute_script("return document.querySelector('.log').dataset.partials")
    )
    page.one("textbox", "Message").send_keys(
        "hello after the restart, tell me about the forest of Eldoria"
    )
    page.one("button", "Send").click()
    page.wait(
        lambda: any("to: hello after the restart" in t for t in reply_texts(page)),
        "reply after restart",
    )
    texts = reply_texts(page)
    assert [
        sum("to: " + w in t for t in texts)
        for w in (
            "hello before",
            "while away",
            "hello after the restart, tell me about the forest of Eldoria",
        )
    ] == [1, 1, 1], texts
    streamed = int(
        page.driver.execute_script("return document.querySelector('.log').dataset.partials")
    )
    assert streamed - before > 3, "the reply after the restart was not streamed"
    page.driver.refresh()
    page.wait(lambda: len(reply_texts(page)) == 3, "the three replies after a reload")
    assert page.problems() == []


def partials(page: Any) -> int:
    return int(
        page.driver.execute_script("return document.querySelector('.log').dataset.partials || 0")
    )


def send_and_stream(page: Any, text: str) -> None:
    """Send ``text`` and wait for its reply, which must arrive in several streamed pieces."""
    before = partials(page)
    page.one("textbox", "Message").send_keys(text)
    page.one("button", "Send").click()
    page.wait(lambda: any(f"to: {text}" in t for t in reply_texts(page)), f"reply to {text!r}", 30)
    assert partials(page) - before > 3, f"the reply to {text!r} was not streamed"


def test_streams_close_in_the_back_forward_cache(
    page_and_server: tuple[Any, Any, Path, Path],
) -> None:
    """A page put in the back/forward cache closes its event streams (left open, a few such pages
    use up Chromium's six connections per host and every other request of the origin waits), and
    reopens them when it is shown again, re-reading what happened meanwhile."""
    page, server, card, play_dir = page_and_server
    server.import_card(card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina", play_dir)
    send_and_stream(page, "hello first")
    session = page.head_session()
    # What the browser does when the page goes into the back/forward cache.
    page.driver.execute_script(
        "window.dispatchEvent(new PageTransitionEvent('pagehide', {persisted: true}))"
    )
    before = partials(page)
    server.call(
        "POST",
        f"/pmp-dsh-tavern/api/v2/sessions/{session}/user-message",
        {"text": "while hidden", "requestId": "req-hidden-test"},
    )
    page.wait(
        lambda: (
            (info := server.call("GET", f"/host/api/sessions/{session}"))["lastTurn"] >= 2
            and not info["turnOpen"]
        ),
        "the reply sent while the page was hidden",
    )
    time.sleep(1)  # what an open stream would have delivered by now
    assert partials(page) == before, "a hidden page kept its stream open"
    assert not any("to: while hidden" in t for t in reply_texts(page))
    page.driver.execute_script(
        "window.dispatchEvent(new PageTransitionEvent('pageshow', {persisted: true}))"
    )
    page.wait(
        lambda: any("to: while hidden" in t for t in reply_texts(page)),
        "the page shown again re-read the reply",
    )
    send_and_stream(page, "hello after")
    assert page.problems() == []
