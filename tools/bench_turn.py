"""Turn overhead: prompt to first streamed token, and to ``turn/end``, with the synthetic provider.

Runs a real host on a loopback test server, twice in one run: bare (no plugins: the baseline)
and with the Assembler and Tavern plugins loaded, the bench_story profile bound (corpus preset
"Lucid Loom v2.8", book and card, a generated 10,000-entry book, a user) and the Tavern's audit
recorded at every turn end. Each sample sends ``POST /prompt`` and waits for the first
``assistant/partial`` frame, then for ``turn/end``, on the session's SSE stream. The provider is
wrapped to time its own part (from the host calling ``stream()`` to its first token), so the
host's share is ``(total - provider) / total``. A session is reused for ``--turns`` samples
(history grows).

    uv run --no-sync python tools/bench_turn.py [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from bench_story import BOOK, CARD, PRESET, generated_book
from innkeeper_core.agents.manager import AgentManager
from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.providers import Provider, ProviderRequest, StreamItem, TextDelta


class TimedProvider:
    """Wraps a provider and records the time from ``stream()`` to its first token."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.first_token: list[float] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamItem]:
        start = time.perf_counter()
        first = True
        async for item in self.inner.stream(request):
            if first and isinstance(item, TextDelta):
                self.first_token.append(time.perf_counter() - start)
                first = False
            yield item


async def bind_profile(host: CoreTestHost, session: str) -> None:
    """Import the bench_story profile (corpus preset, book and card, a generated 10,000-entry
    book, a user) and bind it to ``session``."""
    from innkeeper_tavern.plugin import TAVERN_RESOURCES
    from innkeeper_tavern.state.session_bindings import SESSION_SELECTIONS, Selection

    rng = random.Random(18)
    resources = host.get(TAVERN_RESOURCES)
    preset = await resources.import_preset(PRESET.read_text(encoding="utf-8"), None)
    card = await resources.import_character(CARD.read_bytes(), CARD.name)
    books = [
        await resources.import_world_book(BOOK.read_bytes(), file_name=BOOK.name),
        await resources.import_world_book(generated_book(rng), file_name="generated.json"),
    ]
    user = await resources.create_user({"name": "Ada", "description": "A ranger."})
    await host.get(SESSION_SELECTIONS).set(
        session,
        Selection(
            preset_id=preset.id,
            character_card_id=card.record.id,
            user_id=user.id,
            world_book_ids=tuple(b.id for b in books),
        ),
    )


async def run(turns: int, plugins: bool) -> dict[str, float]:
    """Median first-token and whole-turn times (ms) and the provider's own share."""
    host = await start_test_host(Path(tempfile.mkdtemp(prefix="bench-turn-")) / "data")
    try:
        if plugins:  # the Assembler first, so the Tavern mounts with it
            await host.load("assembler", "innkeeper_assembler.plugin")
            await host.load("tavern", "innkeeper_tavern.plugin")
        manager = host.get(AGENTS)
        assert isinstance(manager, AgentManager)
        timed = TimedProvider(manager.provider)
        manager.provider = timed
        headers = {"Origin": host.origin}
        async with aiohttp.ClientSession() as http:
            created = await http.post(
                host.client.make_url("/host/api/sessions"), json={"title": "bench"}, headers=headers
            )
            session = (await created.json())["session"]["id"]
            if plugins:
                await bind_profile(host, session)
            events = await http.get(host.client.make_url(f"/host/api/sessions/{session}/events"))
            first: list[float] = []
            whole: list[float] = []
            for i in range(turns + 5):
                start = time.perf_counter()
                resp = await http.post(
                    host.client.make_url(f"/host/api/sessions/{session}/prompt"),
                    json={"text": f"message number {i} lore{i * 37 % 10_000}"},
                    headers=headers,
                )
                await resp.read()
                while True:
                    line = await events.content.readline()
                    if line == b"event: assistant/partial\n":
                        break
                elapsed = time.perf_counter() - start
                while True:  # the turn ends after the reply is stored (and audited)
                    line = await events.content.readline()
                    if line == b"event: turn/end\n":
                        break
                ended = time.perf_counter() - start
                await manager.wait_idle(session)
                if i >= 5:  # warm-up (the first turn compiles the 10,000-entry book)
                    first.append(elapsed)
                    whole.append(ended)
            events.close()
        provider_part = timed.first_token[5:]
    finally:
        await host.close()
    return {
        "first": statistics.median(first) * 1000,
        "first_p90": statistics.quantiles(first, n=10)[-1] * 1000,
        "whole": statistics.median(whole) * 1000,
        "provider": statistics.median(provider_part) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    turns = parser.parse_args().turns
    bare = asyncio.run(run(turns, plugins=False))
    full = asyncio.run(run(turns, plugins=True))
    print(f"turns: {turns} (after 5 warm-up), one session, history growing to {2 * turns} messages")
    print(f"{'host':<34} | {'first token':>11} | {'p90':>7} | {'whole turn':>10} | host share")
    for label, r in (("bare (no plugins): baseline", bare), ("Tavern + Assembler + audit", full)):
        share = 100 * (1 - r["provider"] / r["first"])
        print(
            f"{label:<34} | {r['first']:8.2f} ms | {r['first_p90']:7.2f} | "
            f"{r['whole']:7.2f} ms | {share:5.1f}%"
        )
    print(
        f"profile / bare: first token x{full['first'] / bare['first']:.1f}, "
        f"whole turn x{full['whole'] / bare['whole']:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
