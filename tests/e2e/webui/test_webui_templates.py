"""Browser test: session templates in the setup panel (save, choose, apply, new chat from one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


def chosen(page: Any, label: str) -> str:
    """The text of the selected option of the setup panel's select named ``label``."""
    from selenium.webdriver.support.select import Select

    return str(Select(page.one("combobox", label)).first_selected_option.text)


def choose(page: Any, label: str, option: str) -> None:
    from selenium.webdriver.support.select import Select

    Select(page.one("combobox", label)).select_by_visible_text(option)


def test_session_templates(page_and_server: tuple[Any, Any, Path]) -> None:
    page, server, card = page_and_server
    character_id = server.import_card(card)
    preset = card.parent / "presets_openai_Default.json"
    preset_id = server.call(
        "POST", "/pmp-dsh-tavern/api/v1/import", {"content": preset.read_text(), "name": "Evening"}
    )["preset"]["id"]
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
    # A new playthrough is an opening draft: the first message gives it its session.
    page.one("textbox", "Message").send_keys("Good evening.")
    page.one("button", "Send").click()
    page.wait(
        lambda: "to: Good evening." in page.driver.find_element("css selector", ".log").text,
        "reply",
    )
    first = page.head_session()

    page.one("button", "Session setup").click()
    choose(page, "Preset", "Evening")
    page.wait(
        lambda: (
            server.call("GET", f"/pmp-dsh-tavern/api/v1/presets?sessionId={first}")["selectedId"]
            == preset_id
        ),
        "preset bound",
    )
    assert chosen(page, "Template") == "(none)"
    page.one("textbox", "Template name").send_keys("With the evening preset")
    page.one("button", "Save as template").click()
    page.wait(lambda: chosen(page, "Template") == "With the evening preset", "template saved")
    stored = server.call("GET", "/pmp-dsh-tavern/api/v1/session-templates")
    assert [t["name"] for t in stored["templates"]] == ["With the evening preset"]
    assert stored["templates"][0]["selection"]["presetId"] == preset_id

    # Unbind the preset here, then apply the template: the preset comes back.
    choose(page, "Preset", "(none)")
    page.wait(
        lambda: (
            server.call("GET", f"/pmp-dsh-tavern/api/v1/presets?sessionId={first}")["selectedId"]
            is None
        ),
        "preset unbound",
    )
    page.one("button", "Apply template").click()
    page.wait(lambda: chosen(page, "Preset") == "Evening", "template applied")
    page.shot("09-templates")

    # A new chat from the template: another playthrough of Seraphina with the preset bound.
    page.new_chat("New chat from template")
    page.wait(lambda: page.head_session() not in ("", "None", first), "new head")
    second = page.head_session()
    bound = server.call("GET", f"/pmp-dsh-tavern/api/v1/presets?sessionId={second}")
    assert bound["selectedId"] == preset_id
    picked = server.call("GET", f"/pmp-dsh-tavern/api/v1/character-selection?sessionId={second}")
    assert picked["selection"]["characterCardId"] == character_id
    page.open(f"#/character/{character_id}")
    page.wait(
        lambda: page.by_role("link", "Playthrough 2") or "Playthrough 2" in page.driver.page_source,
        "two runs",
    )
    assert page.problems() == []
