"""The character editor in Chromium (issue 30, item 1): a card made from scratch with greetings,
a depth prompt and an avatar, then played; an edit that meets a change made elsewhere (409) and
keeps what was typed; the PNG export re-imported through the page. Driven from ``/`` by
accessible names; the API is called only to check results (and once to make the conflict)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from innkeeper_tavern.pure.formats.png import read_card_text

pytestmark = pytest.mark.slow
V1 = "/pmp-dsh-tavern/api/v1"


def card_of(server: Any, name: str) -> dict[str, Any]:
    """The stored card named ``name`` (checked over HTTP)."""
    listing = server.call("GET", f"{V1}/characters")["characters"]
    matches = [c for c in listing if c["name"] == name]
    assert len(matches) == 1, [c["name"] for c in listing]
    return dict(server.call("GET", f"{V1}/characters/{matches[0]['id']}")["character"])


def save_and_wait(page: Any, view: str) -> None:
    page.one("button", "Save character").click()
    page.ready(view)


def download_to(page: Any, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page.driver.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)}
    )


def wait_for_file(page: Any, folder: Path, suffix: str) -> Path:
    def done() -> Path | None:
        files = [p for p in folder.iterdir() if p.name.endswith(suffix)]
        return files[0] if files else None

    found: Path = page.wait(done, f"a downloaded {suffix}")
    time.sleep(0.2)  # the browser renames the finished file into place
    return found


def test_create_a_card_with_greetings_and_an_avatar_then_play_it(
    browser: Any, server: Any, fake_llm: Any, tmp_path: Path
) -> None:
    page = browser
    picture = tmp_path / "wren.jpg"
    Image.new("RGB", (600, 300), (30, 90, 160)).save(picture, "JPEG")
    page.open()
    page.ready("library")
    page.one("button", "New character").click()
    page.ready("editor")
    page.fill("Name", "Wren")
    page.fill("Description", "A night-watch bard of the river town.")
    page.fill("Personality", "Wry, patient.")
    page.fill("Scenario", "The bridge at midnight.")
    page.fill("First message", "Hello from Wren.")
    for _ in range(3):
        page.one("button", "Add greeting").click()
    page.fill("Alternate greeting 1", "Second hello.")
    page.fill("Alternate greeting 2", "Third hello.")
    page.fill("Alternate greeting 3", "Drop me.")
    # Remove the third, then move the second above the first.
    page.by_role("button", "Remove greeting")[2].click()
    page.wait(lambda: len(page.by_role("button", "Remove greeting")) == 2, "two greetings left")
    page.by_role("button", "Move up")[1].click()
    assert page.field("Alternate greeting 1").get_attribute("value") == "Third hello."
    page.fill("Example dialogue", "<START>\n{{char}}: Evening.")
    page.fill("System prompt", "Write as Wren.")
    page.fill("Post-history instructions", "Stay in character.")
    page.fill("Creator notes", "Made in the browser test.")
    page.fill("Tags", "bard, night")
    page.fill("Creator", "tester")
    page.fill("Version", "1.2")
    page.fill("Depth prompt", "Wren hums an old tune.")
    page.fill("Depth", "1")
    from selenium.webdriver.support.ui import Select

    Select(page.field("Role")).select_by_value("user")
    page.field("Choose a picture").send_keys(str(picture))
    page.wait(
        lambda: (page.driver.find_element("css selector", ".avatar-preview").get_attribute("src")
                 or "").startswith("blob:"),
        "the avatar preview",
    )  # fmt: skip
    page.shot("editor-new-character")
    save_and_wait(page, "character")
    card = card_of(server, "Wren")
    data = card["data"]
    assert data["firstMessage"] == "Hello from Wren."
    assert data["alternateGreetings"] == ["Third hello.", "Second hello."]
    assert data["tags"] == ["bard", "night"]
    assert (data["creator"], data["characterVersion"]) == ("tester", "1.2")
    assert data["systemPrompt"] == "Write as Wren."
    assert data["postHistoryInstructions"] == "Stay in character."
    assert data["messageExample"] == "<START>\n{{char}}: Evening."
    assert data["extensions"]["depth_prompt"] == {
        "prompt": "Wren hums an old tune.",
        "depth": 1,
        "role": "user",
    }
    assert card["hasCover"] is True
    _status, png = raw(server, f"{V1}/characters/{card['id']}/png")
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (200, 300)  # cropped to 2:3 around the centre
    # Play it: the greetings are the card's, in the order chosen.
    page.one("button", "New playthrough").click()
    page.wait(lambda: "Hello from Wren." in page.driver.find_element("css selector", ".log").text,
              "the first greeting")  # fmt: skip
    page.one("button", "Next greeting").click()
    page.wait(lambda: "Third hello." in page.driver.find_element("css selector", ".log").text,
              "the second greeting")  # fmt: skip
    page.one("textbox", "Message").send_keys("Good evening.")
    page.one("button", "Send").click()
    page.ready("play")
    page.wait(lambda: page.replies() and "Good evening." in page.replies()[-1].text, "the reply")
    sent = json.dumps(fake_llm.bodies[-1]["messages"])
    assert "Wren hums an old tune." in sent and "A night-watch bard" in sent
    assert page.problems() == []


def raw(server: Any, path: str) -> tuple[int, bytes]:
    import urllib.request

    with urllib.request.urlopen(server.base + path, timeout=10) as response:
        return response.status, response.read()


def test_a_conflicting_edit_keeps_the_form_and_the_png_export_reimports(
    browser: Any, server: Any, tmp_path: Path
) -> None:
    page = browser
    page.open()
    page.ready("library")
    page.one("button", "New character").click()
    page.ready("editor")
    # Bad input first: no name is refused in the page, nothing is created, nothing lost.
    page.fill("Description", "Keeps the lantern.")
    page.one("button", "Save character").click()
    page.wait(lambda: "needs a name" in page.driver.find_element("css selector", ".notice").text,
              "the name error")  # fmt: skip
    assert page.field("Description").get_attribute("value") == "Keeps the lantern."
    assert server.call("GET", f"{V1}/characters")["characters"] == []
    page.fill("Name", "Ada")
    save_and_wait(page, "character")
    page.one("button", "Edit character").click()
    page.ready("editor")
    page.fill("Description", "Mine: keeps the lantern lit.")
    # Meanwhile the card changes elsewhere (the one API write: it makes the conflict).
    card = card_of(server, "Ada")
    server.call("PATCH", f"{V1}/characters/{card['id']}", {"scenario": "Theirs."})
    page.one("button", "Save character").click()
    alert = page.wait(
        lambda: [n for n in page.driver.find_elements("css selector", ".notice.failed")
                 if n.is_displayed() and "changed elsewhere" in n.text],
        "the conflict message",
    )[0]  # fmt: skip
    assert "RESOURCE_REVISION_CONFLICT" in alert.text
    page.shot("editor-conflict")
    assert page.field("Description").get_attribute("value") == "Mine: keeps the lantern lit."
    assert card_of(server, "Ada")["data"]["description"] == "Keeps the lantern."
    # Saving again is the player's choice: the edit lands.
    page.one("button", "Save character").click()
    page.wait(lambda: card_of(server, "Ada")["data"]["description"].startswith("Mine"), "saved")
    # Export PNG and import it again through the library.
    downloads = tmp_path / "downloads"
    download_to(page, downloads)
    page.one("link", "Export PNG").click()
    exported = wait_for_file(page, downloads, ".png")
    chunks = read_card_text(exported.read_bytes()).payloads
    chara, ccv3 = json.loads(chunks["chara"]), json.loads(chunks["ccv3"])
    assert (chara["spec"], chara["spec_version"]) == ("chara_card_v2", "2.0")
    assert ccv3["spec"] == "chara_card_v3"
    assert (
        chara["data"]["description"]
        == ccv3["data"]["description"]
        == ("Mine: keeps the lantern lit.")
    )
    page.one("link", "Export JSON").click()
    as_json = json.loads(wait_for_file(page, downloads, ".json").read_text())
    assert as_json["data"]["description"] == "Mine: keeps the lantern lit."
    page.open("#/library")
    page.ready("library")
    page.import_file(exported, "Ada")
    listing = server.call("GET", f"{V1}/characters")["characters"]
    assert [c["name"] for c in listing].count("Ada") == 2
    problems = page.problems()
    # The refused save is the 409 the test provoked; nothing else failed.
    assert [p for p in problems if "409" not in p] == [], problems
