"""Browser test: a template of another card applied to a playthrough's session is refused, and the
setup panel says why instead of applying it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import CORPUS

pytestmark = pytest.mark.timeout(300)

SENSEI = CORPUS / "sillytavern-content" / "default_CodingSensei.png"


def choose(page: Any, label: str, option: str) -> None:
    from selenium.webdriver.support.select import Select

    Select(page.one("combobox", label)).select_by_visible_text(option)


def play_one_turn(page: Any, text: str) -> str:
    page.one("textbox", "Message").send_keys(text)
    page.one("button", "Send").click()
    page.wait(
        lambda: f"to: {text}" in page.driver.find_element("css selector", ".log").text, "reply"
    )
    return str(page.head_session())


def test_a_template_of_another_card_is_not_applied_to_a_playthrough(
    page_and_server: tuple[Any, Any, Path],
) -> None:
    page, server, card = page_and_server
    seraphina = server.import_card(card)
    sensei = server.import_card(SENSEI)
    sensei_name = server.call("GET", f"/pmp-dsh-tavern/api/v1/characters/{sensei}")["character"][
        "name"
    ]
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", sensei_name), "the second card listed")
    page.new_playthrough(sensei_name)
    play_one_turn(page, "Teach me.")
    page.one("button", "Session setup").click()
    page.one("textbox", "Template name").send_keys("Lesson setup")
    page.one("button", "Save as template").click()
    page.wait(
        lambda: any(
            t["name"] == "Lesson setup"
            for t in server.call("GET", "/pmp-dsh-tavern/api/v1/session-templates")["templates"]
        ),
        "template saved",
    )

    # A playthrough of Seraphina.
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
    session = play_one_turn(page, "Good evening.")
    page.one("button", "Session setup").click()
    choose(page, "Template", "Lesson setup")
    page.one("button", "Apply template").click()
    alert = page.wait(
        lambda: next(
            (
                el
                for el in page.driver.find_elements("css selector", "[role=alert]")
                if el.is_displayed() and el.accessible_name == "Template not applied"
            ),
            None,
        ),
        "the conflict shown",
    )
    text = alert.text
    assert "Playthrough 1" in text and "Seraphina" in text and sensei_name in text
    page.shot("template-conflict")
    # Nothing was applied: the session still plays Seraphina.
    bound = server.call("GET", f"/pmp-dsh-tavern/api/v1/character-selection?sessionId={session}")
    assert bound["selection"]["characterCardId"] == seraphina
    # The refusal is the answer the page expected, not a failure of the client.
    problems = [p for p in page.problems() if "session-configurations/apply" not in p]
    assert problems == []
