"""A whole session played in a real browser against a real server (issue 16's browser tests)."""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

SECOND_GREETING = '*The glade is quiet tonight.* "Welcome back, traveler."'


def import_seraphina(page: Any, server: Any, card_path: Path) -> str:
    """Import the corpus card through the page's Import control; give it a second greeting."""
    page.open("#/library")
    page.wait(lambda: page.driver.execute_script("return document.body.dataset.ready"), "library")
    file_input = page.wait(
        lambda: [
            e
            for e in page.by_role("button")
            + page.driver.find_elements("css selector", "input[type=file]")
            if e.get_attribute("type") == "file" and e.accessible_name == "Import"
        ],
        "file input named Import",
    )[0]
    file_input.send_keys(str(card_path))
    page.wait(
        lambda: "imported: Seraphina" in page.driver.find_element("css selector", ".results").text,
        "import row",
    )
    card = server.call("GET", "/pmp-dsh-tavern/api/v1/characters")["characters"][0]
    # No corpus card has alternate greetings; add one so the greeting picker has two.
    server.call(
        "PATCH",
        f"/pmp-dsh-tavern/api/v1/characters/{card['id']}",
        {"alternateGreetings": [SECOND_GREETING]},
    )
    return str(card["id"])


def give_opening_variables(server: Any, character_id: str) -> None:
    """Add an ``[initvar]`` entry (``hp: 100``) to the card's own book: its greetings then have
    MVU openings the draft shows and edits."""
    card = server.call("GET", f"/pmp-dsh-tavern/api/v1/characters/{character_id}")["character"]
    book = card["data"]["characterBook"]
    book["entries"].append(
        {"keys": [], "content": "hp: 100\nmood: calm", "comment": "[initvar] base",
         "enabled": True, "insertion_order": 100}
    )  # fmt: skip
    server.call(
        "PATCH",
        f"/pmp-dsh-tavern/api/v1/characters/{character_id}/world-book",
        {"characterBook": book},
    )


def catalog_row(server: Any, index: int = 0) -> dict[str, Any]:
    """The ``ext.pmpDshTavern`` of the catalog's row ``index``."""
    catalog = server.call("GET", "/pmp-dsh-tavern/api/v2/workspace/files?path=catalog.json")
    return dict(json.loads(catalog["content"])["playthroughs"][index]["ext"]["pmpDshTavern"])


def draft_of(server: Any, index: int = 0) -> dict[str, Any]:
    """``GET /v2/drafts/:id`` of the catalog's row ``index``."""
    return dict(
        server.call("GET", f"/pmp-dsh-tavern/api/v2/drafts/{catalog_row(server, index)['draftId']}")
    )


def current_variables(server: Any, session: str) -> dict[str, Any]:
    """The session's current MVU ``stat_data``."""
    scope = urllib.parse.quote(json.dumps({"authority": "local", "sessionId": session}))
    listed = server.call("GET", f"/pmp-dsh-tavern/api/v1/mvu/resources?scope={scope}")
    rid = urllib.parse.quote(listed["resources"][0]["id"])
    found = server.call("GET", f"/pmp-dsh-tavern/api/v1/mvu/resource?id={rid}&scope={scope}")
    return dict(found["resource"]["content"]["stat_data"])


def edit_value(page: Any, region: Any, path: str, value: str) -> None:
    """Type ``value`` into the variable box named ``path`` in ``region`` and save with Enter."""
    from selenium.webdriver.common.keys import Keys

    box = page.wait(
        lambda: [
            e for e in region.find_elements("css selector", "input") if e.accessible_name == path
        ],
        f"{path} row",
    )[0]
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(value, Keys.ENTER)
    page.wait(lambda: page.driver.find_element("id", "status").text == "Saved", "saved")


def replies(page: Any) -> list[Any]:
    return [
        a
        for a in page.by_role("article")
        if "assistant" in a.get_attribute("class")
        and "greeting" not in a.get_attribute("class")
        and "streaming" not in a.get_attribute("class")
    ]


def body(article: Any) -> str:
    return str(article.find_element("css selector", ".body").text)


def send(page: Any, text: str, *, keyboard: bool = False) -> None:
    before = len(replies(page))
    partials = int(
        page.driver.execute_script("return document.querySelector('.log').dataset.partials || 0")
    )
    box = page.one("textbox", "Message")
    box.send_keys(text)
    if keyboard:
        from selenium.webdriver.common.keys import Keys

        box.send_keys(Keys.ENTER)
    else:
        page.one("button", "Send").click()
    page.wait(
        lambda: len(replies(page)) == before + 1 and text in replies(page)[-1].text,
        f"reply to {text!r}",
        30,
    )
    streamed = int(
        page.driver.execute_script("return document.querySelector('.log').dataset.partials || 0")
    )
    assert streamed - partials > 3, "the reply arrived in one piece, not streamed"


def swipe_label(page: Any) -> str:
    return page.wait(
        lambda: [
            s.text
            for s in page.driver.find_elements("css selector", ".msg .actions span.muted")
            if re.fullmatch(r"\d+/\d+", s.text)
        ],
        "swipe counter",
    )[-1]


def new_playthrough(page: Any, name: str) -> None:
    """Open ``name`` from the library and start a playthrough (in the default play folder)."""
    page.new_playthrough(name)


def seraphina_playthrough(page: Any, server: Any, card: Path) -> None:
    """Import the corpus card and start a playthrough of it."""
    import_seraphina(page, server, card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    new_playthrough(page, "Seraphina")


def test_play_a_whole_session(page_and_server: tuple[Any, Any, Path]) -> None:
    page, server, card = page_and_server
    character_id = import_seraphina(page, server, card)
    give_opening_variables(server, character_id)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina in the character list")
    assert page.one("list", "Characters")

    # Many files at once: a preset, a world book, a regex file (not importable here), a V1 card.
    folder = card.parent
    files = [
        folder / "presets_openai_Default.json",
        folder / "Eldoria.json",
        folder.parents[1] / "prolix-oc-st-presets" / "regex" / "regex-trim_sim_blocks.json",
        folder.parent / "tag-1.0.0" / "Aqua.png",
    ]
    page.driver.find_element("css selector", "input[type=file]").send_keys(
        "\n".join(map(str, files))
    )
    table = page.one("table", "Import results")
    page.wait(
        lambda: (
            len(
                [
                    r
                    for r in table.find_elements("css selector", "tbody tr")
                    if "waiting" not in r.text
                ]
            )
            == 4
        ),
        "four results",
    )
    rows = {
        r.find_elements("css selector", "td")[0].text: r.text
        for r in table.find_elements("css selector", "tbody tr")
    }
    assert "imported: presets_openai_Default" in rows["presets_openai_Default.json"]
    assert "imported: Eldoria" in rows["Eldoria.json"]
    assert "skipped" in rows["regex-trim_sim_blocks.json"]
    assert "imported: Aqua" in rows["Aqua.png"]
    page.wait(lambda: page.by_role("listitem", "Aqua"), "Aqua in the grid")
    lists = page.driver.find_element("css selector", ".lists").text
    assert "presets_openai_Default" in lists and "Eldoria" in lists
    # Custom order from the keyboard: Alt+Arrow moves the focused card.
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    Select(page.one("combobox", "Sort")).select_by_value("custom")
    page.wait(
        lambda: page.driver.find_elements("css selector", "li.card[draggable=true]"),
        "draggable cards",
    )
    cards = lambda: page.driver.find_elements("css selector", "li.card")  # noqa: E731
    first = cards()[0].get_attribute("aria-label")
    cards()[1].find_element("css selector", "a").send_keys(Keys.ALT, Keys.ARROW_LEFT)
    page.wait(lambda: cards()[1].get_attribute("aria-label") == first, "moved")
    order = server.call("GET", "/pmp-dsh-tavern/api/v1/characters")
    assert order["sorting"]["mode"] == "custom" and order["characters"][1]["name"] == first
    page.shot("01-library")
    new_playthrough(page, "Seraphina")
    page.one("button", "Next greeting").click()
    page.wait(
        lambda: "Welcome back, traveler." in page.by_role("article")[0].text,
        "second greeting shown",
    )
    # The greeting was chosen on the opening draft: no session exists before the first send.
    row = catalog_row(server)
    assert "rootSessionId" not in row and row["playthroughNumber"] == 1
    assert page.driver.find_element("tag name", "h1").text == "Playthrough 1"
    draft = draft_of(server)
    assert draft["draft"]["selection"]["greetingIndex"] == 1
    assert draft["opening"]["variables"]["stat_data"]["hp"] == 100
    # An opening variable of that greeting, edited before the first send.
    edit_value(page, page.one("region", "Opening variables"), "hp", "80")
    draft = draft_of(server)
    assert draft["opening"]["edited"] is True
    assert draft["opening"]["variables"]["stat_data"]["hp"] == 80
    page.shot("02-greeting")

    send(page, "Tell me about the forest of Eldoria.")
    # The first send materialized the draft: one session, the greeting and the edit it chose.
    session = catalog_row(server)["rootSessionId"]
    assert draft_of(server)["draft"]["materialize"]["sessionId"] == session
    chosen = server.call("GET", f"/pmp-dsh-tavern/api/v1/character-selection?sessionId={session}")
    assert chosen["selection"]["characterCardId"] == character_id
    assert chosen["selection"]["character"]["greetingIndex"] == 1
    assert current_variables(server, session)["hp"] == 80
    assert not page.by_role("region", "Opening variables")
    assert not page.by_role("button", "Next greeting"), "the greeting is fixed once the chat starts"
    send(page, "What lives in the glade?")
    send(page, "Can you show me your magic?")
    assert len(replies(page)) == 3
    page.shot("03-chat")

    # Swipe: regenerate the last reply, then go back and forth between the two variants.
    first_text = body(replies(page)[-1])
    page.one("button", "Regenerate").click()
    page.wait(
        lambda: (
            swipe_label(page) == "2/2"
            and len(replies(page)) == 3
            and body(replies(page)[-1]) != first_text
        ),
        "second swipe",
    )
    second_text = body(replies(page)[-1])
    page.one("button", "Previous swipe").click()
    page.wait(
        lambda: swipe_label(page) == "1/2" and body(replies(page)[-1]) == first_text,
        "first swipe again",
    )
    page.one("button", "Next swipe").click()
    page.wait(
        lambda: swipe_label(page) == "2/2" and body(replies(page)[-1]) == second_text,
        "second swipe again",
    )

    # Branch at the second reply into a new playthrough of the same character.
    original = page.driver.current_url
    replies(page)[1].find_element("xpath", ".//button[normalize-space()='Branch']").click()
    page.wait(
        lambda: page.driver.current_url != original and len(replies(page)) == 2,
        "branched playthrough",
    )
    assert "What lives in the glade?" in page.driver.find_element("css selector", ".log").text
    page.shot("04-branch")
    send(page, "A new path from here.")

    # Reload the original playthrough: every message and both swipes are still there.
    page.driver.get(original)
    page.driver.refresh()
    page.wait(lambda: len(replies(page)) == 3, "original playthrough after reload")
    assert swipe_label(page) == "2/2"
    assert body(replies(page)[-1]) == second_text
    assert "Welcome back, traveler." in page.by_role("article")[0].text

    # Why: the Eldoria lore entry fired for the first message.
    page.one("button", "Why").click()
    why = page.one("region", "Why")
    select = page.wait(lambda: why.find_elements("css selector", "select"), "round picker")[0]
    rounds = Select(select)
    first_round = [o.get_attribute("value") for o in rounds.options][
        -2
    ]  # newest first; last is the preview
    rounds.select_by_value(first_round)
    page.wait(
        lambda: any(
            "eldoria" in r.text and "fired" in r.text
            for r in why.find_elements("css selector", "tr")
        ),
        "eldoria fired",
    )
    page.shot("05-why")

    # Stop a long reply while it streams.
    box = page.one("textbox", "Message")
    box.send_keys("Tell me a slow story.")
    page.one("button", "Send").click()
    page.wait(
        lambda: (
            page.driver.find_elements("css selector", "article.streaming")
            and len(page.driver.find_element("css selector", "article.streaming").text) > 40
        ),
        "streaming reply",
    )
    page.one("button", "Stop").click()
    page.wait(
        lambda: (
            not page.driver.find_elements("css selector", "article.streaming")
            and page.one("button", "Stop").get_attribute("disabled") is not None
        ),
        "stopped",
    )
    page.wait(
        lambda: "Reply" in replies(page)[-1].text and "slow story" in replies(page)[-1].text,
        "interrupted reply kept",
    )

    # New chat with current settings: a new run whose session copied this one's selection.
    page.one("button", "Session setup").click()
    page.new_chat("New chat with current settings")
    page.wait(
        lambda: (
            page.by_role("article") and "Welcome back, traveler." in page.by_role("article")[0].text
        ),
        "same greeting",
    )

    # The view switch (the chrome orb) changes the frontend display mode for every tab.
    page.one("button", "View: Classic view").click()
    page.one("button", "Switch to Play view").click()
    page.wait(
        lambda: page.driver.execute_script("return document.body.dataset.chrome") == "play",
        "play mode",
    )
    assert server.call("GET", "/pmp-dsh-tavern/api/v2/chrome")["mode"] == "play"

    page.open("#/settings")
    page.wait(
        lambda: page.driver.execute_script("return document.body.dataset.ready") == "settings",
        "settings",
    )
    page.shot("06-settings")
    # Chinese UI text, saved in the server's ui-settings.
    Select(page.one("combobox", "Language")).select_by_value("zh")
    page.wait(
        lambda: (
            page.driver.execute_script("return document.getElementById('nav').textContent")
            == "资料库群组设置"
        ),
        "Chinese navigation",
    )
    assert page.driver.execute_script("return document.documentElement.lang") == "zh-CN"
    ui = server.call("GET", "/pmp-dsh-tavern/api/v1/ui-settings")
    assert ui["settings"]["locale"] == "zh-CN" and ui["custom"] is True
    page.open("#/library")
    page.wait(lambda: page.by_role("list", "角色"), "Chinese character list")
    assert page.problems() == []


def test_keyboard_only(page_and_server: tuple[Any, Any, Path]) -> None:
    """The same session with no mouse: Tab to each control, Enter/Space to use it."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    page, server, card = page_and_server
    import_seraphina(page, server, card)
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    keys = ActionChains(page.driver)

    def focused_name() -> str:
        el = page.driver.switch_to.active_element
        return str(el.accessible_name or "")

    def tab_to(name: str, limit: int = 120) -> None:
        for _ in range(limit):
            if focused_name() == name:
                return
            keys.send_keys(Keys.TAB).perform()
        raise AssertionError(f"Tab never reached {name!r}")

    tab_to("Seraphina")
    keys.send_keys(Keys.ENTER).perform()
    page.wait(lambda: page.by_role("button", "New playthrough"), "character page")
    tab_to("New playthrough")
    keys.send_keys(Keys.ENTER).perform()
    page.wait(
        lambda: page.driver.execute_script("return document.body.dataset.ready") == "play",
        "play view",
    )
    tab_to("Next greeting")
    keys.send_keys(Keys.SPACE).perform()
    page.wait(
        lambda: "Welcome back, traveler." in page.by_role("article")[0].text, "second greeting"
    )
    for text in (
        "Tell me about the forest of Eldoria.",
        "What lives in the glade?",
        "Can you show me your magic?",
    ):
        tab_to("Message")
        send(page, text, keyboard=True)
    page.wait(lambda: page.by_role("button", "Regenerate"), "the last reply's Regenerate")
    tab_to("Regenerate")
    keys.send_keys(Keys.ENTER).perform()
    page.wait(lambda: swipe_label(page) == "2/2", "second swipe")
    tab_to("Previous swipe")
    keys.send_keys(Keys.ENTER).perform()
    page.wait(lambda: swipe_label(page) == "1/2", "first swipe")
    tab_to("Why")
    keys.send_keys(Keys.ENTER).perform()
    page.wait(
        lambda: any(
            "fired" in r.text for r in page.one("region", "Why").find_elements("css selector", "tr")
        ),
        "lore in Why",
    )
    page.shot("07-keyboard")
    assert page.problems() == []


MVU_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Ada",
        "first_mes": "Welcome to the inn.",
        "character_book": {
            "name": "Ada book",
            "entries": [
                {
                    "keys": [],
                    "content": "hp: 100\nmood: calm\ngold: 5",
                    "comment": "[initvar] base",
                    "enabled": True,
                    "insertion_order": 100,
                }
            ],
        },
        "extensions": {},
    },
}


def test_variables_in_why(page_and_server: tuple[Any, Any, Path], tmp_path: Path) -> None:
    """The MVU table: current values edited with CAS, a past round's values read-only."""
    from selenium.webdriver.support.ui import Select

    page, server, _card = page_and_server
    card_file = tmp_path / "Ada.json"
    card_file.write_text(json.dumps(MVU_CARD))
    page.open("#/library")
    page.wait(lambda: page.driver.execute_script("return document.body.dataset.ready"), "library")
    page.driver.find_element("css selector", "input[type=file]").send_keys(str(card_file))
    page.wait(lambda: page.by_role("listitem", "Ada"), "Ada listed")
    # A display-only regex script of the card: it changes what is shown, never the history.
    ada = next(
        c
        for c in server.call("GET", "/pmp-dsh-tavern/api/v1/characters")["characters"]
        if c["name"] == "Ada"
    )
    script = {"scriptName": "answer", "findRegex": "/Reply (\\d+)/g", "replaceString": "Answer $1",
              "placement": [2], "markdownOnly": True, "disabled": False}  # fmt: skip
    server.call(
        "PUT",
        f"/pmp-dsh-tavern/api/v1/characters/{ada['id']}/regex-scripts",
        {"regexScripts": [script]},
    )
    new_playthrough(page, "Ada")
    send(page, "Good evening.")
    assert body(replies(page)[-1]).startswith("Answer 1 to: Good evening."), body(replies(page)[-1])
    catalog = server.call("GET", "/pmp-dsh-tavern/api/v2/workspace/files?path=catalog.json")
    root = json.loads(catalog["content"])["playthroughs"][0]["ext"]["pmpDshTavern"]["rootSessionId"]
    stored = server.call("GET", f"/pmp-dsh-tavern/api/v2/sessions/{root}/messages")["messages"]
    assert [m["text"] for m in stored if m["role"] == "assistant"] == ["Reply 1 to: Good evening."]

    def open_why(value: str) -> Any:
        if page.one("button", "Why").get_attribute("aria-expanded") != "true":
            page.one("button", "Why").click()
        why = page.one("region", "Why")
        select = page.wait(lambda: why.find_elements("css selector", "select"), "rounds")[0]
        if select.get_attribute("value") != value:
            Select(select).select_by_value(value)
        return why

    why = open_why("__next__")
    hp = page.wait(
        lambda: [
            e for e in why.find_elements("css selector", "input") if e.accessible_name == "hp"
        ],
        "hp row",
    )[0]
    assert hp.get_attribute("value") == "100"
    edit_value(page, why, "hp", "80")
    page.shot("08-variables")

    page.driver.refresh()
    page.wait(
        lambda: page.driver.execute_script("return document.body.dataset.ready") == "play",
        "reloaded",
    )
    why = open_why("__next__")
    page.wait(
        lambda: [
            e
            for e in why.find_elements("css selector", "input")
            if e.accessible_name == "hp" and e.get_attribute("value") == "80"
        ],
        "hp is 80 after reload",
    )
    # The round's own snapshot: what the reply saw, read-only.
    select = why.find_element("css selector", "select")
    round_value = Select(select).options[0].get_attribute("value")
    why = open_why(round_value)
    page.wait(
        lambda: (
            "read-only" in why.text
            and any(
                r.text.split() == ["hp", "100"] for r in why.find_elements("css selector", "tr")
            )
        ),
        "historical hp 100",
    )
    assert not [e for e in why.find_elements("css selector", "input") if e.accessible_name == "hp"]
    assert page.problems() == []


def test_two_tabs_stay_consistent(page_and_server: tuple[Any, Any, Path]) -> None:
    """A swipe in one tab shows in the other; a swipe back there shows in the first."""
    page, server, card = page_and_server
    seraphina_playthrough(page, server, card)
    send(page, "Tell me about the forest of Eldoria.")
    url = page.driver.current_url
    first = page.driver.current_window_handle
    page.driver.switch_to.new_window("tab")
    page.driver.get(url)
    second = page.driver.current_window_handle
    page.wait(lambda: swipe_label(page) == "1/1", "second tab shows the reply")

    page.driver.switch_to.window(first)
    page.one("button", "Regenerate").click()
    page.wait(
        lambda: swipe_label(page) == "2/2" and "Reply 2" in body(replies(page)[-1]),
        "swiped in tab 1",
    )
    page.driver.switch_to.window(second)
    page.wait(
        lambda: swipe_label(page) == "2/2" and "Reply 2" in body(replies(page)[-1]), "tab 2 follows"
    )
    page.one("button", "Previous swipe").click()
    page.wait(lambda: swipe_label(page) == "1/2", "swiped back in tab 2")
    page.driver.switch_to.window(first)
    page.wait(
        lambda: swipe_label(page) == "1/2" and "Reply 1" in body(replies(page)[-1]), "tab 1 follows"
    )
    # Both tabs may record the same reply at once: one timeline write then loses its revision
    # check (409) and the client re-reads and replays; that is the only failure allowed here.
    problems = [p for p in page.problems() if not ("timeline.json" in p and "409" in p)]
    assert problems == []


# Every Markdown render answers only after the renders asked for later: a draw started earlier
# (from older messages) then always finishes last, as it can on a loaded machine.
RENDERS_ANSWER_NEWEST_FIRST = """
  const realFetch = window.fetch.bind(window)
  let issued = 0
  const answered = new Set()
  const later = (n) => Array.from({ length: issued - n }, (_, i) => n + 1 + i)
  window.fetch = async (url, init) => {
    if (!String(url).includes('/webui/api/render')) return realFetch(url, init)
    const n = ++issued
    window.rendersPending = (window.rendersPending || 0) + 1
    const response = await realFetch(url, init)
    await new Promise((done) => setTimeout(done, 250))
    while (later(n).some((m) => !answered.has(m))) await new Promise((done) => setTimeout(done, 10))
    answered.add(n)
    window.rendersPending -= 1
    return response
  }
"""


def test_replies_keep_their_actions_when_renders_answer_out_of_order(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    """Each new reply, not the one before it, carries the swipe counter and Regenerate, however
    the overlapping redraws of a finished turn come back."""
    page, server, card = page_and_server
    seraphina_playthrough(page, server, card)
    page.driver.execute_script(RENDERS_ANSWER_NEWEST_FIRST)
    for turn, text in enumerate(("Tell me about the forest.", "What lives in the glade?"), 1):
        send(page, text)

        def last_reply_has_actions(turn: int = turn) -> bool:
            shown = replies(page)
            if len(shown) != turn:
                return False
            names = [b.accessible_name for b in shown[-1].find_elements("css selector", "button")]
            earlier = [
                b.accessible_name
                for r in shown[:-1]
                for b in r.find_elements("css selector", "button")
            ]
            return "Regenerate" in names and "Regenerate" not in earlier

        page.wait(last_reply_has_actions, f"reply {turn} with its actions")
        # The last mount is final: once every render has answered, it still holds.
        page.wait(
            lambda: page.driver.execute_script("return window.rendersPending") == 0, "renders"
        )
        assert last_reply_has_actions(), f"reply {turn} lost its actions to an older redraw"
    assert swipe_label(page) == "1/1"
    page.one("button", "Regenerate").click()
    page.wait(lambda: swipe_label(page) == "2/2", "second swipe")
    assert page.problems() == []


def test_edit_continue_and_retry(page_and_server: tuple[Any, Any, Path]) -> None:
    """Display-layer edit, continue from an earlier reply, and retry a request stopped early."""
    page, server, card = page_and_server
    seraphina_playthrough(page, server, card)
    for text in ("First question.", "Second question.", "Third question."):
        send(page, text)

    # Edit changes what is shown, never the history the model sees.
    replies(page)[0].find_element("xpath", ".//button[normalize-space()='Edit']").click()
    editor = page.wait(lambda: [e for e in page.by_role("textbox", "Edit")], "editor")[0]
    editor.clear()
    editor.send_keys("*A shown-only rewrite.*")
    page.one("button", "Save").click()
    page.wait(lambda: body(replies(page)[0]) == "A shown-only rewrite.", "edited reply")
    assert "edited" in replies(page)[0].text

    # Continue from the first reply: later messages leave the path, the chat goes on from there.
    replies(page)[0].find_element(
        "xpath", ".//button[normalize-space()='Continue from here']"
    ).click()
    page.wait(lambda: len(replies(page)) == 1, "back at the first reply")
    send(page, "A different second question.")
    page.driver.refresh()
    page.wait(lambda: len(replies(page)) == 2, "path after reload")
    log = page.driver.find_element("css selector", ".log").text
    assert "A different second question." in log and "Third question." not in log

    # Stop before any word arrived, then Retry: the same text is sent again on a fresh branch.
    box = page.one("textbox", "Message")
    box.send_keys("Please hesitate first.")
    page.one("button", "Send").click()
    page.wait(lambda: page.one("button", "Stop").get_attribute("disabled") is None, "turn running")
    page.one("button", "Stop").click()
    page.one("button", "Retry", seconds=20).click()
    page.wait(
        lambda: len(replies(page)) == 3 and "Please hesitate first." in body(replies(page)[-1]),
        "retried reply",
    )
    page.driver.refresh()
    page.wait(lambda: len(replies(page)) == 3, "retry kept after reload")
    assert not page.by_role("button", "Retry")
    assert page.problems() == []


#: Installed in the page: the answer to the first request whose URL holds ``arguments[0]`` is
#: lost — after the server acted on it (``arguments[1]`` false) or before it left (true).
LOSE_ONE_ANSWER = """
  const [part, before] = arguments
  const real = window.fetch
  let lost = false
  window.fetch = async (url, init) => {
    const hit = !lost && String(url).includes(part)
    if (hit) lost = true
    if (hit && before) throw new TypeError('Failed to fetch (simulated)')
    const response = await real(url, init)
    if (hit) throw new TypeError('Failed to fetch (simulated, after the server answered)')
    return response
  }
"""


def send_failing(page: Any, text: str, what: str) -> None:
    """Type ``text``, press Send, and wait for the (simulated) network failure to show."""
    page.one("textbox", "Message").send_keys(text)
    page.one("button", "Send").click()
    page.wait(lambda: "NETWORK_ERROR" in page.driver.find_element("id", "error").text, what)
    assert page.one("textbox", "Message").get_attribute("value") == text, "the text was lost"


def test_first_send_retried_after_a_lost_answer(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    """Materialize answered but the answer lost: Send again reuses the same reservation (one
    session, one message). A first send that never reached the server: Back to opening releases
    the reservation and keeps the text."""
    page, server, _card = page_and_server
    character_id = server.call(
        "POST", "/pmp-dsh-tavern/api/v1/characters/import?filename=Ada.json", MVU_CARD
    )["character"]["id"]
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Ada"), "Ada listed")
    new_playthrough(page, "Ada")
    assert page.one("region", "Opening variables")

    page.driver.execute_script(LOSE_ONE_ANSWER, "/materialize", False)
    send_failing(page, "Good evening.", "the lost answer")
    # The server did reserve the session; the page says so and offers to go back.
    page.one("button", "Back to opening")
    draft = draft_of(server)
    assert draft["draft"]["status"] == "materialized"
    reserved = draft["draft"]["materialize"]["sessionId"]
    assert catalog_row(server)["rootSessionId"] == reserved
    page.shot("10-first-send-lost")
    page.one("button", "Send").click()
    page.wait(
        lambda: len(replies(page)) == 1 and "to: Good evening." in body(replies(page)[-1]),
        "the reply after the retry",
    )
    draft = draft_of(server)
    assert draft["draft"]["materialize"]["sessionId"] == reserved
    assert draft["draft"]["releasedSessionIds"] == []
    stored = server.call("GET", f"/pmp-dsh-tavern/api/v2/sessions/{reserved}/messages")["messages"]
    assert [m["text"] for m in stored if m["origin"]["kind"] == "user"] == ["Good evening."]
    assert page.one("textbox", "Message").get_attribute("value") == ""

    # A second run whose first message never reaches the server: back to the opening, text kept.
    page.open(f"#/character/{character_id}")
    page.one("button", "New playthrough").click()
    page.wait(lambda: page.by_role("region", "Opening variables"), "the second run's opening")
    assert page.driver.find_element("tag name", "h1").text == "Playthrough 2"
    page.driver.execute_script(LOSE_ONE_ANSWER, "/user-message", True)
    send_failing(page, "Hello again.", "the failed send")
    page.one("button", "Back to opening").click()
    page.wait(lambda: page.by_role("region", "Opening variables"), "the opening again")
    assert page.one("textbox", "Message").get_attribute("value") == "Hello again."
    second = draft_of(server, 1)
    assert second["draft"]["status"] == "open" and second["draft"]["lastInput"] == "Hello again."
    assert len(second["draft"]["releasedSessionIds"]) == 1
    assert "rootSessionId" not in catalog_row(server, 1)
    # Still editable. Another client changes the draft first: the page's cached revision is stale,
    # so its edit is refused (409) and replayed on the fresh draft, not lost.
    server.call(
        "PUT",
        f"/pmp-dsh-tavern/api/v2/drafts/{second['draft']['id']}",
        {"expectedRevision": second["draft"]["revision"], "assemblyPresetId": None},
    )
    edit_value(page, page.one("region", "Opening variables"), "gold", "7")
    replayed = draft_of(server, 1)
    assert replayed["draft"]["revision"] == second["draft"]["revision"] + 2
    assert replayed["opening"]["variables"]["stat_data"]["gold"] == 7
    page.one("button", "Send").click()
    page.wait(
        lambda: len(replies(page)) == 1 and "to: Hello again." in body(replies(page)[-1]),
        "the second run's first reply",
    )
    root = catalog_row(server, 1)["rootSessionId"]
    assert root not in draft_of(server, 1)["draft"]["releasedSessionIds"]
    assert current_variables(server, root)["gold"] == 7
    # The replayed edit's first try is the only failure allowed.
    problems = page.problems()
    assert [p for p in problems if not ("/drafts/" in p and "409" in p)] == [], problems
    assert any("/drafts/" in p and "409" in p for p in problems), "no conflict was replayed"
