"""``tavernScopeCatalog.search_scopes`` page latency against listing the store, and the index's
memory (issue 15, "Measure and report").

Creates ``--count`` users (the stores' cap is 4,096 per kind) in a temporary data directory,
then times, in the same run:

1. the baseline a client would otherwise use: ``list_users()`` (what ``GET /v1/users`` answers,
   from the store's metadata index), then filter by the query, sort by id and take one page;
2. ``search_scopes("userId", query, limit=50)``: the first page, and a page deep in a cursor
   chain (the chain's last cursor).

It prints the medians, the ratio baseline / catalog and the memory of the catalog's sorted
index (``tracemalloc``, built once per library revision).

    uv run --no-sync python tools/bench_scope_catalog.py [--count 4096] [--repeat 200]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from innkeeper_tavern.catalogs import TavernScopeCatalog
from innkeeper_tavern.resources import TavernResources

QUERY = "mira"
LIMIT = 50


def median_ms(fn: object, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def main(count: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        resources = TavernResources(Path(tmp) / "data", logger=logging.getLogger("bench"))
        await resources.open()
        for i in range(count):
            await resources.create_user({"name": f"{'Mira' if i % 3 == 0 else 'Tob'} {i:05d}"})

        def baseline() -> list[dict[str, str]]:
            rows = [u for u in resources.list_users() if QUERY in str(u["name"]).casefold()]
            rows.sort(key=lambda u: str(u["id"]))
            return [{"id": u["id"], "name": u["name"]} for u in rows[:LIMIT]]

        tracemalloc.start()
        catalog = TavernScopeCatalog(resources)
        before = tracemalloc.take_snapshot()
        catalog.search_scopes("userId", QUERY, limit=LIMIT)  # builds the sorted index
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        index_bytes = sum(s.size_diff for s in after.compare_to(before, "filename"))
        assert [i["id"] for i in catalog.search_scopes("userId", QUERY).items] == [
            i["id"] for i in baseline()
        ]
        cursor = None
        while True:
            page = catalog.search_scopes("userId", QUERY, cursor=cursor, limit=LIMIT)
            if page.next_cursor is None:
                break
            last, cursor = cursor, page.next_cursor
        deep = last

        base = median_ms(baseline, repeat)
        first = median_ms(lambda: catalog.search_scopes("userId", QUERY, limit=LIMIT), repeat)
        late = median_ms(
            lambda: catalog.search_scopes("userId", QUERY, cursor=deep, limit=LIMIT), repeat
        )
        print(f"users: {count}, query {QUERY!r}, limit {LIMIT}, repeat {repeat}")
        print(f"baseline list_users + filter + sort + page: {base:.3f} ms")
        print(
            f"search_scopes first page: {first:.3f} ms  (baseline / catalog = {base / first:.1f}x)"
        )
        print(f"search_scopes last page:  {late:.3f} ms  (baseline / catalog = {base / late:.1f}x)")
        print(
            f"sorted index memory: {index_bytes / 1024:.0f} KiB ({index_bytes / count:.0f} B/user)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.repeat))
