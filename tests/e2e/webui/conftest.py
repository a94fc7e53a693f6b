"""Browser tests of the bundled web client: a real server, a fake streaming LLM, system Chromium.

Chromium comes from Debian (``apt-get install chromium chromium-driver``); a browser build that
downloads itself cannot be fetched here. Without one the browser tests are skipped with that
reason, unless ``INNKEEPER_REQUIRE_BROWSER=1`` (CI) makes a missing browser a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("INNKEEPER_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("INNKEEPER_CHROMEDRIVER", "/usr/bin/chromedriver")
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "sillytavern-corpus"
SERAPHINA = CORPUS / "sillytavern-repo" / "staging-1ac6780" / "default_Seraphina.png"
LAUNCH_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--lang=en-US",
    "--window-size=1280,900",
)


def browser_available() -> bool:
    return Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()


def require_browser() -> None:
    if browser_available():
        return
    message = (
        f"no Chromium at {CHROMIUM} / {CHROMEDRIVER} (apt-get install chromium chromium-driver)"
    )
    if os.environ.get("INNKEEPER_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


class Api:
    """JSON helpers for arranging state over HTTP on a server ``start_server`` started."""

    def __init__(self, base: str, host: Any = None) -> None:
        self.base = base
        self.host = host  # the e2e ``Server`` (stop/start on the same port), when known

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Origin", self.base)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def import_card(self, card: Path) -> str:
        """Import a card file over HTTP (not through the page); return its id."""
        request = urllib.request.Request(
            self.base + "/pmp-dsh-tavern/api/v1/characters/import?filename=" + card.name,
            data=card.read_bytes(),
            method="POST",
        )
        request.add_header("Origin", self.base)
        request.add_header("Content-Type", "image/png")
        with urllib.request.urlopen(request, timeout=30) as response:
            return str(json.loads(response.read())["character"]["id"])


class FakeLLM:
    """Serve ``POST /v1/chat/completions`` on a free loopback port in a thread."""

    def __init__(self, delay_s: float = 0.03) -> None:
        self.delay_s = delay_s
        self.count = 0
        #: Every request body, in order (a test checks what a request held).
        self.bodies: list[dict[str, Any]] = []
        self.hesitated = False
        #: Every request body received, in order (what the host sent the model).
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.respond(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        with self.lock:
            self.count += 1
            n = self.count
            self.bodies.append(body)
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        last = str(users[-1]["content"]) if users else ""
        words = f"Reply {n} to: {last}".split(" ")
        if "slow" in last:
            words += ["and"] * 400
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        if "hesitate" in last and not self.hesitated:
            self.hesitated = True  # only the first time: a retry gets its reply at once
            time.sleep(5)  # nothing streamed yet: Stop now leaves a request without a reply
        try:
            for i, word in enumerate(words):
                piece = word if i == 0 else " " + word
                chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                handler.wfile.flush()
                time.sleep(self.delay_s)
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            handler.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the host cancelled the stream (Stop)


@pytest.fixture
def seraphina() -> Path:
    """SillyTavern's default card (PNG with a four-entry embedded world book)."""
    return SERAPHINA


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture
def server(
    start_server: Any, fake_llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Api:
    """A real ``innkeeper serve`` whose provider is the fake streaming LLM."""
    monkeypatch.setenv("INNKEEPER_PROVIDER", "openai")
    monkeypatch.setenv("INNKEEPER_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("INNKEEPER_MODEL", "fake")
    host = start_server("--data-dir", str(tmp_path / "data"))
    return Api(host.base, host)


@dataclass
class Browser:
    """A Chromium page with accessible-name lookups, waits, screenshots and a clean-run check."""

    driver: Any
    base: str
    shots: Path
    seen_failures: list[str] = field(default_factory=list)
    #: ``(requestId, url)`` of every answer seen in the performance log (for ``response_bodies``).
    responses: list[tuple[str, str]] = field(default_factory=list)

    def open(self, hash_path: str = "") -> None:
        self.driver.get(self.base + "/" + hash_path)

    # Waits are generous (a loaded 2-core CI machine can take seconds per step); a real failure
    # still fails, only later.
    def wait(self, predicate: Callable[[], Any], what: str, seconds: float = 60) -> Any:
        deadline = time.monotonic() + seconds
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                value = predicate()
                if value:
                    return value
            except Exception as exc:  # stale elements while the page redraws
                last_error = exc
            time.sleep(0.05)
        self.shot("timeout")
        raise AssertionError(f"timed out waiting for {what} ({last_error!r})")

    def by_role(self, role: str, name: str | None = None) -> list[Any]:
        """Visible elements whose computed ARIA role and accessible name match."""
        from selenium.webdriver.common.by import By

        selectors = {
            "button": "button",
            "textbox": "textarea, input[type=search], input[type=text], input:not([type])",
            "article": "article",
            "list": "ul, ol",
            "listitem": "li",
            "region": "section",
            "link": "a",
            "table": "table",
            "combobox": "select",
        }
        found = []
        for el in self.driver.find_elements(By.CSS_SELECTOR, selectors[role]):
            if not el.is_displayed():
                continue
            if el.aria_role != role:
                continue
            if name is not None and el.accessible_name != name:
                continue
            found.append(el)
        return found

    def one(self, role: str, name: str | None = None, seconds: float = 60) -> Any:
        return self.wait(
            lambda: (self.by_role(role, name) or [None])[-1], f"{role} {name!r}", seconds
        )

    def ready(self, view: str) -> None:
        """Wait until the page marks ``view`` ready (``body[data-ready]``)."""
        self.wait(
            lambda: self.driver.execute_script("return document.body.dataset.ready") == view, view
        )

    def field(self, name: str) -> Any:
        """The visible form control (input, select, textarea) whose accessible name is
        exactly ``name`` (the last one, when several are shown)."""
        return self.wait(
            lambda: [
                e
                for e in self.driver.find_elements("css selector", "input, select, textarea")
                if e.is_displayed() and e.accessible_name == name
            ],
            f"field {name!r}",
        )[-1]

    def fill(self, name: str, value: str) -> None:
        """Replace what the control named ``name`` holds with ``value``, by typing."""
        from selenium.webdriver.common.keys import Keys

        box = self.field(name)
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.DELETE)
        box.send_keys(value)

    def import_file(self, path: Path, name: str) -> None:
        """Import ``path`` with the library's Import control; wait for its ``imported`` row."""
        self.field("Import").send_keys(str(path))
        self.wait(
            lambda: (
                f"imported: {name}" in self.driver.find_element("css selector", ".results").text
            ),
            "import row",
        )

    def replies(self) -> list[Any]:
        """The chat's reply articles (not the greeting, not the one streaming in)."""
        return [
            a
            for a in self.by_role("article")
            if "assistant" in (a.get_attribute("class") or "")
            and "greeting" not in (a.get_attribute("class") or "")
            and "streaming" not in (a.get_attribute("class") or "")
        ]

    @staticmethod
    def body(article: Any) -> str:
        """The text of a message article's body (without its header and actions)."""
        return str(article.find_element("css selector", ".body").text)

    def send(self, text: str) -> None:
        """Type ``text`` into the message box, send it, and wait for the reply that answers it
        (the practice provider echoes the text) and for the reply's actions."""
        before = len(self.replies())
        self.one("textbox", "Message").send_keys(text)
        self.one("button", "Send").click()
        self.wait(
            lambda: len(self.replies()) == before + 1 and text in self.body(self.replies()[-1]),
            f"reply to {text!r}",
        )
        self.wait(lambda: self.by_role("button", "Continue"), "the reply's actions")

    def fill_in(self, region: Any, name: str, value: str) -> None:
        """Replace what the visible control named ``name`` inside ``region`` holds."""
        box = self.wait(
            lambda: [
                e
                for e in region.find_elements("css selector", "input, textarea")
                if e.is_displayed() and e.accessible_name == name
            ],
            f"field {name!r}",
        )[0]
        box.clear()
        box.send_keys(value)

    def import_and_play(self, card: Path, name: str = "Seraphina") -> None:
        """From ``/``: import ``card`` (a character named ``name``) with the library's Import
        control, then start a playthrough of it."""
        self.open()
        self.wait(
            lambda: self.driver.execute_script("return document.body.dataset.ready"), "library"
        )
        self.import_file(card, name)
        self.open("#/library")
        self.wait(lambda: self.by_role("listitem", name), f"{name} listed")
        self.new_playthrough(name)

    def new_playthrough(self, name: str) -> None:
        """Open ``name`` in the library and start a playthrough (no folder to choose: the
        server binds its default play folder on the first one)."""
        self.by_role("listitem", name)[0].find_element("css selector", "a").click()
        self.one("button", "New playthrough").click()
        self.wait(
            lambda: self.driver.execute_script("return document.body.dataset.ready") == "play",
            "play view",
        )

    def new_chat(self, button: str) -> None:
        """Click ``button`` and wait for the play view of the new chat it opens."""
        before = self.driver.current_url
        self.one("button", button).click()
        self.wait(
            lambda: (
                self.driver.current_url != before
                and self.driver.execute_script("return document.body.dataset.ready") == "play"
            ),
            f"the new chat of {button!r}",
        )

    def create_group(self, name: str, members: tuple[str, ...]) -> None:
        """From ``/``: open **Groups**, name a new group, tick ``members`` (library cards by
        name) and **Create group**; wait until the group is listed."""
        from selenium.webdriver.common.by import By

        self.open("")
        self.one("link", "Groups").click()
        self.one("textbox", "Group name").send_keys(name)
        for member in members:
            label = f"//label[text()='{member}']"
            self.wait(lambda x=label: self.driver.find_element(By.XPATH, x), member)
            self.driver.find_element(By.XPATH, label).click()
        self.one("button", "Create group").click()
        self.one("listitem", name)

    def head_session(self) -> str:
        """The session the open playthrough writes to, as the client itself computes it."""
        script = """const done = arguments[arguments.length - 1]
          const id = decodeURIComponent(location.hash.split('/')[2])
          import('/webui/play.js').then((m) => done(m.headSession(id)))"""
        return str(self.driver.execute_async_script(script))

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def problems(self) -> list[str]:
        """Console errors and failed requests since the last call."""
        out = [
            f"console: {e['message']}"
            for e in self.driver.get_log("browser")
            if e["level"] in ("SEVERE", "ERROR")
        ]
        urls: dict[str, str] = {}
        for entry in self.driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            params = msg.get("params", {})
            if msg["method"] == "Network.requestWillBeSent":
                urls[params["requestId"]] = params["request"]["url"]
            elif msg["method"] == "Network.responseReceived":
                self.responses.append((params["requestId"], params["response"]["url"]))
                status = params["response"]["status"]
                if status >= 400:
                    out.append(f"HTTP {status}: {params['response']['url']}")
            elif msg["method"] == "Network.loadingFailed" and not params.get("canceled"):
                url = urls.get(params["requestId"], "?")
                out.append(f"failed: {params.get('errorText')} ({params.get('type')}) {url}")
        self.seen_failures.extend(out)
        return out

    def response_bodies(self) -> list[tuple[str, str]]:
        """``(url, text)`` of every answer the page got that the browser still holds (bodies
        of pages left by a reload may be gone; event streams still open have none yet)."""
        import base64

        self.problems()  # collect the latest request ids
        out = []
        for request_id, url in self.responses:
            try:
                got = self.driver.execute_cdp_cmd(
                    "Network.getResponseBody", {"requestId": request_id}
                )
            except Exception:  # evicted, or a stream without a complete body
                continue
            text = got.get("body", "")
            if got.get("base64Encoded"):
                text = base64.b64decode(text).decode("latin-1")
            out.append((url, text))
        return out


@pytest.fixture
def practice_server(start_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Api:
    """A real ``innkeeper serve`` as a new player starts it: a fresh data directory and no
    provider flag or variable (the practice provider serves until a model is connected)."""
    for name in ("INNKEEPER_PROVIDER", "INNKEEPER_BASE_URL", "INNKEEPER_MODEL", "INNKEEPER_API_KEY",
                 "INNKEEPER_PROVIDER_PROFILE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    host = start_server("--data-dir", str(tmp_path / "data"))
    return Api(host.base, host)


@pytest.fixture
def practice_page(practice_server: Api, tmp_path: Path) -> Iterator[Browser]:
    """A Chromium page on :func:`practice_server`."""
    yield from open_browser(practice_server.base, tmp_path)


@pytest.fixture
def browser(server: Api, tmp_path: Path) -> Iterator[Browser]:
    yield from open_browser(server.base, tmp_path)


def open_browser(base: str, tmp_path: Path) -> Iterator[Browser]:
    """A fresh Chromium profile on ``base``, quit afterwards."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="webui-chromium-", dir=tmp_path)
    for flag in (*LAUNCH_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    shots = Path(os.environ.get("INNKEEPER_WEBUI_SHOTS", tmp_path / "screens"))
    shots.mkdir(parents=True, exist_ok=True)
    page = Browser(driver, base, shots)
    # Whatever the browser did before the first page (its own start-up) is not the client's.
    driver.get("about:blank")
    driver.get_log("browser")
    driver.get_log("performance")
    try:
        yield page
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page_and_server(browser: Browser, server: Api, seraphina: Path) -> tuple[Browser, Api, Path]:
    """The browser, the server and the corpus card."""
    return browser, server, seraphina
