"""Turn overhead: prompt to first streamed token with the synthetic provider.

Runs a real host on a loopback test server. Each sample sends ``POST /prompt`` and waits for the
first ``assistant/partial`` frame on the session's SSE stream. The provider is wrapped to time its
own part (from the host calling ``stream()`` to its first token), so the host's share is
``(total - provider) / total``. A session is reused for ``--turns`` samples (history grows).

    uv run --no-sync python tools/bench_turn.py [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from innkeeper_core.agents.manager import AgentManager
from innkeeper_core.testing import start_test_host
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


async def run(turns: int) -> None:
    host = await start_test_host(Path(tempfile.mkdtemp(prefix="bench-turn-")) / "data")
    try:
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
            events = await http.get(host.client.make_url(f"/host/api/sessions/{session}/events"))
            totals: list[float] = []
            for i in range(turns + 5):
                start = time.perf_counter()
                resp = await http.post(
                    host.client.make_url(f"/host/api/sessions/{session}/prompt"),
                    json={"text": f"message number {i}"},
                    headers=headers,
                )
                await resp.read()
                while True:
                    line = await events.content.readline()
                    if line == b"event: assistant/partial\n":
                        break
                elapsed = time.perf_counter() - start
                await manager.wait_idle(session)
                if i >= 5:  # warm-up
                    totals.append(elapsed)
            events.close()
        provider_part = timed.first_token[5:]
    finally:
        await host.close()
    total_ms = statistics.median(totals) * 1000
    provider_ms = statistics.median(provider_part) * 1000
    print(f"turns: {turns} (after 5 warm-up), one session, history growing to {2 * turns} messages")
    print(
        f"prompt -> first token: median {total_ms:.2f} ms, "
        f"p90 {statistics.quantiles(totals, n=10)[-1] * 1000:.2f} ms"
    )
    print(f"provider's own time to first token: median {provider_ms:.3f} ms")
    print(f"host share of the first-token latency: {100 * (1 - provider_ms / total_ms):.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    asyncio.run(run(parser.parse_args().turns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
