"""Group turn assembly: a group of 8 members with an ~8,000-token card each against a
single-character turn with one such card, in the same run (docs/groups.md "Prompt assembly").

One real host on a loopback test server, the Assembler and the Tavern loaded, the synthetic
provider wrapped to note when the host calls it. Each sample is ``POST …/user-message`` over
HTTP until the provider's ``stream()`` is called: the turn's whole assembly (claim, the
Tavern's compile with lore, the Assembler's request, and for a group the speaker's choice,
its record and the group view). Three playthroughs, sampled in turn so load drifts hit all
alike:

- baseline: a single-character playthrough with one ~8,000-token card;
- group, swap mode: 8 members with ~8,000-token cards; the speaker rotates (the player's
  next-speaker pick, so each message is answered by one member);
- group, join mode: the same members, all 8 cards joined into each request (~64,000 tokens).

History grows by one exchange per sample (``--turns``, after 3 warm-up turns each).

    nice -n 10 uv run --no-sync python tools/bench_group_assembly.py [--turns 30]
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
from typing import Any

import aiohttp

from innkeeper_core.agents.manager import AgentManager
from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.providers import Provider, ProviderRequest, StreamItem

V1 = "/pmp-dsh-tavern/api/v1"
V2 = "/pmp-dsh-tavern/api/v2"
#: Innkeeper's token estimate is ``ceil(characters / 3.5)``: ~8,000 tokens.
CARD_CHARS = 28_000
MEMBERS = 8
WARMUP = 3


class CallTimes:
    """Wraps a provider and records when the host calls ``stream()``."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.called = asyncio.Event()
        self.at = 0.0

    @property
    def name(self) -> str:
        return self.inner.name

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamItem]:
        self.at = time.perf_counter()
        self.called.set()
        async for item in self.inner.stream(request):
            yield item


def card_text(rng: random.Random, name: str) -> str:
    words = ["river", "lantern", "oath", "ember", "cobble", "harbor", "thistle", "vow", "mist"]
    out: list[str] = [f"{name} is a traveller."]
    size = len(out[0])
    while size < CARD_CHARS:
        word = rng.choice(words) + str(rng.randrange(1000))
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


class Bench:
    def __init__(self, host: CoreTestHost, http: aiohttp.ClientSession) -> None:
        self.host = host
        self.http = http
        self.headers = {"Origin": host.origin}

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        resp = await self.http.request(
            method, self.host.client.make_url(path), json=body, headers=self.headers
        )
        data = await resp.json()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {data}")
        return data

    async def card(self, rng: random.Random, name: str) -> str:
        body = {"name": name, "description": card_text(rng, name), "firstMessage": "Hello."}
        return str((await self.call("POST", V1 + "/characters", body))["character"]["id"])

    async def group(self, members: list[str], mode: str) -> str:
        body = {
            "name": f"Party {mode}",
            "members": [{"characterId": m} for m in members],
            "activationStrategy": "manual",
            "generationMode": mode,
        }
        return str((await self.call("POST", V1 + "/groups", body))["group"]["id"])


async def run(turns: int) -> dict[str, list[float]]:
    host = await start_test_host(Path(tempfile.mkdtemp(prefix="bench-group-")) / "data")
    times: dict[str, list[float]] = {"single": [], "swap": [], "join": []}
    try:
        await host.load("assembler", "innkeeper_assembler.plugin")
        await host.load("tavern", "innkeeper_tavern.plugin")
        manager = host.get(AGENTS)
        assert isinstance(manager, AgentManager)
        timed = CallTimes(manager.provider)
        manager.provider = timed
        rng = random.Random(31)
        async with aiohttp.ClientSession() as http:
            bench = Bench(host, http)
            await bench.call("PUT", V1 + "/ui-settings", {"locale": "en", "scale": 1,
                                                          "rpFollowCharacter": False})  # fmt: skip
            members = [await bench.card(rng, f"Member{i}") for i in range(MEMBERS)]
            solo_card = await bench.card(rng, "Solo")
            solo = (await bench.call("POST", V2 + "/sessions", {}))["sessionId"]
            await bench.call(
                "POST",
                V1 + "/character-selection",
                {"sessionId": solo, "characterCardId": solo_card},
            )
            sessions: dict[str, str] = {"single": solo}
            for mode in ("swap", "join"):
                gid = await bench.group(members, mode)
                started = await bench.call("POST", f"{V2}/groups/{gid}/playthroughs", {})
                sessions[mode] = started["sessionId"]
            for i in range(turns + WARMUP):
                for kind, sid in sessions.items():
                    if kind != "single":
                        pick = {"speakerId": members[i % MEMBERS]}
                        await bench.call("POST", f"{V2}/sessions/{sid}/group/next-speaker", pick)
                    timed.called.clear()
                    start = time.perf_counter()
                    await bench.call(
                        "POST",
                        f"{V2}/sessions/{sid}/user-message",
                        {"text": f"message {i} about the river{i}"},
                    )
                    await timed.called.wait()
                    elapsed = timed.at - start
                    await manager.wait_idle(sid)
                    if i >= WARMUP:
                        times[kind].append(elapsed * 1000)
    finally:
        await host.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    turns = parser.parse_args().turns
    times = asyncio.run(run(turns))
    base = statistics.median(times["single"])
    print(f"{turns} turns each (after {WARMUP} warm-up), ~8,000-token cards, history growing")
    print(f"{'playthrough':<40} | {'median':>9} | {'p90':>9} | ratio")
    labels = {
        "single": "single character (baseline)",
        "swap": f"group of {MEMBERS}, swap mode",
        "join": f"group of {MEMBERS}, join mode (all cards)",
    }
    for kind, label in labels.items():
        median = statistics.median(times[kind])
        p90 = statistics.quantiles(times[kind], n=10)[-1]
        print(f"{label:<40} | {median:6.2f} ms | {p90:6.2f} ms | x{median / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
