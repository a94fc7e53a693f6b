"""``GET /pmp-dsh-tavern/api/v1/characters`` with 4,096 stored cards, against a baseline route
that reads and parses every card body, in one run (issue 4 goal: ≥ 20× faster).

Seeds a temporary data directory with 4,096 copies of a real corpus card (SillyTavern's default
Seraphina, V2 with an embedded book; names and ids vary), starts a real host on loopback, loads
the Tavern plugin (its first open builds the metadata index: timed and printed too) and a drop-in
baseline plugin whose route lists the same catalog by reading and decoding every
``characters/<id>.json``. Both are timed over HTTP with the same client; medians are compared.

    uv run --no-sync python tools/bench_characters.py [--cards 4096] [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

REPO = Path(__file__).resolve().parents[1]
CARD = REPO.parent / "shared" / "sillytavern-corpus" / "sillytavern-repo" / "staging-1ac6780"
CARD_FILE = CARD / "default_Seraphina.png"
V1 = "/pmp-dsh-tavern/api/v1"

BASELINE_PLUGIN = '''
"""Bench baseline: the character catalog built by reading and parsing every card body."""

from pathlib import Path

from innkeeper_hostapi import hookimpl, json_response
from innkeeper_tavern.state.resources.character_state import sort_entries
from innkeeper_tavern.state.resources.kinds import CHARACTERS
from innkeeper_tavern.state.resources.library import DocumentLibrary
from innkeeper_tavern.state.resources.service import random_id, summary_wire, utc_now
import logging

FOLDER = Path({folder!r})


@hookimpl
def innkeeper_plugin_setup(ctx):
    library = DocumentLibrary(
        FOLDER.parent, CHARACTERS, clock=utc_now, ids=random_id,
        logger=logging.getLogger("bench"),
    )

    async def baseline(request):
        entries = []
        for path in sorted(FOLDER.glob("character-*.json")):
            data = path.read_bytes()
            record = library.decode(data)
            entries.append(library._entry(record, data, path.stat()))
        ordered = sort_entries(entries, "updated", [])
        return json_response({{"ok": True, "characters": [summary_wire(e) for e in ordered]}})

    ctx.add_route("GET", "/bench/characters-baseline", baseline)
'''


def seed(root: Path, count: int) -> int:
    """Write ``count`` card documents the way the library stores them; returns bytes per card."""
    import logging

    from innkeeper_tavern.pure.formats.card import parse_card_bytes
    from innkeeper_tavern.state.resources.kinds import CHARACTERS
    from innkeeper_tavern.state.resources.library import DocumentLibrary, Record
    from innkeeper_tavern.state.resources.service import random_id, utc_now

    library = DocumentLibrary(
        root, CHARACTERS, clock=utc_now, ids=random_id, logger=logging.getLogger("bench")
    )
    card = parse_card_bytes(CARD_FILE.read_bytes())
    folder = root / "characters"
    folder.mkdir(parents=True)
    size = 0
    for i in range(count):
        named = msgspec.structs.replace(card, name=f"{card.name} {i:04d}")
        stamp = f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000Z"
        data = library.encode(Record(f"character-{i:05d}", stamp, stamp, named))
        (folder / f"character-{i:05d}.json").write_bytes(data)
        size = len(data)
    return size


async def timed(session: aiohttp.ClientSession, url: Any, rounds: int) -> tuple[float, int]:
    times = []
    length = 0
    for _ in range(rounds):
        start = time.perf_counter()
        async with session.get(url) as resp:
            body = await resp.read()
            assert resp.status == 200, body[:200]
        times.append(time.perf_counter() - start)
        length = len(body)
    return statistics.median(times), length


async def timed_after_change(session: aiohttp.ClientSession, host: Any, rounds: int) -> float:
    """GET right after a library-state write, so the catalog is rebuilt from the index."""
    times = []
    order_url = host.client.make_url(f"{V1}/characters/order")
    list_url = host.client.make_url(f"{V1}/characters")
    for i in range(rounds):
        mode = "name" if i % 2 else "updated"
        async with session.put(
            order_url, json={"mode": mode}, headers={"Origin": host.origin}
        ) as resp:
            assert resp.status == 200, await resp.text()
        start = time.perf_counter()
        async with session.get(list_url) as resp:
            await resp.read()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def run(cards: int, rounds: int) -> None:
    from innkeeper_core.testing import start_test_host

    tmp = Path(tempfile.mkdtemp(prefix="bench-characters-"))
    try:
        data_dir = tmp / "data"
        root = data_dir / "plugins" / "tavern"
        per_card = seed(root, cards)
        drop_in = tmp / "plugins" / "benchbase"
        drop_in.mkdir(parents=True)
        (drop_in / "__init__.py").write_text(
            textwrap.dedent(BASELINE_PLUGIN.format(folder=str(root / "characters")))
        )
        host = await start_test_host(data_dir)
        try:
            start = time.perf_counter()
            await host.load("tavern", "innkeeper_tavern.plugin")
            first_open = time.perf_counter() - start
            await host.unload("tavern")
            start = time.perf_counter()
            await host.load("tavern", "innkeeper_tavern.plugin")
            warm_open = time.perf_counter() - start
            await host.load("benchbase", str(drop_in))
            async with aiohttp.ClientSession() as session:
                ours_url = host.client.make_url(f"{V1}/characters")
                base_url = host.client.make_url("/bench/characters-baseline")
                await timed(session, ours_url, 2)
                await timed(session, base_url, 1)
                ours, ours_len = await timed(session, ours_url, rounds)
                rebuilt = await timed_after_change(session, host, rounds)
                base, base_len = await timed(session, base_url, max(3, rounds // 10))
        finally:
            await host.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"cards stored:                       {cards} (≈{per_card / 1024:.1f} KiB each on disk)")
    print(f"plugin first open (builds index):   {first_open * 1000:8.1f} ms")
    print(f"plugin reopen (index reused):       {warm_open * 1000:8.1f} ms")
    print(f"GET /v1/characters (index), median: {ours * 1000:8.2f} ms  ({ours_len} bytes)")
    print(f"GET right after a change (rebuilt): {rebuilt * 1000:8.2f} ms")
    print(f"baseline (read+parse bodies):       {base * 1000:8.2f} ms  ({base_len} bytes)")
    print(f"ratio baseline / index (cached):    {base / ours:8.1f}x  (goal >= 20x)")
    print(f"ratio baseline / index (rebuilt):   {base / rebuilt:8.1f}x  (goal >= 20x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(run(args.cards, args.rounds))


if __name__ == "__main__":
    main()
