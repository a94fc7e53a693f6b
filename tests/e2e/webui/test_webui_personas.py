"""Personas in Chromium (issue 30, item 3): create two, edit one, give it an avatar and a lore
book, make it the default — the next chat's request carries its description — then bind the other
to the chat in Session setup, placed in the chat at depth 1, and the next request carries that
one instead. Driven from ``/``; the API and the fake model's record only check results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

pytestmark = pytest.mark.slow
V1 = "/pmp-dsh-tavern/api/v1"
TOARU = (
    Path(__file__).resolve().parents[3].parent
    / "shared" / "sillytavern-corpus" / "sillytavern-repo" / "tag-1.0.0" / "Toaru.json"
)  # fmt: skip


def user_named(server: Any, name: str) -> dict[str, Any]:
    found = [u for u in server.call("GET", f"{V1}/users")["users"] if u["name"] == name]
    assert len(found) == 1
    return dict(server.call("GET", f"{V1}/users/{found[0]['id']}")["user"])


def new_persona(page: Any, name: str, description: str) -> None:
    page.one("button", "New persona").click()
    page.fill("Name", name)
    page.fill("Description", description)


def save_persona(page: Any, name: str) -> None:
    page.one("button", "Save persona").click()
    page.wait(lambda: page.by_role("listitem", name), f"{name} listed")
    page.wait(lambda: not page.by_role("button", "Save persona"), "the editor closed")


def sent(fake_llm: Any) -> list[dict[str, Any]]:
    return list(fake_llm.bodies[-1]["messages"])


def test_personas_create_edit_default_and_bind(
    browser: Any, server: Any, fake_llm: Any, seraphina: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.support.ui import Select

    page = browser
    picture = tmp_path / "ada.png"
    Image.new("RGB", (500, 500), (90, 140, 60)).save(picture)
    page.open()
    page.ready("library")
    page.import_file(seraphina, "Seraphina")
    page.import_file(TOARU, "Toaru")
    page.one("button", "Personas").click()
    page.ready("personas")
    # Bad input first: a persona needs a name; what was typed stays.
    new_persona(page, "", "Nobody in particular.")
    page.one("button", "Save persona").click()
    editor = page.driver.find_element("css selector", ".persona-editor")
    page.wait(lambda: "needs a name" in editor.text, "the name error")
    assert page.field("Description").get_attribute("value") == "Nobody in particular."
    page.fill("Name", "Ada")
    page.fill("Description", "Ada is a ranger from the north.")
    page.field("Choose a picture").send_keys(str(picture))
    preview = page.driver.find_element("css selector", ".persona-editor .avatar-preview")
    page.wait(lambda: (preview.get_attribute("src") or "").startswith("data:image/"), "preview")
    Select(page.field("Persona lore book")).select_by_visible_text("Toaru")
    save_persona(page, "Ada")
    new_persona(page, "Bea", "Bea is a baker who hums.")
    Select(page.field("Description position")).select_by_value("atDepth")
    page.fill("Depth", "1")
    Select(page.field("Role")).select_by_value("system")
    save_persona(page, "Bea")
    # Edit Ada.
    page.one("button", "Edit Ada").click()
    page.wait(lambda: page.field("Name").get_attribute("value") == "Ada", "Ada in the editor")
    page.fill("Description", "Ada is a ranger from the far north.")
    save_persona(page, "Ada")
    page.one("button", "Set as default: Ada").click()
    page.wait(lambda: "default for new chats" in page.by_role("listitem", "Ada")[0].text, "default")
    page.shot("personas")
    ada, bea = user_named(server, "Ada"), user_named(server, "Bea")
    assert ada["description"] == "Ada is a ranger from the far north."
    assert ada["avatar"].startswith("data:image/")
    assert (bea["descriptionPosition"], bea["descriptionDepth"]) == ("atDepth", 1)
    books = server.call("GET", f"{V1}/users/{ada['id']}/world-books")["binding"]["worldBookIds"]
    assert [b["name"] for b in server.call("GET", f"{V1}/world-books")["worldBooks"]
            if b["id"] in books] == ["Toaru"]  # fmt: skip
    assert server.call("GET", f"{V1}/user-selection")["selection"] == {"userId": ada["id"]}
    # A new chat starts with the default persona: its description is in the request.
    page.open("#/library")
    page.ready("library")
    page.new_playthrough("Seraphina")
    page.one("textbox", "Message").send_keys("Hello there.")
    page.one("button", "Send").click()
    page.wait(lambda: page.replies() and "Hello there." in page.replies()[-1].text, "reply 1")
    assert "far north" in json.dumps(sent(fake_llm))
    # Bind Bea to this chat in Session setup; the next request carries hers, in the chat.
    page.one("button", "Session setup").click()
    Select(page.field("Persona")).select_by_visible_text("Bea")
    session = page.head_session()
    page.wait(
        lambda: (
            server.call("GET", f"{V1}/user-selection?sessionId={session}")["selection"]
            == {"userId": bea["id"]}
        ),
        "Bea bound to the chat",
    )
    page.one("textbox", "Message").send_keys("Still there?")
    page.one("button", "Send").click()
    page.wait(lambda: page.replies() and "Still there?" in page.replies()[-1].text, "reply 2")
    messages = sent(fake_llm)
    text = json.dumps(messages)
    assert "Bea is a baker who hums." in text and "far north" not in text
    # At depth 1: after the earlier exchange, right before the newest user message.
    where = next(i for i, m in enumerate(messages) if "Bea is a baker" in str(m["content"]))
    assert where == len(messages) - 2, [m["role"] for m in messages]
    assert page.problems() == []
