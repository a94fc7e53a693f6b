"""Looks in Chromium (issue 30, item 9): the dark theme follows the system and Settings → Theme
overrides it (kept after a reload); every screen fits a 390 × 844 phone without horizontal
scrolling, and works on the desktop. Screenshots of both are saved in the shots folder
(``INNKEEPER_WEBUI_SHOTS``: phone-*.png, desktop-*.png)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.slow
LIGHT_BG = "rgb(247, 243, 236)"
DARK_BG = "rgb(23, 19, 15)"


def background(page: Any) -> str:
    return str(page.driver.execute_script("return getComputedStyle(document.body).backgroundColor"))


def system_scheme(page: Any, scheme: str) -> None:
    page.driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
    )


def theme(page: Any, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(page.field("Theme")).select_by_value(value)


def test_dark_theme_follows_the_system_and_the_settings_switch(browser: Any) -> None:
    page = browser
    system_scheme(page, "light")
    page.open("#/settings")
    page.ready("settings")
    assert background(page) == LIGHT_BG
    system_scheme(page, "dark")  # "Follow the system" is the default
    page.wait(lambda: background(page) == DARK_BG, "dark with the system")
    system_scheme(page, "light")
    theme(page, "dark")
    page.wait(lambda: background(page) == DARK_BG, "dark by the switch")
    page.driver.refresh()
    page.ready("settings")
    assert background(page) == DARK_BG  # kept in this browser
    assert page.field("Theme").get_attribute("value") == "dark"
    system_scheme(page, "dark")
    theme(page, "light")
    page.wait(lambda: background(page) == LIGHT_BG, "light wins over a dark system")
    theme(page, "system")
    page.wait(lambda: background(page) == DARK_BG, "the system's again")
    page.shot("desktop-settings-dark")
    assert page.problems() == []


def fits(page: Any) -> tuple[int, int]:
    return tuple(  # type: ignore[return-value]
        page.driver.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
    )


def visit_all(page: Any, prefix: str, play_hash: str, character_hash: str) -> None:
    """Open every screen, check it fits the width, and save its screenshot."""
    screens = [
        ("library", "#/library", "library"),
        ("character", character_hash, "character"),
        ("editor", character_hash.replace("#/character/", "#/edit/"), "editor"),
        ("personas", "#/personas", "personas"),
        ("settings", "#/settings", "settings"),
        ("play", play_hash, "play"),
    ]
    for name, hash_path, view in screens:
        page.open(hash_path)
        page.ready(view)
        if name == "play":
            page.wait(lambda: page.replies(), "the reply shown")
        width, inner = fits(page)
        assert width <= inner, f"{prefix} {name}: {width} px wide in a {inner} px window"
        page.shot(f"{prefix}-{name}")
    # The chat with its menus and panels open still fits.
    for button in ("Playthrough", "Session setup", "Why"):
        page.one("button", button).click()
    page.wait(lambda: page.by_role("region", "Why"), "the Why panel")
    width, inner = fits(page)
    assert width <= inner, f"{prefix} play with panels: {width} > {inner}"
    page.shot(f"{prefix}-play-panels")


def test_phone_and_desktop_layouts_have_no_horizontal_scroll(browser: Any, server: Any) -> None:
    page = browser
    page.open()
    page.ready("library")
    page.one("button", "New character").click()
    page.ready("editor")
    page.fill("Name", "Wren of the Very Long Name That Could Overflow a Narrow Phone Screen")
    page.fill("First message", "Hello from Wren. " + "averyveryverylongwordwithoutanyspaces" * 3)
    page.one("button", "Save character").click()
    page.ready("character")
    character_hash = page.driver.execute_script("return location.hash")
    page.one("button", "New playthrough").click()
    page.ready("play")
    page.one("textbox", "Message").send_keys("Good evening.")
    page.one("button", "Send").click()
    page.wait(lambda: page.replies() and "Good evening." in page.replies()[-1].text, "reply")
    play_hash = page.driver.execute_script("return location.hash")
    page.driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True},
    )
    try:
        assert fits(page)[1] == 390
        visit_all(page, "phone", play_hash, character_hash)
    finally:
        page.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    page.driver.set_window_size(1280, 900)
    visit_all(page, "desktop", play_hash, character_hash)
    assert page.problems() == []
