#!/usr/bin/env python3
"""Benchmark Tavern profile assembly (``TavernProfileLoader.compile`` + the compatibility renderer).

A realistic profile on a real host with the real Assembler and Tavern plugins: the corpus preset
"Lucid Loom v2.8" (253 prompts), the corpus card "Pxansatu" with its 27-entry embedded book, a
generated 10,000-entry standalone world book, a user, and 32 / 128 / 1,024 messages of durable
history. Each sample is one full compile of a real request (selection, history read, adapters,
world-book activation, render within the budget, audit record; storing the audit at the turn's
end is measured by ``tools/bench_turn.py``, which plays whole turns). Prints the median and p95, the
share spent in world-book activation and the growth with history length. Timings are printed,
never asserted.

Usage: uv run --no-sync python tools/bench_assembly.py [--repeat N] [--sizes 32,128,1024]
                                                      [--deep] [--window 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.agents import SESSIONS, TurnContext
from innkeeper_hostapi.sessions import AssistantMessage, UserMessage, text_content
from innkeeper_tavern.features.prompt_profile import PROFILE_LOADER
from innkeeper_tavern.plugin import TAVERN_RESOURCES
from innkeeper_tavern.state.session_bindings import SESSION_SELECTIONS, Selection

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "sillytavern-corpus"
PRESET = CORPUS / "prolix-oc-st-presets" / "presets" / "Lucid Loom v2.8.json"
CARD = CORPUS / "prolix-oc-st-presets" / "cards" / "Pxansatu.json"
BOOK_ENTRIES = 10_000
#: Vocabulary words that are also keys: a chat mentions a few dozen lore topics, not all.
WORDS = [f"word{i}" for i in range(4_000)]


def make_book(rng: random.Random, scan_depth: int | None) -> bytes:
    entries: dict[str, Any] = {}
    for i in range(BOOK_ENTRIES):
        extra = {} if scan_depth is None else {"scanDepth": scan_depth}
        entries[str(i)] = {
            **extra,
            "uid": i,
            "key": [f"lore{i}", f"topic{i % 997}x{i % 13}"],
            "content": f"Lore {i}: " + " ".join(rng.choice(WORDS) for _ in range(15)),
            "order": rng.randint(0, 200),
            "position": i % 2,
        }
    return json.dumps({"entries": entries}).encode()


def message_text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(40)]
    if rng.random() < 0.3:
        words.append(f"lore{rng.randrange(BOOK_ENTRIES)}")
    return " ".join(words)


async def run(repeat: int, sizes: list[int], deep: bool, window: int | None) -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        config: dict[str, Any] = {}
        if window is not None:  # the contract's hard caps: 1,024 messages / 1 MiB
            config = {"max_scan_messages": window, "max_scan_characters": 1024 * 1024}
        host = await start_test_host(Path(tmp), plugins={"tavern": config})
        try:
            # The Assembler first, so the Tavern mounts with it (not compatibility-only).
            await host.load("assembler", "innkeeper_assembler.plugin")
            await host.load("tavern", "innkeeper_tavern.plugin")
            resources = host.get(TAVERN_RESOURCES)
            preset = await resources.import_preset(PRESET.read_text(encoding="utf-8"), None)
            card = await resources.import_character(CARD.read_bytes(), CARD.name)
            book = await resources.import_world_book(
                make_book(rng, 1_000 if deep else None), file_name="generated.json"
            )
            user = await resources.create_user({"name": "Ada", "description": "A ranger."})
            sessions = host.get(SESSIONS)
            store = host.get(SESSION_SELECTIONS)
            loader = host.get(PROFILE_LOADER)
            print(
                f"profile: preset {len(preset.body.prompts)} prompts, card with "
                f"{len((card.record.body.data.character_book or {}).get('entries', []))}-entry "
                f"embedded book, standalone book {BOOK_ENTRIES} entries, "
                f"max profile {loader.max_profile_bytes} bytes, "
                f"scan depth {'1000 per entry' if deep else 'ST default (2)'}, "
                f"scan window {loader.scan_limits.max_messages} messages"
            )
            baseline: float | None = None
            for size in sizes:
                header = await sessions.create(title=f"bench-{size}")
                for i in range(size):
                    text = text_content(message_text(rng))
                    data = (
                        UserMessage(message_id=f"u{i}", content=text, turn=i // 2 + 1)
                        if i % 2 == 0
                        else AssistantMessage(message_id=f"a{i}", content=text, turn=i // 2 + 1)
                    )
                    await sessions.append(header.id, data)
                await store.set(
                    header.id,
                    Selection(
                        preset_id=preset.id,
                        character_card_id=card.record.id,
                        user_id=user.id,
                        world_book_ids=(book.id,),
                    ),
                )
                totals: list[float] = []
                shares: list[float] = []
                phases: dict[str, list[float]] = {}
                lore = 0
                for n in range(repeat + 3):
                    turn = TurnContext(
                        session_id=header.id,
                        turn=1000 + n,
                        delegation_depth=0,
                        claimed=(),
                        claim_seq=None,
                    )
                    compiled = await loader.compile(header.id, turn)
                    loader.drop_turn(header.id, turn.turn)
                    if n < 3:  # warm-up: the first compile builds the 10,000-entry matcher
                        continue
                    timings = compiled.timings_ms
                    totals.append(timings["total"])
                    shares.append(timings["worldBook"] / timings["total"])
                    for key, value in timings.items():
                        phases.setdefault(key, []).append(value)
                    lore = len(compiled.assembly_input.lore)
                totals.sort()
                median = statistics.median(totals)
                p95 = totals[min(len(totals) - 1, round(0.95 * (len(totals) - 1)))]
                baseline = baseline or median
                phase_text = ", ".join(
                    f"{k} {statistics.median(v):.1f}" for k, v in phases.items() if k != "total"
                )
                print(
                    f"{size:>5} messages: median {median:6.1f} ms  p95 {p95:6.1f} ms  "
                    f"world-book share {statistics.median(shares):5.1%}  "
                    f"x{median / baseline:4.2f} vs {sizes[0]}  lore {lore}  ({phase_text} ms)"
                )
        finally:
            await host.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--sizes", default="32,128,1024")
    parser.add_argument(
        "--deep",
        action="store_true",
        help="entries scan the whole bounded window (scanDepth 1000) instead of ST's default 2",
    )
    parser.add_argument(
        "--window", type=int, default=None, help="scan window in messages (default 128, max 1024)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    asyncio.run(run(args.repeat, sizes, args.deep, args.window))


if __name__ == "__main__":
    main()
