"""Card-script runtime overhead per turn, in system Chromium over a real ``innkeeper serve``.

Issue 28 "Measure and report": the status-bar example card (docs/webui.md "Card scripts") with
0, 1 and 5 enabled scripts (the status bar, which writes once per reply, plus display-only
copies that draw from the variables), each in its own playthrough, allowed by the player. Per
turn, timed in the page with the Performance API from the Send click:

- **reply rendered**: until the reply's article is in the chat (what the player waits for; the
  runtime must not slow it);
- **scripts settled**: until the card scripts have been re-bound, told of the reply and the
  status bar's write has been committed and read back (``innkeeper:card-scripts:written``).

Medians over ``--turns`` turns, with ratios against the 0-script run in the same server and
browser (the chat without the runtime is the baseline a player would compare with).

    nice -n 10 uv run --no-sync python tools/bench_card_scripts.py [--turns 8]
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_webui import CHROMEDRIVER, CHROMIUM, FLAGS, start_server

ROOT = Path(__file__).resolve().parents[1]
STATUS_CARD = ROOT / "plugins/webui/src/innkeeper_webui/examples/example-status-bar.json"

#: A display-only script: draws the replies count whenever the variables change.
VIEWER = """function draw() {
  const stat = _.get(Mvu.getMvuData(), 'stat_data', {})
  $('body').html('<p>Replies <b id="n"></b>, HP <b id="hp"></b></p>')
  $('#n').text(_.get(stat, 'replies', 0))
  $('#hp').text(_.get(stat, 'hp', '?'))
}
eventOn(Mvu.events.VARIABLE_UPDATE_ENDED, draw)
eventOn(tavern_events.MESSAGE_RECEIVED, draw)
$(draw)
"""

TURN = """
const done = arguments[arguments.length - 1]
const [text, scripts] = arguments
const replies = () => [...document.querySelectorAll('article.msg.assistant')]
  .filter((a) => !a.classList.contains('greeting') && !a.classList.contains('streaming'))
const before = replies().length
const box = document.querySelector('.composer textarea')
const send = [...document.querySelectorAll('button')].find((b) => b.textContent === 'Send')
box.value = text
box.dispatchEvent(new Event('input'))
const t0 = performance.now()
send.click()
let reply = null
const wait = () => {
  const now = performance.now()
  const last = replies().at(-1)
  if (reply === null && replies().length > before && last.textContent.includes(text)) {
    reply = now - t0
  }
  const written = performance.getEntriesByName('innkeeper:card-scripts:written')
    .some((m) => m.startTime > t0)
  if (reply !== null && (!scripts || written)) {
    return done({ reply, settled: scripts ? now - t0 : null })
  }
  if (now - t0 > 60000) return done({ error: 'timed out' })
  setTimeout(wait, 2)
}
wait()
"""


def card_with(scripts: int, directory: Path) -> Path:
    """The status-bar card with ``scripts`` enabled scripts (0: the card without its script)."""
    card = json.loads(STATUS_CARD.read_text())
    card["data"]["name"] = f"Wren {scripts}"
    listed = card["data"]["extensions"]["tavern_helper"]["scripts"]
    for i in range(1, scripts):
        listed.append({"type": "script", "enabled": True, "name": f"Viewer {i}", "content": VIEWER})
    if scripts == 0:
        listed.clear()
    path = directory / f"wren-{scripts}.json"
    path.write_text(json.dumps(card))
    return path


def wait(driver: Any, script: str, what: str, seconds: float = 120) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def click(driver: Any, label: str) -> None:
    wait(
        driver,
        f"const b = [...document.querySelectorAll('button')].find((b) => b.textContent === "
        f"{json.dumps(label)}); if (b) b.click(); return Boolean(b)",
        label,
    )


def play(
    driver: Any, base: str, card: Path, name: str, scripts: int, turns: int
) -> list[dict[str, float]]:
    driver.get(base + "/#/library")
    wait(driver, "return document.body.dataset.ready === 'library'", "library")
    driver.find_element("css selector", "input[type=file]").send_keys(str(card))
    wait(driver, f"return document.body.innerText.includes('imported: {name}')", "import")
    driver.get(base + "/#/library")
    wait(
        driver,
        "const a = [...document.querySelectorAll('li a')].find((a) => a.textContent.includes("
        f"{json.dumps(name)})); if (a) a.click(); return Boolean(a)",
        name,
    )
    click(driver, "New playthrough")
    wait(driver, "return document.body.dataset.ready === 'play'", "play view")
    # The first send starts the playthrough (its draft becomes the chat); then allow scripts.
    driver.find_element("css selector", "textarea").send_keys("Hello.")
    click(driver, "Send")
    wait(
        driver,
        "return document.querySelectorAll('article.msg.assistant').length >= 2",
        "first reply",
    )
    if scripts:
        click(driver, "Allow scripts")
        wait(
            driver,
            "return performance.getEntriesByName('innkeeper:card-scripts:synced').length > 0",
            "scripts",
        )
        time.sleep(1)
    out = []
    for i in range(turns):
        result = driver.execute_async_script(TURN, f"Turn {i} of {name}.", scripts)
        if "error" in result:
            section = driver.execute_script(
                "const n = document.querySelector('.card-scripts'); return n ? n.innerText : ''"
            )
            raise SystemExit(f"{name}: {result['error']} ({section})")
        out.append(result)
        time.sleep(0.3)  # the composer settles (its token line) before the next send
    notices = driver.execute_script(
        "const n = document.querySelector('.card-script-notices'); return n ? n.innerText : ''"
    )
    if notices:
        raise SystemExit(f"{name}: a script was stopped: {notices}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    counts = (0, 1, 5)
    results: dict[int, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-card-scripts-") as tmp:
        process, base = start_server(Path(tmp) / "data")
        try:
            options = webdriver.ChromeOptions()
            options.binary_location = CHROMIUM
            for flag in FLAGS:
                options.add_argument(flag)
            driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
            try:
                driver.set_script_timeout(120)
                for n in counts:
                    card = card_with(n, Path(tmp))
                    results[n] = play(driver, base, card, f"Wren {n}", n, args.turns)
            finally:
                driver.quit()
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)

    base_reply = statistics.median(r["reply"] for r in results[0])
    print(f"card scripts per turn, median of {args.turns} turns (ms), practice provider")
    print(f"{'scripts':<9}{'reply rendered':>16}{'ratio':>8}{'scripts settled':>17}{'ratio':>8}")
    for n in counts:
        reply = statistics.median(r["reply"] for r in results[n])
        settled = [r["settled"] for r in results[n] if r["settled"] is not None]
        s = statistics.median(settled) if settled else None
        s_text = f"{s:>17.1f}{s / base_reply:>7.2f}x" if s is not None else f"{'-':>17}{'':>8}"
        print(f"{n:<9}{reply:>16.1f}{reply / base_reply:>7.2f}x{s_text}")
    print("ratios: against the 0-script reply rendered, same server and browser")


if __name__ == "__main__":
    main()
