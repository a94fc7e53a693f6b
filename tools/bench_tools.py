"""Tool-step overhead: a turn with one tool step against the same turn without tools.

Runs a real host in-process with the synthetic provider and a no-op tool. Each sample is a whole
turn from ``AGENTS.prompt`` to idle, on its own fresh session (so history does not grow):

* baseline: a plain turn (one request, a text reply);
* tool turn: request → the model calls ``noop`` → ``tool/result`` → second request → text reply.

The tool step (call → result → next request) costs ``tool turn − baseline``; the provider and
the handler are wrapped to time their own parts, so the host's share of the tool turn is
``(total − provider − handler) / total``. Printed: medians in ms and the ratio of the tool
step to a whole plain turn.

    uv run --no-sync python tools/bench_tools.py [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from innkeeper_core.agents.manager import AgentManager
from innkeeper_core.providers.synthetic import SyntheticProvider, SyntheticReply
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.agents import AGENTS, SESSIONS
from innkeeper_hostapi.providers import Provider, ProviderRequest, StreamItem
from innkeeper_hostapi.tools import ToolInvocation


class TimedProvider:
    """Wraps a provider and sums the time spent inside its streams."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.spent = 0.0

    @property
    def name(self) -> str:
        return self.inner.name

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamItem]:
        iterator = self.inner.stream(request).__aiter__()
        while True:
            start = time.perf_counter()
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                self.spent += time.perf_counter() - start
                return
            self.spent += time.perf_counter() - start
            yield item


async def run(turns: int) -> None:
    host = await start_test_host(Path(tempfile.mkdtemp(prefix="bench-tools-")) / "data")
    try:
        manager = host.get(AGENTS)
        assert isinstance(manager, AgentManager)
        synthetic = manager.provider
        assert isinstance(synthetic, SyntheticProvider)
        timed = TimedProvider(synthetic)
        manager.provider = timed
        handler_spent = [0.0]
        handled = [0]

        async def noop(call: ToolInvocation) -> str:
            start = time.perf_counter()
            handled[0] += 1
            handler_spent[0] += time.perf_counter() - start
            return "ok"

        manager.tools.registry.add(
            "bench",
            "noop",
            "Does nothing.",
            {"type": "object"},
            noop,
            risk="read-only",
            timeout_s=None,
        )
        sessions = host.get(SESSIONS)

        async def turn(with_tool: bool) -> tuple[float, float]:
            session = (await sessions.create(title="bench")).id
            if with_tool:
                synthetic.enqueue(SyntheticReply.calling(("noop", {})), "done")
            else:
                synthetic.enqueue("done")
            timed.spent, handler_spent[0] = 0.0, 0.0
            start = time.perf_counter()
            await manager.prompt(session, "go")
            await manager.wait_idle(session)
            total = time.perf_counter() - start
            return total, timed.spent + handler_spent[0]

        plain: list[float] = []
        tool: list[float] = []
        outside: list[float] = []
        for i in range(turns + 10):
            p, _ = await turn(False)
            t, spent = await turn(True)
            if i >= 10:  # warm-up
                plain.append(p)
                tool.append(t)
                outside.append(spent / t)
        assert handled[0] == turns + 10, "every tool turn ran its call"
        plain_ms = statistics.median(plain) * 1000
        tool_ms = statistics.median(tool) * 1000
        step_ms = tool_ms - plain_ms
        print(f"turns per kind: {turns}")
        print(f"baseline plain turn (1 request):        median {plain_ms:.2f} ms")
        print(f"turn with one tool step (2 requests):   median {tool_ms:.2f} ms")
        print(f"tool step (call → result → request):    median {step_ms:.2f} ms")
        print(f"tool step / plain turn:                 {step_ms / plain_ms:.2f}x")
        print(f"host share of the tool turn:            {1 - statistics.median(outside):.1%}")
    finally:
        await host.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    asyncio.run(run(parser.parse_args().turns))


if __name__ == "__main__":
    main()
