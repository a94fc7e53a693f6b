"""The world-info editor with a 10,000-entry book, in system Chromium, against the HTTP API.

Issue 30 "Measure and report": over a real ``innkeeper serve`` with the real plugins, a
playthrough whose session has a 10,000-entry book bound, three operations, each ``--rounds``
times (median, ms):

- **first paint**: "World info" clicked until the entry list is drawn (the book read and the
  first 200 of 10,000 rows in the page), against ``GET /world-books/{id}`` over HTTP (the same
  read, decoded in Python);
- **search keystroke**: one input event in "Search entries" until the next frame, against
  filtering the 10,000 entries in Python on the already-read book;
- **one entry saved**: "Save entry" until the page says Saved (``PUT …/entries/{uid}`` and the
  book read again), against the same ``PUT`` over HTTP — and, as the alternative the editor
  avoids, the whole book sent back with ``PATCH /world-books/{id}``.

Each is printed with its ratio to the HTTP baseline measured in the same run.

    nice -n 10 uv run --no-sync python tools/bench_worldinfo.py [--entries 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_characters import seed
from bench_webui import CHROMEDRIVER, CHROMIUM, FLAGS, call, seed_playthrough, start_server


def book_json(entries: int) -> bytes:
    """A standalone ST book of ``entries`` keyed entries."""
    return json.dumps(
        {
            "entries": {
                str(i): {
                    "uid": i,
                    "key": [f"key{i}", f"word{i % 97}"],
                    "keysecondary": [],
                    "comment": f"entry {i}",
                    "content": f"Lore text number {i}. " * 8,
                    "order": i % 200,
                }
                for i in range(entries)
            }
        }
    ).encode()


OPEN = """
const done = arguments[arguments.length - 1]
const n = String(arguments[0])
const button = [...document.querySelectorAll('button')].find((b) => b.textContent === 'World info')
const panel = document.getElementById('worldinfo-panel')
if (!panel.hidden) button.click()  // close it first: each round opens it afresh
const t0 = performance.now()
button.click()
const wait = () => {
  const list = panel.querySelector('ul.entries')
  if (list && list.dataset.count === n) requestAnimationFrame(() => done(performance.now() - t0))
  else setTimeout(wait, 2)
}
wait()
"""
SEARCH = """
const done = arguments[arguments.length - 1]
const box = document.querySelector('#worldinfo-panel input[type=search]')
box.value = box.value === arguments[0] ? arguments[0] + '1' : arguments[0]
const t0 = performance.now()
box.dispatchEvent(new Event('input'))
requestAnimationFrame(() => done(performance.now() - t0))
"""
SAVE = """
const done = arguments[arguments.length - 1]
const panel = document.getElementById('worldinfo-panel')
panel.querySelector('ul.entries li button').click()
const status = panel.querySelector('p[role=status]')
status.textContent = ''
const content = panel.querySelector('textarea[aria-label="Content"]')
content.value = 'Edited ' + Math.random()
const save = [...panel.querySelectorAll('button')].find((b) => b.textContent === 'Save entry')
const t0 = performance.now()
save.click()
const wait = () => {
  if (status.textContent === 'Saved') done(performance.now() - t0)
  else setTimeout(wait, 2)
}
wait()
"""


def http_round(base: str, book_id: str) -> dict[str, float]:
    """The baseline: the same read, search and save over the HTTP API (and a whole-book PATCH)."""
    path = f"/pmp-dsh-tavern/api/v1/world-books/{book_id}"
    start = time.perf_counter()
    got = call(base, "GET", path)
    read = time.perf_counter()
    entries = got["worldBook"]["book"]["entries"]
    fields = ("comment", "content")
    hits = [e for e in entries if any("entry 77" in (e[f] or "").lower() for f in fields)]
    searched = time.perf_counter()
    assert hits
    entry = {**entries[0], "content": f"Edited {time.time()}"}
    entry.pop("uid")
    body = {"entry": entry, "expectedRevision": got["worldBook"]["updatedAt"]}
    call(base, "PUT", f"{path}/entries/0", body)
    saved = time.perf_counter()
    call(base, "PATCH", path, {"book": got["worldBook"]["book"]})
    patched = time.perf_counter()
    return {
        "open": (read - start) * 1000,
        "search": (searched - read) * 1000,
        "save": (saved - searched) * 1000,
        "patch": (patched - saved) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="bench-worldinfo-") as tmp:
        data = Path(tmp) / "data"
        seed(data / "plugins" / "tavern", 1)
        process, base = start_server(data)
        try:
            playthrough = seed_playthrough(base, Path(tmp) / "play", 1)
            files = "/pmp-dsh-tavern/api/v2/workspace/files?path=catalog.json"
            row = json.loads(call(base, "GET", files)["content"])["playthroughs"][0]
            session = row["ext"]["pmpDshTavern"]["rootSessionId"]
            import urllib.request

            request = urllib.request.Request(
                base + "/pmp-dsh-tavern/api/v1/world-books/import?filename=big.json",
                data=book_json(args.entries),
                method="POST",
            )
            request.add_header("Origin", base)
            request.add_header("Content-Type", "application/json")
            with urllib.request.urlopen(request, timeout=300) as response:
                book_id = json.loads(response.read())["worldBook"]["id"]
            call(base, "POST", "/pmp-dsh-tavern/api/v1/world-book-selection",
                 {"sessionId": session, "worldBookIds": [book_id]})  # fmt: skip

            http: dict[str, list[float]] = {"open": [], "search": [], "save": [], "patch": []}
            for _ in range(args.rounds):
                for name, ms in http_round(base, book_id).items():
                    http[name].append(ms)

            options = webdriver.ChromeOptions()
            options.binary_location = CHROMIUM
            for flag in FLAGS:
                options.add_argument(flag)
            driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
            page: dict[str, list[float]] = {"open": [], "search": [], "save": []}
            try:
                driver.set_script_timeout(300)
                driver.get(f"{base}/#/play/{playthrough}")
                deadline = time.monotonic() + 120
                while driver.execute_script("return document.body.dataset.ready") != "play":
                    if time.monotonic() > deadline:
                        raise SystemExit("the play view never became ready")
                    time.sleep(0.05)
                for _ in range(args.rounds):
                    page["open"].append(driver.execute_async_script(OPEN, args.entries))
                    page["search"].append(driver.execute_async_script(SEARCH, "entry 77"))
                    driver.execute_async_script(SEARCH, "")  # the whole list again
                    page["save"].append(driver.execute_async_script(SAVE))
            finally:
                driver.quit()
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)

    med = {k: statistics.median(v) for k, v in http.items()}
    print(f"world-info editor, {args.entries} entries, median of {args.rounds} rounds (ms)")
    print(f"{'operation':<18}{'page':>10}{'HTTP API':>10}{'ratio':>8}")
    for name, label in (
        ("open", "first paint"),
        ("search", "search keystroke"),
        ("save", "entry saved"),
    ):
        p = statistics.median(page[name])
        print(f"{label:<18}{p:>10.1f}{med[name]:>10.1f}{p / med[name]:>7.1f}x")
    print(f"one entry PUT vs whole-book PATCH: {med['save']:.1f} vs {med['patch']:.1f} ms "
          f"({med['patch'] / med['save']:.1f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
