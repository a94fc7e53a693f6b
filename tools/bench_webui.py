"""The web client's first paint, time to interactive and first-load bytes, in system Chromium.

Two screens (issue 16 "Measure and report"):

- the library with 4,096 cards (copies of SillyTavern's Seraphina seeded into a temporary data
  directory, as ``tools/bench_characters.py`` does);
- a playthrough with 2,000 messages (1,000 turns of the offline synthetic provider).

Each is opened ``--rounds`` times in a fresh navigation with the HTTP cache disabled, as the
client ships (the grid grows 120 cards at a time, the chat draws the newest 50 messages) and as
the baseline a plain page would be: everything drawn at once (``?unpaged``). Reported: median
first contentful paint, median time until the view is ready (its data loaded and drawn: the
``innkeeper:ready:<view>`` performance mark) and the time a search keystroke takes to redraw the
grid, plus the bytes of the first load (page, modules, CSS; API JSON; the first screen's avatar
images separately, once loaded). Two payloads are also compared in the same run: the first 120
avatars as thumbnails against the card PNGs the grid used to load, and a playthrough's
``/messages?bodies=display`` against the full answer.

    uv run --no-sync python tools/bench_webui.py [--cards 4096] [--turns 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_characters import seed  # the same 4,096-card library as the catalog benchmark

CHROMIUM = os.environ.get("INNKEEPER_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("INNKEEPER_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--lang=en-US", "--window-size=1280,900",
)  # fmt: skip


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Origin", base)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def start_server(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "innkeeper_core", "serve", "--port", str(port)]
    env = {**os.environ, "INNKEEPER_PROVIDER": "synthetic"}
    process = subprocess.Popen(
        [*command, "--data-dir", str(data_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if call(base, "GET", "/healthz")["ok"]:
                return process, base
        except OSError:
            time.sleep(0.2)
    raise SystemExit("server did not start")


def seed_playthrough(base: str, root: Path, turns: int) -> str:
    """A workspace, a session with ``turns`` turns (2 × turns messages) and its catalog row."""
    root.mkdir()
    call(base, "PUT", "/pmp-dsh-tavern/api/v2/workspace", {"path": str(root)})
    card = call(base, "GET", "/pmp-dsh-tavern/api/v1/characters")["characters"][0]
    session = call(base, "POST", "/pmp-dsh-tavern/api/v2/sessions", {})["sessionId"]
    call(base, "POST", "/pmp-dsh-tavern/api/v1/character-selection",
         {"sessionId": session, "characterCardId": card["id"]})  # fmt: skip
    # One prompt per turn: input queued while a turn runs would join the next turn.
    for i in range(turns):
        call(base, "POST", f"/host/api/sessions/{session}/prompt",
             {"text": f"Message {i}: *she looks around* \"Where are we?\""})  # fmt: skip
        while True:
            info = call(base, "GET", f"/host/api/sessions/{session}")
            if not info["turnOpen"] and info["lastTurn"] >= i + 1:
                break
            time.sleep(0.005)
    call(base, "POST", "/pmp-dsh-tavern/api/v2/workspace/dirs", {"path": "bench"})
    timeline = "bench/playthrough-bench/timeline.json"
    call(base, "PUT", f"/pmp-dsh-tavern/api/v2/workspace/files?path={timeline}",
         {"content": json.dumps({"nodes": []}), "expectedRevision": None})  # fmt: skip
    row = {
        "id": "playthrough-bench", "path": timeline,
        "ext": {"pmpDshTavern": {"characterId": card["id"], "characterName": card["name"],
                                 "rootSessionId": session, "playthroughNumber": 1}},
    }  # fmt: skip
    catalog = {"content": json.dumps({"playthroughs": [row], "ext": {}}), "expectedRevision": None}
    call(base, "PUT", "/pmp-dsh-tavern/api/v2/workspace/files?path=catalog.json", catalog)
    return "playthrough-bench"


def measure(driver: Any, url: str, view: str) -> dict[str, float]:
    driver.get("about:blank")
    driver.get(url)
    deadline = time.monotonic() + 300
    while driver.execute_script("return document.body && document.body.dataset.ready") != view:
        if time.monotonic() > deadline:
            raise SystemExit(f"{view} never became ready")
        time.sleep(0.02)
    # The avatars of the first screen: counted once they have loaded (lazy images start after the
    # grid is drawn), so the bytes below are what a player's first screen really fetches.
    driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1]
        const deadline = performance.now() + 20000
        const shown = () => [...document.images].filter((img) => {
          const r = img.getBoundingClientRect()
          return r.bottom > 0 && r.top < innerHeight
        })
        const wait = () => shown().every((img) => img.complete) || performance.now() > deadline
          ? done() : setTimeout(wait, 20)
        wait()
        """
    )
    return driver.execute_script(
        """
        const paint = performance.getEntriesByName('first-contentful-paint')[0]
        const ready = performance.getEntriesByName('innkeeper:ready:' + arguments[0])[0]
        const nav = performance.getEntriesByType('navigation')[0]
        let code = nav.transferSize, api = 0, images = 0
        for (const r of performance.getEntriesByType('resource')) {
          if (r.initiatorType === 'img') images += r.transferSize
          else if (r.name.includes('/api/')) api += r.transferSize
          else code += r.transferSize
        }
        return {paint: paint ? paint.startTime : NaN, ready: ready.startTime, code, api, images,
                nodes: document.getElementsByTagName('*').length}
        """,
        view,
    )


def raw_bytes(base: str, path: str) -> int:
    """The size of the body ``GET path`` answers (no compression asked for)."""
    with urllib.request.urlopen(base + path, timeout=120) as response:
        return len(response.read())


def payload_ratio(label: str, ours: int, baseline: int, baseline_label: str) -> str:
    return (
        f"{label}: {ours / 1024:9.1f} KiB   {baseline_label} {baseline / 1024:9.1f} KiB"
        f"   {baseline / ours:5.2f}x smaller"
    )


def search_ms(driver: Any) -> float:
    """Type one character in the search box and wait for the grid to redraw."""
    return float(
        driver.execute_script(
            """
            const box = document.getElementById('search')
            const t0 = performance.now()
            box.value = box.value ? '' : 'Ser'
            box.dispatchEvent(new Event('input'))
            return new Promise((done) => requestAnimationFrame(
              () => setTimeout(() => done(performance.now() - t0))))
            """
        )
    )


def report(name: str, runs: dict[str, list[dict[str, float]]], extra: dict[str, float]) -> None:
    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    print(f"\n{name}")
    for key, label in (("paint", "first contentful paint"), ("ready", "ready (interactive)")):
        paged, flat = med("paged", key), med("unpaged", key)
        print(
            f"  {label:<24} {paged:8.0f} ms   baseline (all drawn) {flat:8.0f} ms"
            f"   {flat / paged:5.2f}x"
        )
    print(
        f"  DOM elements             {med('paged', 'nodes'):8.0f}"
        f"      baseline {med('unpaged', 'nodes'):8.0f}"
    )
    first = runs["paged"][0]
    kib = {key: first[key] / 1024 for key in ("code", "api", "images")}
    print(f"  first load: page+modules+css {kib['code']:7.1f} KiB, API JSON {kib['api']:7.1f} KiB,"
          f" avatars {kib['images']:7.1f} KiB")  # fmt: skip
    for label, value in extra.items():
        print(f"  {label}")
        print(f"    {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=4096)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="bench-webui-") as tmp_name:
        tmp = Path(tmp_name)
        seed(tmp / "data" / "plugins" / "tavern", args.cards)
        process, base = start_server(tmp / "data")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={tmp / 'profile'}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
            runs: dict[str, list[dict[str, float]]] = {"paged": [], "unpaged": []}
            searches: dict[str, list[float]] = {"paged": [], "unpaged": []}
            for _ in range(args.rounds):
                for mode, query in (("paged", ""), ("unpaged", "?unpaged")):
                    runs[mode].append(measure(driver, f"{base}/{query}#/library", "library"))
                    searches[mode] += [search_ms(driver) for _ in range(4)]
            paged_s, flat_s = (
                statistics.median(searches["paged"]),
                statistics.median(searches["unpaged"]),
            )
            redraw = f"{paged_s:.0f} ms   baseline {flat_s:.0f} ms   {flat_s / paged_s:.2f}x"
            # What the grid's first screen of avatars costs: the thumbnails it loads against the
            # card PNG export it loaded before (same cards, same run).
            shown = call(base, "GET", "/pmp-dsh-tavern/api/v1/characters")["characters"][:120]
            thumbs = sum(
                raw_bytes(base, f"/pmp-dsh-tavern/api/v1/characters/{c['id']}/thumbnail?size=192")
                for c in shown
            )
            pngs = sum(
                raw_bytes(base, f"/pmp-dsh-tavern/api/v1/characters/{c['id']}/png") for c in shown
            )
            avatars = payload_ratio("120 thumbnails (192)", thumbs, pngs, "baseline 120 card PNGs")
            report(f"Library, {args.cards} cards", runs,
                   {"search keystroke redraw": redraw, "avatar bytes": avatars})  # fmt: skip

            started = time.monotonic()
            playthrough = seed_playthrough(base, tmp / "play", args.turns)
            print(f"\n(seeded {2 * args.turns} messages in {time.monotonic() - started:.0f} s)")
            url = f"{base}/%s#/play/{playthrough}"
            first_open = measure(driver, url % "", "play")  # writes the 1,000 timeline nodes once
            runs = {"paged": [], "unpaged": []}
            for _ in range(args.rounds):
                for mode, query in (("paged", ""), ("unpaged", "?unpaged")):
                    runs[mode].append(measure(driver, url % query, "play"))
            once = "first open (reconciles every QA into timeline.json once)"
            row = call(base, "GET", "/pmp-dsh-tavern/api/v2/workspace/files?path=catalog.json")
            root = json.loads(row["content"])["playthroughs"][0]["ext"]["pmpDshTavern"]
            messages = f"/pmp-dsh-tavern/api/v2/sessions/{root['rootSessionId']}/messages"
            lean = payload_ratio(
                "?bodies=display", raw_bytes(base, messages + "?bodies=display"),
                raw_bytes(base, messages), "baseline full /messages",
            )  # fmt: skip
            extra = {once: f"ready {first_open['ready']:.0f} ms", "messages bytes": lean}
            report(f"Playthrough, {2 * args.turns} messages", runs, extra)
        finally:
            driver.quit()
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
