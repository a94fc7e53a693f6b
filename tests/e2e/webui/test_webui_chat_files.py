"""Playthrough menu in Chromium (issue 30, item 7): rename and duplicate a playthrough, export
its chat as a SillyTavern .jsonl and import that file on a second server with a fresh data
directory, where the imported story is shown and reaches the model. Driven from ``/``; the API
and the fake model's record only check results."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
V1 = "/pmp-dsh-tavern/api/v1"
V2 = "/pmp-dsh-tavern/api/v2"


def catalog(server: Any) -> list[dict[str, Any]]:
    """The playthroughs of the server's play folder (none while it has no catalog)."""
    import urllib.error

    try:
        doc = server.call("GET", f"{V2}/workspace/files?path=catalog.json")
    except urllib.error.HTTPError:
        return []
    return list(json.loads(doc["content"])["playthroughs"])


def send(page: Any, text: str) -> None:
    before = len(page.replies())
    page.one("textbox", "Message").send_keys(text)
    page.one("button", "Send").click()
    page.wait(
        lambda: len(page.replies()) == before + 1 and text in page.replies()[-1].text,
        f"the reply to {text!r}",
    )


def live_replies(page: Any) -> list[Any]:
    """Replies of this server's turns (not the imported story)."""
    return [r for r in page.replies() if "imported" not in (r.get_attribute("class") or "")]


def open_menu(page: Any) -> None:
    button = page.one("button", "Playthrough")
    if button.get_attribute("aria-expanded") != "true":
        button.click()


def messages_of(server: Any, session: str) -> list[dict[str, Any]]:
    return list(server.call("GET", f"{V2}/sessions/{session}/messages")["messages"])


def test_rename_duplicate_export_and_import_on_a_fresh_server(
    browser: Any, server: Any, fake_llm: Any, start_server: Any, seraphina: Path, tmp_path: Path
) -> None:
    page = browser
    page.open()
    page.ready("library")
    page.import_file(seraphina, "Seraphina")
    page.new_playthrough("Seraphina")
    send(page, "Where am I?")
    send(page, "Thank you, Seraphina.")
    # Rename.
    open_menu(page)
    page.fill("Playthrough name", "Night at the grove")
    page.one("button", "Rename").click()
    page.wait(lambda: page.one("button", "Playthrough") and page.driver.find_element(
        "css selector", ".chat-head h1").text == "Night at the grove", "the new title")  # fmt: skip
    assert [r.get("title") for r in catalog(server)] == ["Night at the grove"]
    original_id = catalog(server)[0]["id"]
    original_session = page.head_session()
    kept = len(messages_of(server, original_session))
    # Duplicate: a new run continuing from the last reply, on a session of its own.
    before = page.driver.current_url
    page.one("button", "Duplicate").click()
    page.wait(lambda: page.driver.current_url != before, "the copy opens")
    page.ready("play")
    page.wait(lambda: page.driver.find_element("css selector", ".chat-head h1").text
              == "Night at the grove (copy)", "the copy's title")  # fmt: skip
    page.wait(lambda: len(page.replies()) == 2, "the copied path")
    copy_session = page.head_session()
    assert copy_session != original_session
    send(page, "Only in the copy.")
    rows = catalog(server)
    assert sorted(r.get("title") for r in rows) == [
        "Night at the grove",
        "Night at the grove (copy)",
    ]
    assert len(messages_of(server, original_session)) == kept  # the original is untouched
    # Export the original's chat.
    page.open(f"#/play/{original_id}")
    page.ready("play")
    page.wait(lambda: len(page.replies()) == 2, "the original's replies")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    page.driver.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    open_menu(page)
    page.one("button", "Export chat").click()
    exported = page.wait(lambda: next(iter(downloads.glob("*.jsonl")), None), "the .jsonl file")
    time.sleep(0.3)
    assert exported.name == "Night at the grove.jsonl"
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert lines[0]["character_name"] == "Seraphina" and "chat_metadata" in lines[0]
    assert lines[1]["is_user"] is False and lines[1]["mes"].startswith("*You wake")
    said = [(m["is_user"], m["mes"]) for m in lines[2:]]
    assert said[0] == (True, "Where am I?") and said[2] == (True, "Thank you, Seraphina.")
    assert "Where am I?" in said[1][1] and said[1][0] is False
    assert all(m.get("swipes") == [m["mes"]] for m in lines[2:] if not m["is_user"])
    # A second server with a fresh data directory: import the card, then the chat.
    other = start_server("--data-dir", str(tmp_path / "second-data"))
    page.base = other.base
    page.open()
    page.ready("library")
    page.import_file(seraphina, "Seraphina")
    page.by_role("listitem", "Seraphina")[0].find_element("css selector", "a").click()
    page.ready("character")
    # Bad input first: a file that is no chat is refused, nothing is made.
    junk = tmp_path / "notes.jsonl"
    junk.write_text("just some notes\n")
    chat_input = page.driver.find_element(
        "css selector", 'input[type=file][aria-label="Chat file"]'
    )
    assert page.one("button", "Import chat")
    chat_input.send_keys(str(junk))
    page.wait(lambda: "not a SillyTavern chat file" in page.driver.find_element("id", "error").text,
              "the refusal")  # fmt: skip
    second = type(server)(other.base)  # the conftest's Api, on the second server
    assert catalog(second) == []
    chat_input = page.driver.find_element(
        "css selector", 'input[type=file][aria-label="Chat file"]'
    )
    chat_input.send_keys(str(exported))
    page.ready("play")
    log = page.driver.find_element("css selector", ".log")
    page.wait(lambda: "Thank you, Seraphina." in log.text, "the imported story shown")
    imported = page.driver.find_elements("css selector", ".msg.imported")
    assert len(imported) == 5  # the greeting and two exchanges
    rows = catalog(second)
    assert len(rows) == 1 and rows[0]["title"] == "Night at the grove"
    session = rows[0]["ext"]["pmpDshTavern"]["rootSessionId"]
    binding = second.call("GET", f"{V2}/sessions/{session}/import-context")["binding"]
    assert binding["qaCount"] == 2 and binding["state"] == "pending"
    page.one("textbox", "Message").send_keys("Do you remember me?")
    page.one("button", "Send").click()
    page.wait(lambda: any("Do you remember me?" in r.text for r in live_replies(page)), "reply")
    request = json.dumps(fake_llm.bodies[-1]["messages"])
    assert "Thank you, Seraphina." in request and "Do you remember me?" in request
    page.shot("imported-chat")
    assert [p for p in page.problems() if "not a SillyTavern" not in p] == []
