"""The preset editor (issue 30, item 4), driven from `/` by accessible names on a fresh data dir
with the practice provider; the API is called only to check results."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import CORPUS

pytestmark = pytest.mark.slow

V1 = "/pmp-dsh-tavern/api/v1"
V3 = "/pmp-dsh-tavern/api/v3"
#: SillyTavern's own default Chat Completion preset.
DEFAULT_PRESET = CORPUS / "sillytavern-repo" / "staging-1ac6780" / "presets_openai_Default.json"
AUX_TEXT = "Write the next reply briefly, in the present tense."


def prompt_names(page: Any) -> list[str]:
    (order,) = page.by_role("list", "Prompt order")
    return [li.get_attribute("aria-label") for li in order.find_elements("css selector", "li")]


def sent_cell(page: Any, sampler: str) -> str:
    rows = page.driver.find_elements(
        "css selector", f'.preset-admission tr[data-sampler="{sampler}"] td'
    )
    return str(rows[1].text) if len(rows) > 1 else ""


def test_edit_a_preset_save_it_as_new_use_it_and_play(
    practice_page: Any, practice_server: Any, seraphina: Path
) -> None:
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    page, server = practice_page, practice_server
    page.open()
    page.ready("library")
    page.import_file(DEFAULT_PRESET, "presets_openai_Default")
    page.import_file(seraphina, "Seraphina")
    (original,) = server.call("GET", f"{V1}/presets")["presets"]

    page.one("button", "Preset").click()
    page.ready("presets")
    assert Select(page.field("Chat Completion preset")).first_selected_option.text == (
        "presets_openai_Default"
    )
    # What is sent, before any edit: the stored temperature, and SillyTavern's "off" values.
    page.wait(lambda: sent_cell(page, "temperature") == "sent 1", "temperature sent as stored")
    assert "random" in page.one("table", "What is sent").text  # seed -1 is not sent

    # Samplers: a number box and its slider move together.
    page.fill("Temperature", "0.55")
    assert page.field("Temperature slider").get_attribute("value") == "0.55"
    page.fill("Max tokens", "222")
    page.wait(lambda: sent_cell(page, "temperature") == "sent 0.55", "the edit's admission")
    page.wait(lambda: sent_cell(page, "maxTokens") == "sent 222", "max tokens sent")
    # Out of range: the server's reason is shown where the sent values are, nothing is saved.
    page.fill("Top P", "1.5")
    page.wait(
        lambda: "topP must be at most 1" in page.one("region", "What is sent").text, "range said"
    )
    refused = page.problems()  # the refusal, and only it
    assert refused and all("preset-admission" in p and "400" in p for p in refused), refused
    page.fill("Top P", "1")

    # The prompt order: disable one, move another up (buttons, then the keyboard), edit its text.
    names = prompt_names(page)
    assert names[:4] == [
        "Main Prompt",
        "World Info (before)",
        "Persona Description",
        "Char Description",
    ]
    start = names.index("Auxiliary Prompt")
    page.field("Enable Main Prompt").click()
    for _ in range(3):
        page.one("button", "Move up: Auxiliary Prompt").click()
    assert prompt_names(page).index("Auxiliary Prompt") == start - 3
    page.by_role("listitem", "Auxiliary Prompt")[0].send_keys(Keys.ALT, Keys.ARROW_UP)
    for _ in range(start - 5):  # the moved row keeps the focus
        page.driver.switch_to.active_element.send_keys(Keys.ALT, Keys.ARROW_UP)
    page.wait(
        lambda: (
            prompt_names(page)[:3] == ["Main Prompt", "Auxiliary Prompt", "World Info (before)"]
        ),
        "moved by the keyboard",
    )
    page.one("button", "Edit Auxiliary Prompt").click()
    page.fill("Prompt", AUX_TEXT)
    page.one("button", "Done").click()

    # Save as new: the copy carries the edit; the original is untouched.
    page.fill("New preset name", "Brief")
    page.one("button", "Save as new preset").click()
    page.wait(
        lambda: 'Saved as "Brief".' in page.driver.find_element("tag name", "main").text, "saved"
    )
    presets = {p["name"]: p for p in server.call("GET", f"{V1}/presets")["presets"]}
    assert set(presets) == {"presets_openai_Default", "Brief"}
    kept = server.call("GET", f"{V1}/presets/{original['id']}")["preset"]
    assert (kept["sampling"]["temperature"], kept["sampling"]["maxTokens"]) == (1, 300)
    brief = server.call("GET", f"{V1}/presets/{presets['Brief']['id']}")["preset"]
    assert (brief["sampling"]["temperature"], brief["sampling"]["maxTokens"]) == (0.55, 222)
    by_id = {p["identifier"]: p for p in brief["prompts"]}
    assert by_id["main"]["enabled"] is False and by_id["nsfw"]["content"] == AUX_TEXT
    assert [p["identifier"] for p in brief["prompts"]][:3] == ["main", "nsfw", "worldInfoBefore"]
    # Its SillyTavern export keeps the original's other settings, with the edit where ST reads it.
    exported = server.call("GET", f"{V1}/presets/{brief['id']}/export")
    original_doc = json.loads(DEFAULT_PRESET.read_text(encoding="utf-8"))
    assert (
        exported["openai_max_tokens"] == 222
        and exported["new_chat_prompt"] == (original_doc["new_chat_prompt"])
    )

    page.shot("preset-editor")
    # Select it for new chats, then play one turn.
    assert Select(page.field("Chat Completion preset")).first_selected_option.text == "Brief"
    page.one("button", "Use this preset").click()
    page.wait(
        lambda: "In use by new chats" in page.driver.find_element("tag name", "main").text, "in use"
    )
    page.open("#/library")
    page.ready("library")
    page.new_playthrough("Seraphina")
    before = len(page.replies())
    page.one("textbox", "Message").send_keys("Hello.")
    page.one("button", "Send").click()
    page.wait(lambda: len(page.replies()) == before + 1, "the reply")

    # The round Why shows carries the new samplers and the new prompt order.
    session = page.head_session()
    (record,) = server.call("GET", f"{V3}/sessions/{session}/assemblies")["assemblies"]
    detail = server.call("GET", f"{V3}/sessions/{session}/assemblies/{record['recordId']}")
    parameters = detail["assembly"]["parameters"]
    assert (parameters["effective"]["temperature"], parameters["effective"]["maxTokens"]) == (
        0.55,
        222,
    )
    # The preset's parts in the request: the disabled main prompt is not sent, the Auxiliary
    # Prompt carries the edited text and now comes before the lore and the description.
    sections = [p["identifier"] for p in detail["sections"]]
    assert sections == ["nsfw", "worldInfoBefore", "charDescription", "greeting"]
    aux = detail["sections"][0]
    assert aux["sha256"] == hashlib.sha256(AUX_TEXT.encode()).hexdigest()
    sent = [e["content"] or "" for e in detail["request"]["assembly"]["entries"]]
    assert AUX_TEXT in sent
    main_text = original_doc["prompts"][0]["content"]
    assert not any(main_text in text for text in sent)
    assert page.problems() == []


def test_a_conflicting_save_keeps_the_edit_and_a_bad_number_is_named(
    practice_page: Any, practice_server: Any
) -> None:
    page, server = practice_page, practice_server
    page.open()
    page.ready("library")
    page.import_file(DEFAULT_PRESET, "presets_openai_Default")
    (summary,) = server.call("GET", f"{V1}/presets")["presets"]
    page.one("button", "Preset").click()
    page.ready("presets")
    page.wait(lambda: sent_cell(page, "temperature") == "sent 1", "the admission")

    # A box holding no number is named and nothing is saved.
    page.field("Frequency penalty").send_keys("e")
    page.one("button", "Save preset").click()
    page.wait(
        lambda: (
            "Frequency penalty: not a number" in page.driver.find_element("tag name", "main").text
        ),
        "the bad number named",
    )
    page.fill("Frequency penalty", "0.25")
    # Meanwhile the preset changes elsewhere: Save preset is refused and the edit stays.
    server.call("PUT", f"{V1}/presets/{summary['id']}", {"sampling": {"temperature": 1.9}})
    page.fill("Temperature", "0.3")
    page.one("button", "Save preset").click()
    page.wait(
        lambda: "changed elsewhere" in page.driver.find_element("tag name", "main").text, "the 409"
    )
    stored = server.call("GET", f"{V1}/presets/{summary['id']}")["preset"]["sampling"]
    assert (stored["temperature"], stored["frequencyPenalty"]) == (1.9, 0)
    assert page.field("Temperature").get_attribute("value") == "0.3"
    # Saving again replaces the other change, on purpose.
    page.one("button", "Save preset").click()
    page.wait(lambda: "Preset saved." in page.driver.find_element("tag name", "main").text, "saved")
    stored = server.call("GET", f"{V1}/presets/{summary['id']}")["preset"]["sampling"]
    assert (stored["temperature"], stored["frequencyPenalty"]) == (0.3, 0.25)
    # On a phone the editor stacks and nothing scrolls sideways.
    page.driver.set_window_size(390, 844)
    page.driver.refresh()
    page.ready("presets")
    page.wait(lambda: sent_cell(page, "temperature") == "sent 0.3", "the admission on a phone")
    width = "return [document.documentElement.scrollWidth, window.innerWidth]"
    scroll, inner = page.driver.execute_script(width)
    assert scroll <= inner, (scroll, inner)
    page.shot("phone-preset-editor")
    problems = page.problems()
    assert problems and all("409" in p and summary["id"] in p for p in problems), problems
