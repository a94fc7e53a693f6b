"""``tavernScopeCatalog.search_scopes`` page latency against listing the store, and the index's
memory, at the stores' cap (4,096 characters).

Seeds ``--count`` card documents in a temporary data directory, opens the real stores and
measures, in the same run:

- **baseline**: ``TavernResources.list_characters()``, the whole sidebar listing that
  ``GET /characters`` serves from the metadata index. A client without the catalog would list
  everything and filter the rows on its side (pre-encoded rows, no body read);
- **catalog**: one 50-item page of ``search_scopes``, the first page and one in the middle of a
  cursor chain, without a query and with a substring query, each including the per-page file
  fingerprint checks (stats of the returned files and the folder).

It prints the medians and the ratio catalog / baseline, plus the index's memory (tracemalloc
while the three source indexes are built) and what it comes to per resource.

    uv run --no-sync python tools/bench_catalog.py [--count 4096] [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "tavern" / "tests"))

from catalog_harness import open_stores, seed_characters

from innkeeper_tavern.features.catalogs.scope import ScopeCatalog


async def median_us(call: Callable[[], Awaitable[Any]], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def main(count: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seed_characters(root, count)
        resources, selections = await open_stores(root)
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        catalog = ScopeCatalog(resources, selections, lambda: None)
        for source in catalog.sources.values():
            source.sync()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        index_bytes = sum(s.size_diff for s in after.compare_to(before, "filename"))

        async def baseline() -> None:
            resources.list_characters()

        middle = (await catalog.search_scopes(field="characterId", limit=50))["nextCursor"]
        for _ in range(count // 100):  # about half way down the chain
            page = await catalog.search_scopes(field="characterId", limit=50, cursor=middle)
            middle = page["nextCursor"]

        async def first_page() -> None:
            await catalog.search_scopes(field="characterId", limit=50)

        async def middle_page() -> None:
            await catalog.search_scopes(field="characterId", limit=50, cursor=middle)

        async def query_page() -> None:
            await catalog.search_scopes(field="characterId", query="hero 01", limit=50)

        base = await median_us(baseline, rounds)
        print(f"resources: {count} characters; {rounds} rounds each; medians")
        print(f"baseline list_characters (whole listing): {base:9.1f} µs")
        for label, call in (
            ("search_scopes first page (50)", first_page),
            ("search_scopes mid-chain page (50)", middle_page),
            ("search_scopes query 'hero 01' (50)", query_page),
        ):
            took = await median_us(call, rounds)
            print(f"{label:<38} {took:9.1f} µs  ratio {took / base:5.2f}× baseline")
        print(
            f"index memory (3 sources, {count} entries): {index_bytes / 1024:.0f} KiB "
            f"({index_bytes / count:.0f} B per resource)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.rounds))
