"""Browser tests of the connections: the chat stream survives a server restart without missing or
repeating a reply, closes in the back/forward cache, and five tabs fit in six connections."""

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


def test_reply_once_after_a_server_restart(page_and_server: tuple[Any, Any, Path]) -> None:
    page, server, card = page_and_server
    server.import_card(card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
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
    # The outage itself shows as a cut or refused event stream (the chat's) and refused polls of
    # the orb (`GET /v2/chrome`, once a second); nothing else may fail.
    outage = page.problems()
    assert outage, "the outage left no trace: was the stream really cut?"
    assert all(
        "/events" in p or "(EventSource)" in p or "/api/v2/chrome " in f"{p} " for p in outage
    ), "\n".join(outage)

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
    page_and_server: tuple[Any, Any, Path],
) -> None:
    """A page put in the back/forward cache closes its event streams (left open, a few such pages
    use up Chromium's six connections per host and every other request of the origin waits), and
    reopens them when it is shown again, re-reading what happened meanwhile."""
    page, server, card = page_and_server
    server.import_card(card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
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


TABS = 5
CHROME_GETS = """return performance.getEntriesByType('resource')
  .filter((e) => e.name.endsWith('/pmp-dsh-tavern/api/v2/chrome')).length"""


def chrome_mode(page: Any) -> str:
    return str(page.driver.execute_script("return document.body.dataset.chrome || ''"))


def test_five_tabs_on_one_playthrough(page_and_server: tuple[Any, Any, Path]) -> None:
    """Each tab holds one long-lived connection (its session's event stream); the orb reads
    `/v2/chrome` with short conditional GETs instead of a second stream, so five tabs leave a
    connection of Chromium's six per host for every other request and the last tab still streams
    its reply."""
    page, server, card = page_and_server
    driver = page.driver
    server.import_card(card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
    send_and_stream(page, "hello from tab 1")
    url = driver.current_url
    tabs = [driver.current_window_handle]
    for n in range(2, TABS + 1):
        driver.switch_to.new_window("tab")
        driver.get(url)
        page.wait(lambda: any("to: hello from tab 1" in t for t in reply_texts(page)), f"tab {n}")
        tabs.append(driver.current_window_handle)
    problems = page.problems()

    # Every tab is open on the chat, streaming; the last one still sends and streams a reply.
    send_and_stream(page, f"hello from tab {TABS}")
    page.shot("09-fifth-tab")

    # The orb polls while the page is visible, and not at all while it is hidden.
    page.wait(lambda: chrome_mode(page) == "native", "the orb read the mode")
    driver.execute_script("performance.clearResourceTimings()")
    page.wait(lambda: driver.execute_script(CHROME_GETS) >= 2, "the orb polling /v2/chrome", 10)
    driver.execute_script(
        """Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true})
        document.dispatchEvent(new Event('visibilitychange'))
        performance.clearResourceTimings()"""
    )
    time.sleep(2.5)
    assert driver.execute_script(CHROME_GETS) == 0, "a hidden page kept polling"
    driver.execute_script(
        """delete document.visibilityState
        document.dispatchEvent(new Event('visibilitychange'))"""
    )
    page.wait(lambda: driver.execute_script(CHROME_GETS) >= 1, "read again once visible", 10)

    # A switch made by another client reaches every tab through its poll or its focus read-back,
    # and every tab's session stream delivered the reply the last tab asked for.
    server.call("PUT", "/pmp-dsh-tavern/api/v2/chrome", {"mode": "play"})
    for n, tab in enumerate(tabs, 1):
        driver.switch_to.window(tab)
        page.wait(lambda: chrome_mode(page) == "play", f"tab {n} follows the orb", 20)
        page.wait(
            lambda: any(f"to: hello from tab {TABS}" in t for t in reply_texts(page)),
            f"tab {n} shows the reply streamed in tab {TABS}",
            20,
        )
        problems += page.problems()
    # The tabs record the same reply at once: all but one timeline write lose their revision
    # check (409) and re-read and replay (as with two tabs); nothing else may fail.
    assert [p for p in problems if not ("timeline.json" in p and "409" in p)] == [], problems


MANY_TABS = 8
# Logs this page's EventSources opening and closing with the page's visibility at that moment
# (installed before the app's scripts run: switching Selenium to a tab brings it to the front, so
# a tab's hidden state can only be read back afterwards).
LOG_STREAMS = """(() => {
  const Native = window.EventSource
  window.__streams = []
  window.EventSource = class extends Native {
    constructor(...args) {
      super(...args)
      this.__open = true
      window.__streams.push(['open', document.visibilityState])
    }
    close() {
      if (this.__open) window.__streams.push(['close', document.visibilityState])
      this.__open = false
      super.close()
    }
  }
})()"""


def stream_log(page: Any) -> list[list[str]]:
    return list(page.driver.execute_script("return window.__streams"))


def test_eight_tabs_close_their_hidden_streams(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    """A tab in the background closes its session stream after a short grace, so eight tabs on one
    playthrough fit in Chromium's six connections per host: the eighth sends and streams its reply,
    and each tab behind it, brought back to the front, reopens its stream and shows that reply
    once."""
    page, server, card = page_and_server
    driver = page.driver
    log_streams = {"source": LOG_STREAMS}
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", log_streams)
    server.import_card(card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
    send_and_stream(page, "hello from tab 1")
    url = driver.current_url
    tabs = [driver.current_window_handle]
    problems = page.problems()
    for n in range(2, MANY_TABS + 1):
        driver.switch_to.new_window("tab")  # the tab behind becomes hidden
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", log_streams)
        driver.get(url)
        page.wait(lambda: any("to: hello from tab 1" in t for t in reply_texts(page)), f"tab {n}")
        tabs.append(driver.current_window_handle)
        problems += page.problems()
    time.sleep(2.5)  # the grace of the last tab put behind

    # The eighth tab sends and streams its reply while seven tabs are open behind it.
    send_and_stream(page, f"hello from tab {MANY_TABS}")
    assert stream_log(page) == [["open", "visible"]]
    problems += page.problems()

    # Each tab behind closed its stream while hidden; brought to the front, it reopens the stream
    # and re-reads the reply streamed in the eighth, once.
    for n, tab in enumerate(tabs[:-1], 1):
        driver.switch_to.window(tab)
        page.wait(
            lambda: driver.execute_script("return document.visibilityState") == "visible",
            f"tab {n} visible again",
            10,
        )
        page.wait(
            lambda: any(f"to: hello from tab {MANY_TABS}" in t for t in reply_texts(page)),
            f"tab {n} shows the reply streamed in tab {MANY_TABS}",
            20,
        )
        log = stream_log(page)
        assert ["close", "hidden"] in log, (n, log)
        assert log[-1] == ["open", "visible"], (n, log)
        texts = reply_texts(page)
        assert [sum(f"to: hello from tab {k}" in t for t in texts) for k in (1, MANY_TABS)] == [
            1,
            1,
        ], (n, texts)
        problems += page.problems()
    send_and_stream(page, "hello again from tab 7")
    problems += page.problems()
    # The tabs re-read and record the same replies: a timeline write losing its revision check
    # (409) re-reads and replays (as with two tabs); nothing else may fail.
    assert [p for p in problems if not ("timeline.json" in p and "409" in p)] == [], problems
