"""From server start to the first reply, for a person who follows the page only (issue 26).

A fresh data directory and no provider setting, as ``tools/serve`` starts on a new machine. The
clock starts when the server process starts (``innkeeper serve`` as ``tools/serve`` execs it,
after its ``uv sync`` check, which is the same for every checkout) and stops when the first reply
has streamed into the chat. Between, Chromium does what the page asks, step by step, with no
think time: open ``/``, Import the SillyTavern corpus card Seraphina (a click and a file picked),
open it, start a playthrough — and when the page asks for a play folder instead (the previous
main did), make a folder, type its full path and press **Use this folder** — then type a message
and press Send. Steps are counted as a person would make them: a click, a file picked, a folder
made outside the page, and every key typed.

The baseline is the same script against another checkout (``--baseline-repo``, say the previous
main: ``git worktree add --detach /tmp/fr-base main``), run in the same process, alternating
rounds. Its server runs from this environment with that checkout's sources first on
``PYTHONPATH`` (the packages are the same, only their code differs).

    uv run --no-sync python tools/bench_first_run.py --baseline-repo /tmp/fr-base [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "sillytavern-corpus"
CARD = CORPUS / "sillytavern-repo" / "staging-1ac6780" / "default_Seraphina.png"
CHROMIUM = os.environ.get("INNKEEPER_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("INNKEEPER_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--lang=en-US", "--window-size=1280,900",
)  # fmt: skip
MESSAGE = "Hello! Who are you?"
PROVIDER_VARIABLES = ("INNKEEPER_PROVIDER", "INNKEEPER_BASE_URL", "INNKEEPER_MODEL",
                      "INNKEEPER_API_KEY", "INNKEEPER_PROVIDER_PROFILE")  # fmt: skip


@dataclass
class Run:
    """One first run: seconds from server start, and the steps a person made."""

    seconds_from_start: float = 0.0
    seconds_from_page: float = 0.0
    clicks: int = 0
    keys: int = 0
    files: int = 0
    outside: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return self.clicks + self.keys + self.files + self.outside


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def sources(repo: Path) -> str:
    """The ``src`` folders of every member of ``repo``."""
    found = [repo / "hostapi" / "src", repo / "core" / "src"]
    found += sorted(p for p in (repo / "plugins").glob("*/src"))
    found += sorted(p for p in (repo / "plugins" / "examples").glob("*/src"))
    return os.pathsep.join(str(p) for p in found)


@contextlib.contextmanager
def server(repo: Path, data_dir: Path) -> Iterator[tuple[str, float]]:
    """``innkeeper serve`` of ``repo`` on a free port; yields its base URL and start time."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env["MALLOC_ARENA_MAX"] = env.get("MALLOC_ARENA_MAX", "2")  # as tools/serve sets it
    if repo.resolve() != REPO:
        env["PYTHONPATH"] = sources(repo)
    command = [sys.executable, "-m", "innkeeper_core", "serve", "--port", str(port),
               "--data-dir", str(data_dir)]  # fmt: skip
    started = time.perf_counter()
    log = (data_dir.parent / "server.log").open("wb")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        yield base, started
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def wait(predicate: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        try:
            value = predicate()
        except Exception:  # the page is redrawing, or the server is not up yet
            value = None
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


def named(driver: Any, css: str, name: str) -> Any:
    """The first visible element matching ``css`` whose accessible name is ``name``."""
    for el in driver.find_elements("css selector", css):
        if el.is_displayed() and el.accessible_name == name:
            return el
    return None


def first_run(repo: Path) -> Run:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    run = Run()
    with tempfile.TemporaryDirectory(prefix="bench-first-run-") as tmp:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            with server(repo, Path(tmp) / "data") as (base, started):

                def up() -> bool:
                    with urllib.request.urlopen(base + "/healthz", timeout=1) as r:
                        return r.status == 200

                wait(up, "the server")
                page_opened = time.perf_counter()
                driver.get(base + "/")  # typing the address
                run.keys += len(base) + 1
                ready = "return document.body.dataset.ready"
                wait(lambda: driver.execute_script(ready) == "library", "the library")
                picker = wait(lambda: named(driver, "input[type=file]", "Import"), "Import")
                run.clicks += 1  # Import
                picker.send_keys(str(CARD))
                run.files += 1  # the file picked in the dialog
                results = "return document.querySelector('.results').textContent"
                wait(lambda: "imported: Seraphina" in driver.execute_script(results), "imported")
                card = wait(lambda: named(driver, "li.card a", "Seraphina"), "the card")
                card.click()
                run.clicks += 1
                new = "button"
                wait(
                    lambda: (
                        named(driver, new, "New playthrough")
                        or named(driver, "input", "Play folder")
                    ),
                    "the character page",
                )
                folder_box = named(driver, "input", "Play folder")
                if folder_box is not None:  # the previous main: a folder to name first
                    folder = Path(tmp) / "play"
                    folder.mkdir()
                    run.outside += 1  # making the folder in a file manager or shell
                    folder_box.click()
                    folder_box.send_keys(str(folder))
                    run.clicks += 1
                    run.keys += len(str(folder))
                    named(driver, "button", "Use this folder").click()
                    run.clicks += 1
                    run.notes.append("asked for a play folder")
                wait(lambda: named(driver, new, "New playthrough"), "New playthrough").click()
                run.clicks += 1
                box = wait(lambda: named(driver, "textarea", "Message"), "the message box")
                box.click()
                box.send_keys(MESSAGE)
                run.clicks += 1
                run.keys += len(MESSAGE)
                named(driver, "button", "Send").click()
                run.clicks += 1
                replies = (
                    "return [...document.querySelectorAll('article.assistant:not(.streaming)"
                    " .body')].map((b) => b.textContent).join('\\n')"
                )
                wait(lambda: MESSAGE in driver.execute_script(replies), "the first reply")
                done = time.perf_counter()
                run.seconds_from_start = done - started
                run.seconds_from_page = done - page_opened
        finally:
            driver.quit()
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-repo", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not CARD.exists():
        raise SystemExit(f"the corpus card is missing: {CARD}")
    runs: dict[str, list[Run]] = {"this": [], "baseline": []}
    for _ in range(args.rounds):
        runs["baseline"].append(first_run(args.baseline_repo))
        runs["this"].append(first_run(REPO))
    rows = {}
    for name, found in runs.items():
        first = found[0]
        notes = f" ({', '.join(first.notes)})" if first.notes else ""
        rows[name] = {
            "from start": statistics.median(r.seconds_from_start for r in found),
            "from page": statistics.median(r.seconds_from_page for r in found),
            "steps": first.steps,
            "detail": f"{first.clicks} clicks, {first.files} file, {first.keys} keys, "
            f"{first.outside} outside the page{notes}",
        }
    this, base = rows["this"], rows["baseline"]
    print(f"rounds: {args.rounds}; baseline: {args.baseline_repo}")
    for name, row in rows.items():
        print(
            f"{name:>8}: {row['from start']:.2f} s from server start, {row['from page']:.2f} s "
            f"from opening the page; {row['steps']} steps ({row['detail']})"
        )
    print(
        f"ratio baseline/this: {base['from start'] / this['from start']:.2f}x seconds from start, "
        f"{base['from page'] / this['from page']:.2f}x from the page, "
        f"{base['steps'] / this['steps']:.2f}x steps"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
