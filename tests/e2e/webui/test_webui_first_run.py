"""The first run, as a new player does it (issue 26): a fresh data directory, no provider flag,
nothing arranged over HTTP — open ``/``, import or try a card, play; connect a model from
Settings → Model; move the play folder. The test calls the API only to check results."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

#: A key no part of the system may repeat anywhere but the settings file.
MARKER_KEY = "sk-innkeeper-marker-9d41c7e2f08babcd"
WRONG_KEY = "sk-not-the-right-one-0000"
REFUSAL = "Incorrect API key provided (fake server)"
MODELS = ["fake-small", "fake-large"]


class FakeOpenAI:
    """An OpenAI-compatible server in a thread: ``GET /v1/models`` and streaming
    ``POST /v1/chat/completions``, both refusing any key but :data:`MARKER_KEY` with a 401 and
    its own reason; every request is recorded (path, key, model)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _refused(self) -> bool:
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if key == MARKER_KEY:
                    return False
                body = json.dumps({"error": {"message": REFUSAL, "code": "invalid_api_key"}})
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())
                return True

            def do_GET(self) -> None:
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization")})
                if self._refused():
                    return
                data = json.dumps({"object": "list", "data": [{"id": m} for m in MODELS]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data.encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"),
                     "model": body.get("model")}
                )  # fmt: skip
                if self._refused():
                    return
                users = [m for m in body.get("messages", []) if m.get("role") == "user"]
                last = str(users[-1]["content"]) if users else ""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i, word in enumerate(f"Fake model says hello to: {last}".split(" ")):
                    chunk = {
                        "choices": [
                            {"index": 0, "delta": {"content": word if i == 0 else " " + word}}
                        ]
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.02)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def completions(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


# -------------------------------------------------------------------------------- helpers
def ready(page: Any, view: str) -> None:
    page.wait(
        lambda: page.driver.execute_script("return document.body.dataset.ready") == view, view
    )


def import_through_page(page: Any, card: Path, name: str) -> None:
    """Import ``card`` with the library's Import control, as a player picks a file."""
    file_input = page.wait(
        lambda: [
            e
            for e in page.driver.find_elements("css selector", "input[type=file]")
            if e.accessible_name == "Import"
        ],
        "file input named Import",
    )[0]
    file_input.send_keys(str(card))
    page.wait(
        lambda: f"imported: {name}" in page.driver.find_element("css selector", ".results").text,
        "import row",
    )


def replies(page: Any) -> list[Any]:
    return [
        a
        for a in page.by_role("article")
        if "assistant" in (a.get_attribute("class") or "")
        and "greeting" not in (a.get_attribute("class") or "")
        and "streaming" not in (a.get_attribute("class") or "")
    ]


def partials(page: Any) -> int:
    script = "const l = document.querySelector('.log'); return Number(l?.dataset.partials || 0)"
    return int(page.driver.execute_script(script))


def send_and_see_reply(page: Any, text: str, expect: str) -> None:
    """Type ``text``, Send, and wait for the reply (containing ``expect``) to stream in."""
    before = len(replies(page))
    page.one("textbox", "Message").send_keys(text)
    page.one("button", "Send").click()
    page.wait(
        lambda: len(replies(page)) == before + 1 and expect in replies(page)[-1].text,
        f"reply to {text!r}",
    )
    assert partials(page) > 3, "the reply arrived in one piece, not streamed"


def shown_notices(page: Any, kind: str) -> list[Any]:
    """The ``.notice.<kind>`` boxes shown now (``practice``, ``failed``)."""
    found = page.driver.find_elements("css selector", f".notice.{kind}")
    return [n for n in found if n.is_displayed()]


def practice_notices(page: Any) -> list[Any]:
    return list(page.wait(lambda: shown_notices(page, "practice"), "the practice notice"))


def field(page: Any, name: str) -> Any:
    """The visible form control whose accessible name is exactly ``name``."""
    return page.wait(
        lambda: [
            e
            for e in page.driver.find_elements("css selector", "input, select, textarea")
            if e.is_displayed() and e.accessible_name == name
        ],
        f"field {name!r}",
    )[0]


def fill(page: Any, name: str, value: str) -> None:
    from selenium.webdriver.common.keys import Keys

    box = field(page, name)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(value)


def open_model_settings(page: Any) -> None:
    page.one("link", "Settings").click()
    ready(page, "settings")
    page.wait(lambda: field(page, "Provider"), "the Model section")


# -------------------------------------------------------------------------------- tests
def test_first_run_import_open_play(
    practice_page: Any, practice_server: Any, seraphina: Path
) -> None:
    """Fresh data dir: open `/`, import a corpus PNG through Import, open it, start a
    playthrough, send, see the streamed reply — no folder typed, the practice mode said."""
    page = practice_page
    page.open()
    ready(page, "library")
    # The view switch stays out of the way: closed, in the player's words, opened by a click.
    orb = page.one("button", "View: Classic view")
    assert orb.get_attribute("aria-expanded") == "false"
    assert not page.driver.find_element("id", "orb-menu").is_displayed()
    assert "DSH" not in page.driver.find_element("tag name", "body").text
    # An empty library says what to do.
    assert "Import a character card" in page.one("region", "Try the example character").text
    import_through_page(page, seraphina, "Seraphina")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina in the grid")
    assert not page.by_role("region", "Try the example character")
    page.new_playthrough("Seraphina")
    assert not page.by_role("textbox", "Play folder")
    # Practice mode is said where the player plays, and can be dismissed.
    assert practice_notices(page)[0].text.startswith(
        "Practice mode: replies are generated locally without a model — connect a model in Settings"
    )
    send_and_see_reply(page, "Hello, who are you?", "Synthetic reply to: Hello, who are you?")
    # The playthrough lives in the default play folder (checked over HTTP, not arranged).
    view = practice_server.call("GET", "/pmp-dsh-tavern/api/v2/workspace")
    assert view["selected"] and view["rootPath"] == view["defaultRootPath"]
    assert view["rootPath"].endswith("/data/plugins/tavern/play-workspace")
    assert practice_notices(page)  # the chat says it too
    page.one("button", "Dismiss").click()
    page.wait(lambda: not shown_notices(page, "practice"), "notice dismissed")
    page.driver.refresh()
    ready(page, "play")
    assert not shown_notices(page, "practice")
    # The view switch opens only on a click, and closes again with Escape.
    from selenium.webdriver.common.keys import Keys

    orb = page.one("button", "View: Classic view")
    assert not page.driver.find_element("id", "orb-menu").is_displayed()
    orb.click()
    menu = page.driver.find_element("id", "orb-menu")
    page.wait(lambda: menu.is_displayed(), "view menu open")
    assert "Switch to Play view" in menu.text
    page.driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    page.wait(lambda: not menu.is_displayed(), "view menu closed")
    # The same words in Chinese.
    page.open("#/settings")
    ready(page, "settings")
    from selenium.webdriver.support.ui import Select

    Select(page.one("combobox", "Language")).select_by_value("zh")
    page.wait(lambda: page.by_role("button", "视图: 经典视图"), "Chinese view switch")
    page.one("button", "视图: 经典视图").click()
    page.wait(lambda: "切换到游玩视图" in page.driver.find_element("id", "orb-menu").text, "zh")
    assert page.problems() == []


def test_example_character_plays_from_an_empty_library(practice_page: Any) -> None:
    page = practice_page
    page.open()
    ready(page, "library")
    page.one("button", "Try the example character").click()
    ready(page, "play")
    page.wait(
        lambda: "Lantern & Kettle" in page.driver.find_element("css selector", ".log").text,
        "the example's greeting",
    )
    send_and_see_reply(page, "Tell me about the bridge.", "Synthetic reply to: Tell me about")
    page.open("#/library")
    page.wait(lambda: page.by_role("listitem", "Mira Thornwick"), "the example in the library")
    assert page.problems() == []


def test_model_settings_against_an_openai_compatible_server(
    practice_page: Any,
    practice_server: Any,
    fake_openai: FakeOpenAI,
    seraphina: Path,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.support.ui import Select

    page = practice_page
    page.open()
    ready(page, "library")
    open_model_settings(page)
    Select(field(page, "Provider")).select_by_value("openai")
    fill(page, "Model server URL", fake_openai.base_url)
    # A wrong key: Test connection shows the server's own 401 text.
    fill(page, "API key", WRONG_KEY)
    page.one("button", "Test connection").click()
    page.wait(
        lambda: REFUSAL in page.driver.find_element("css selector", "#model-settings").text,
        "the server's refusal",
    )
    # The right key: the server's models fill the picker.
    fill(page, "API key", MARKER_KEY)
    page.one("button", "Test connection").click()
    page.wait(lambda: "2 models found" in page.one("region", "Model").text, "models listed")
    Select(field(page, "Models on the server")).select_by_value("fake-large")
    assert field(page, "Model").get_attribute("value") == "fake-large"
    page.one("button", "Save").click()
    page.wait(lambda: "Saved. The next reply" in page.one("region", "Model").text, "saved")
    # Reload: the key is never sent back, only that one is set and its last 4 characters.
    page.driver.refresh()
    ready(page, "settings")
    key = field(page, "API key")
    page.wait(
        lambda: page.driver.find_element("id", "model-key-state").text == "set (…abcd)", "key state"
    )
    assert key.get_attribute("value") == ""
    assert key.get_attribute("aria-describedby") == "model-key-state"
    assert MARKER_KEY not in page.driver.page_source
    settings_file = tmp_path / "data" / "model-settings.json"
    assert stat.S_IMODE(settings_file.stat().st_mode) == 0o600

    # The next turn goes to that server, with that model and key (no restart).
    page.one("link", "Library").click()
    ready(page, "library")
    import_through_page(page, seraphina, "Seraphina")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
    assert not shown_notices(page, "practice")
    send_and_see_reply(page, "Good evening", "Fake model says hello to: Good evening")
    calls = fake_openai.completions()
    assert [(c["model"], c["auth"]) for c in calls] == [("fake-large", f"Bearer {MARKER_KEY}")]

    # A key the server refuses: the turn fails with the server's reason, a way to the model
    # settings, and the player's words kept.
    open_model_settings(page)
    fill(page, "API key", WRONG_KEY)
    page.one("button", "Save").click()
    page.wait(lambda: "Saved. The next reply" in page.one("region", "Model").text, "saved")
    page.driver.back()
    ready(page, "play")
    page.one("textbox", "Message").send_keys("Are you still there?")
    page.one("button", "Send").click()
    # The notice is drawn again as the turn settles: read its text inside the wait, so a redraw
    # between finding it and reading it is simply looked at again.
    page.wait(
        lambda: any(
            REFUSAL in n.text and "PROVIDER_AUTH" in n.text for n in shown_notices(page, "failed")
        ),
        "the failed reply with the server's reason",
    )
    mine = [a for a in page.by_role("article") if "user" in (a.get_attribute("class") or "")]
    assert "Are you still there?" in mine[-1].text
    page.one("button", "Open Model settings").click()
    ready(page, "settings")
    assert page.one("region", "Model")
    # Back to the right key: Retry sends the same words again, and the reply comes.
    fill(page, "API key", MARKER_KEY)
    page.one("button", "Save").click()
    page.wait(lambda: "Saved. The next reply" in page.one("region", "Model").text, "saved")
    page.driver.back()
    ready(page, "play")
    page.one("button", "Retry").click()
    page.wait(
        lambda: replies(page) and "Are you still there?" in replies(page)[-1].text, "retried reply"
    )
    # The refusals Test connection reported are the only failed requests.
    assert [p for p in page.problems() if "/host/api/model-settings/test" not in p] == []
    assert_marker_nowhere(page, practice_server, tmp_path / "data")


def assert_marker_nowhere(page: Any, server: Any, data_dir: Path) -> None:
    """The marker key is in the settings file only: not in any HTTP answer the page got, the
    server log, the audit, the events or any other file of the data directory."""
    bodies = page.response_bodies()
    assert len(bodies) > 20, "too few answers captured to mean anything"
    leaks = [url for url, text in bodies if MARKER_KEY in text]
    session = page.head_session()
    for path in (
        "/host/api/model-settings",
        f"/host/api/sessions/{session}/messages",
        f"/host/api/sessions/{session}/history?limit=500",
        f"/pmp-dsh-tavern/api/v1/active?sessionId={session}",
        f"/pmp-dsh-tavern/api/v3/sessions/{session}/assemblies",
    ):
        if MARKER_KEY in json.dumps(server.call("GET", path)):
            leaks.append(path)
    assert server.host is not None
    if MARKER_KEY.encode() in server.host.log.read_bytes():
        leaks.append("server log")
    marker = MARKER_KEY.encode()
    for root, _, files in os.walk(data_dir):
        for name in files:
            path = Path(root) / name
            if path == data_dir / "model-settings.json":
                assert marker in path.read_bytes()  # …where it is kept, and only there
            elif marker in path.read_bytes():
                leaks.append(str(path.relative_to(data_dir)))
    assert leaks == []


def test_moving_the_play_folder_keeps_old_playthroughs_listed(
    practice_page: Any, seraphina: Path, tmp_path: Path
) -> None:
    page = practice_page
    page.open()
    ready(page, "library")
    import_through_page(page, seraphina, "Seraphina")
    page.wait(lambda: page.by_role("listitem", "Seraphina"), "Seraphina listed")
    page.new_playthrough("Seraphina")
    send_and_see_reply(page, "First words", "Synthetic reply to: First words")
    default = str(tmp_path / "data" / "plugins" / "tavern" / "play-workspace")

    # Settings → Play folder says where playthroughs live; choose another folder.
    page.one("link", "Settings").click()
    ready(page, "settings")
    folder = page.one("region", "Play folder")
    page.wait(lambda: f"In use: {default}" in folder.text, "the folder in use")
    elsewhere = tmp_path / "my-stories"
    elsewhere.mkdir()
    fill(page, "Another play folder", str(elsewhere))
    page.one("button", "Use this folder").click()
    page.wait(lambda: f"In use: {elsewhere}" in page.one("region", "Play folder").text, "moved")
    kept = page.one("list", f"Kept in {default}")
    assert "Seraphina — Playthrough 1" in kept.text

    # The character page lists the old run with where it is, and can open that folder again.
    page.one("link", "Library").click()
    ready(page, "library")
    page.by_role("listitem", "Seraphina")[0].find_element("css selector", "a").click()
    ready(page, "character")
    other = page.one("region", "Playthroughs in other folders")
    assert f"Kept in {default}" in other.text and "Playthrough 1" in other.text
    rows = lambda: page.driver.find_elements(  # noqa: E731
        "css selector", "ul[aria-label=Playthroughs] li"
    )
    assert not rows()
    page.one("button", "Use that folder again").click()
    page.wait(rows, "Playthrough 1 back")
    page.one("link", "Playthrough 1").click()
    ready(page, "play")
    page.wait(lambda: replies(page) and "First words" in replies(page)[-1].text, "old reply")
    assert page.problems() == []
