#!/usr/bin/env python3
"""Benchmark the v2 play surface against the alternatives a client would use.

1. ``GET /pmp-dsh-tavern/api/v2/sessions/:id/messages`` for sessions of 1,000 / 10,000 /
   100,000 events, against reading the host's own history pages
   (``GET /host/api/sessions/:id/history?limit=1000`` pinned with ``throughSeq``, every page until
   ``hasMore`` is false) — what a client that derives messages itself would fetch. Both go over
   real loopback HTTP to one in-process server; wall time (median) and tracemalloc peak of the
   whole request (server and client share the process) are printed with their ratios.
2. Catalog CAS throughput: 8 concurrent writers each append 25 rows to one ``catalog.json``
   through ``PUT /workspace/files`` with ``expectedRevision``, rereading and replaying the intent
   after every 409. Printed: landed ops/s, conflicts (retries) per landed op, against the same
   writers updating an ordinary file with no revision check (the lower bound: no CAS at all, and
   lost updates).

Usage: uv run --no-sync python tools/bench_play.py [--sizes 1000,10000,100000] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from innkeeper_core.app import CONTAINER
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    EventData,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    text_content,
)

V2 = "/pmp-dsh-tavern/api/v2"
EVENTS_PER_TURN = 4  # turn/start, user/message, assistant/message, turn/end


def turns(count: int) -> list[EventData]:
    events: list[EventData] = []
    for turn in range(1, count + 1):
        events += [
            TurnStart(turn=turn),
            UserMessage(
                message_id=f"u{turn}", content=text_content(f"question {turn} " * 8), turn=turn
            ),
            AssistantMessage(
                message_id=f"a{turn}", content=text_content(f"answer {turn} " * 30), turn=turn
            ),
            TurnEnd(turn=turn, reason=TurnEndReason(kind="completed")),
        ]
    return events


async def measure(run: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, int]:
    """Median wall time of ``repeat`` runs, then the tracemalloc peak of one more run (timed
    apart: tracing slows allocation-heavy code several-fold)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        await run()
        times.append(time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    await run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak


async def bench_messages(sizes: list[int], repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        host = await start_test_host(Path(tmp) / "data")
        try:
            await host.load("tavern", "innkeeper_tavern.plugin")
            client = host.client
            origin = {"Origin": host.origin}
            root = Path(tmp) / "ws"
            root.mkdir()
            await client.put(V2 + "/workspace", json={"path": str(root)}, headers=origin)
            store = await client.app[CONTAINER].store()
            print(
                f"{'events':>8} {'v2 messages':>12} {'host pages':>12} {'ratio':>6} "
                f"{'peak v2':>9} {'peak host':>9} {'mem ratio':>9}"
            )
            for size in sizes:
                created = await client.post(V2 + "/sessions", json={}, headers=origin)
                sid = (await created.json())["sessionId"]
                events = turns(size // EVENTS_PER_TURN)
                for i in range(0, len(events), 1000):
                    await store.append_many(sid, events[i : i + 1000])

                async def v2(sid: str = sid, size: int = size) -> None:
                    resp = await client.get(f"{V2}/sessions/{sid}/messages")
                    body = await resp.json()
                    assert len(body["messages"]) == 2 * (size // EVENTS_PER_TURN)

                async def pages(sid: str = sid, size: int = size) -> None:
                    url = f"/host/api/sessions/{sid}/history?limit=1000"
                    resp = await client.get(url)
                    page = await resp.json()
                    got = list(page["events"])
                    through = page["throughSeq"]
                    while page["hasMore"]:
                        before = page["nextBeforeSeq"]
                        resp = await client.get(f"{url}&beforeSeq={before}&throughSeq={through}")
                        page = await resp.json()
                        got += page["events"]
                    assert len(got) == size

                t_v2, m_v2 = await measure(v2, repeat)
                t_host, m_host = await measure(pages, repeat)
                print(
                    f"{size:>8} {t_v2 * 1000:>10.1f}ms {t_host * 1000:>10.1f}ms "
                    f"{t_v2 / t_host:>6.2f} {m_v2 / 2**20:>7.1f}MB {m_host / 2**20:>7.1f}MB "
                    f"{m_v2 / m_host:>9.2f}"
                )
        finally:
            await host.close()


async def bench_cas(writers: int, rows_each: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        host = await start_test_host(Path(tmp) / "data")
        try:
            await host.load("tavern", "innkeeper_tavern.plugin")
            client = host.client
            origin = {"Origin": host.origin}
            root = Path(tmp) / "ws"
            root.mkdir()
            await client.put(V2 + "/workspace", json={"path": str(root)}, headers=origin)

            async def put(path: str, body: dict[str, Any]) -> int:
                resp = await client.put(
                    f"{V2}/workspace/files?path={path}", json=body, headers=origin
                )
                await resp.read()
                return resp.status

            await put("catalog.json", {"content": '{"playthroughs": []}', "expectedRevision": None})
            await put("plain.json", {"content": '{"playthroughs": []}'})
            conflicts = 0

            async def cas_writer(w: int) -> None:
                nonlocal conflicts
                for r in range(rows_each):
                    while True:
                        resp = await client.get(f"{V2}/workspace/files?path=catalog.json")
                        current = await resp.json()
                        doc = json.loads(current["content"])
                        doc["playthroughs"].append(
                            {"id": f"p-{w}-{r}", "path": f"w{w}/p-{w}-{r}/timeline.json"}
                        )
                        status = await put(
                            "catalog.json",
                            {"content": json.dumps(doc), "expectedRevision": current["revision"]},
                        )
                        if status == 200:
                            break
                        conflicts += 1

            async def plain_writer(w: int) -> None:
                for r in range(rows_each):
                    resp = await client.get(f"{V2}/workspace/files?path=plain.json")
                    doc = json.loads((await resp.json())["content"])
                    doc["playthroughs"].append({"id": f"p-{w}-{r}"})
                    await put("plain.json", {"content": json.dumps(doc)})

            ops = writers * rows_each
            start = time.perf_counter()
            await asyncio.gather(*(cas_writer(w) for w in range(writers)))
            t_cas = time.perf_counter() - start
            final = json.loads((root / "catalog.json").read_text())
            assert len(final["playthroughs"]) == ops
            start = time.perf_counter()
            await asyncio.gather(*(plain_writer(w) for w in range(writers)))
            t_plain = time.perf_counter() - start
            kept = len(json.loads((root / "plain.json").read_text())["playthroughs"])
            print(
                f"CAS: {writers} writers x {rows_each} appends: {ops / t_cas:.0f} landed ops/s, "
                f"{conflicts / ops:.2f} retries/op, {ops}/{ops} intents kept"
            )
            print(
                f"no-CAS baseline: {ops / t_plain:.0f} ops/s, {kept}/{ops} intents kept "
                f"(ratio CAS/no-CAS time {t_cas / t_plain:.2f})"
            )
        finally:
            await host.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    # Operation records of the replayed conflicts are warnings; keep the output to the figures.
    logging.getLogger("innkeeper").setLevel(logging.ERROR)
    sizes = [int(s) for s in args.sizes.split(",")]
    asyncio.run(bench_messages(sizes, args.repeat))
    asyncio.run(bench_cas(args.writers, args.rows))


if __name__ == "__main__":
    main()
