"""Concurrent requests to one store: generation CAS publishes once, and reads taken during
publications never see a collected file."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from innkeeper_tavern.features.opening_rendering_cache.model import Graph, parse_graph
from innkeeper_tavern.features.opening_rendering_cache.store import RenderingCacheStore


def graph(tag: str) -> Graph:
    return parse_graph(
        {
            "metadata": {"tag": tag},
            "sources": [{"url": "https://c.example/a.js", "content": tag, "downloadedAt": 1}],
        }
    )


async def test_twenty_writers_on_one_generation_publish_exactly_once(tmp_path: Path) -> None:
    store = RenderingCacheStore(tmp_path, logger=logging.getLogger("test"))
    await store.open()
    generations = await asyncio.gather(*(store.begin("o") for _ in range(20)))
    assert sorted(generations) == list(range(1, 21))
    results = await asyncio.gather(*(store.publish("o", 20, graph(f"w{i}")) for i in range(20)))
    assert results.count(True) == 1
    winner = results.index(True)
    async with store.reading():
        (ref,) = store.owner("o").sources
        assert await store.read(ref) == f"w{winner}"
    # The older generations are stale.
    assert not await store.publish("o", 19, graph("late"))


async def test_reads_during_publications_never_see_a_collected_file(tmp_path: Path) -> None:
    store = RenderingCacheStore(tmp_path, logger=logging.getLogger("test"))
    await store.open()
    await store.publish("o", await store.begin("o"), graph("v0"))

    async def writer() -> None:
        for i in range(1, 30):
            await store.publish("o", await store.begin("o"), graph(f"v{i}"))

    async def reader() -> list[str]:
        seen = []
        for _ in range(60):
            async with store.reading():
                for ref in store.owner("o").sources:
                    seen.append(await store.read(ref))
            await asyncio.sleep(0)
        return seen

    _, seen = await asyncio.gather(writer(), reader())
    assert seen and all(text.startswith("v") for text in seen)
