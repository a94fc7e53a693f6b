#!/usr/bin/env python3
"""Benchmark the session event store against raw ``sqlite3`` on the same rows, in the same run.

For each session length N (10^3, 10^4, 10^5 by default) it measures:

* single appends: one awaited ``EventStore.append`` per event (one transaction each) vs raw
  ``INSERT`` + ``COMMIT`` per row;
* concurrent appends: 64 tasks appending at once (the writer groups them into shared
  transactions) vs the same raw per-row commits;
* batched appends: ``append_many`` of 1,000 events vs raw ``executemany`` + ``COMMIT`` of 1,000;
* the same lone appends measured without the clock of a busy machine: WAL frames (pages)
  written per append and process CPU time per append (the store's writer thread included), over
  200 more appends to the N-event sessions;
* ``page`` latency (limit 100) at the newest end, the middle and the oldest end, vs a raw
  ``SELECT ... ORDER BY seq DESC LIMIT 100`` of the same rows (the store also decodes them).

Both sides use WAL with ``synchronous=NORMAL`` and the same table layout. Ratios are
store / raw: 1.0 means "as fast as raw SQLite". No assertions: read the numbers.

    uv run --no-sync python tools/bench_events.py [--sizes 1000,10000,100000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

import msgspec

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.store import STORE_FILE_NAME
from innkeeper_hostapi.sessions import EventData, UserMessage, event_type, text_content

MODES = ("single", "concurrent", "batch")
PAGE = 100
BATCH = 1000
CONCURRENCY = 64
#: Lone appends counted for WAL frames: few enough that no auto-checkpoint (1,000 frames) runs.
LONE = 200
BODY = "The lantern swings in the rain; the innkeeper wipes the counter and listens. " * 3


def payloads(n: int) -> list[EventData]:
    return [UserMessage(message_id=f"m{i}", content=text_content(f"{i} {BODY}")) for i in range(n)]


def raw_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS events (sid INTEGER NOT NULL, seq INTEGER NOT NULL, "
        "at INTEGER NOT NULL, message INTEGER NOT NULL, data BLOB NOT NULL, "
        "PRIMARY KEY (sid, seq)) "
        "WITHOUT ROWID"
    )
    return conn


def raw_rows(sid: int, datas: Sequence[EventData]) -> list[tuple[int, int, int, int, bytes]]:
    encode = msgspec.json.Encoder().encode
    now = time.time_ns() // 1_000_000
    return [
        (sid, i + 1, now, int(event_type(d) == "user/message"), encode(d))
        for i, d in enumerate(datas)
    ]


INSERT = "INSERT INTO events (sid, seq, at, message, data) VALUES (?, ?, ?, ?, ?)"


def raw_single(conn: sqlite3.Connection, rows: list[tuple[int, int, int, int, bytes]]) -> None:
    for row in rows:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, row)
        conn.execute("COMMIT")


def raw_batched(conn: sqlite3.Connection, rows: list[tuple[int, int, int, int, bytes]]) -> None:
    for i in range(0, len(rows), BATCH):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, rows[i : i + BATCH])
        conn.execute("COMMIT")


def raw_page(conn: sqlite3.Connection, sid: int, before: int) -> list[tuple[int, int, bytes]]:
    return conn.execute(
        "SELECT seq, at, data FROM events WHERE sid = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
        (sid, before, PAGE),
    ).fetchall()


DECODER = msgspec.json.Decoder(EventData)


def raw_page_decoded(conn: sqlite3.Connection, sid: int, before: int) -> list[EventData]:
    return [DECODER.decode(blob) for _, _, blob in raw_page(conn, sid, before)]


async def store_chunk(store: EventStore, mode: str, sid: str, part: list[EventData]) -> None:
    """Append ``part`` the way ``mode`` says: one by one, 64 tasks at once, or batches."""
    if mode == "single":
        for data in part:
            await store.append(sid, data)
    elif mode == "concurrent":
        it = iter(part)

        async def worker() -> None:
            for data in it:
                await store.append(sid, data)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    else:
        for i in range(0, len(part), BATCH):
            await store.append_many(sid, part[i : i + BATCH])


def raw_chunk(
    conn: sqlite3.Connection, mode: str, rows: list[tuple[int, int, int, int, bytes]]
) -> None:
    """The raw baseline of :func:`store_chunk` (concurrency cannot help raw per-row commits)."""
    if mode == "batch":
        raw_batched(conn, rows)
    else:
        raw_single(conn, rows)


def wal_frames(conn: sqlite3.Connection, *, reset: bool = False) -> int:
    """Frames in the WAL of ``conn``'s database; ``reset`` checkpoints and empties it first."""
    if reset:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    frames: int = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    return frames


async def lone_appends(
    store: EventStore, sid: str, side: sqlite3.Connection, raw: sqlite3.Connection, n: int
) -> dict[str, float]:
    """WAL frames and CPU per lone append, store vs raw, ``LONE`` more appends each."""
    more = payloads(n + LONE)[n:]
    rows = raw_rows(1, payloads(n + LONE))[n:]
    wal_frames(side, reset=True)
    cpu = time.process_time()
    for data in more:
        await store.append(sid, data)
    store_cpu, store_frames = time.process_time() - cpu, wal_frames(side)
    wal_frames(raw, reset=True)
    cpu = time.process_time()
    raw_single(raw, rows)
    raw_cpu, raw_frames = time.process_time() - cpu, wal_frames(raw)
    return {
        "lone_frames_store": store_frames / LONE,
        "lone_frames_raw": raw_frames / LONE,
        "lone_cpu_store": store_cpu / LONE * 1e6,
        "lone_cpu_raw": raw_cpu / LONE * 1e6,
    }


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def atimed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def bench_size(n: int, repeat: int, rounds: int, tmp: Path) -> dict[str, float]:
    """Interleave store and raw work in ``rounds`` chunks so machine noise hits both alike."""
    datas = payloads(n)
    chunk = max(1, n // rounds)
    out: dict[str, float] = {}
    store_dir, raw_dir = tmp / f"store{n}", tmp / f"raw{n}"
    raw_dir.mkdir()
    async with await EventStore.open(store_dir) as store:
        with contextlib.closing(raw_connect(raw_dir / "raw.sqlite3")) as conn:
            sids = {mode: (await store.create_session()).id for mode in MODES}
            raws = {mode: raw_rows(index + 1, datas) for index, mode in enumerate(MODES)}
            for mode in MODES:
                sid = sids[mode]
                store_total = raw_total = 0.0
                ratios = []
                for lo in range(0, n, chunk):
                    part = datas[lo : lo + chunk]
                    rows = raws[mode][lo : lo + chunk]
                    t_store = await atimed(partial(store_chunk, store, mode, sid, part))
                    t_raw = timed(partial(raw_chunk, conn, mode, rows))
                    store_total += t_store
                    raw_total += t_raw
                    ratios.append(t_store / t_raw)
                out[f"{mode}_store"] = store_total / n * 1e6
                out[f"{mode}_raw"] = raw_total / n * 1e6
                out[f"{mode}_ratio"] = statistics.median(ratios)
            # page latency on the "single" sessions (n events each side)
            sid = sids["single"]
            with contextlib.closing(sqlite3.connect(store_dir / STORE_FILE_NAME)) as side:
                lone = await lone_appends(store, sid, side, conn, n)
            for label, before in (("newest", n + 1), ("middle", n // 2 + 1), ("oldest", PAGE + 1)):
                samples: dict[str, list[float]] = {"store": [], "raw": [], "rawdec": []}
                for _ in range(repeat):

                    async def page(before: int = before, sid: str = sid) -> object:
                        return await store.page(sid, before_seq=before, limit=PAGE, through_seq=n)

                    samples["store"].append(await atimed(page))
                    samples["raw"].append(timed(partial(raw_page, conn, 1, before)))
                    samples["rawdec"].append(timed(partial(raw_page_decoded, conn, 1, before)))
                for key, values in samples.items():
                    out[f"page_{label}_{key}"] = statistics.median(values) * 1000
    return out | lone


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=50, help="page samples per position")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved append chunks")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="innkeeper-bench-") as tmp:
        results = {n: await bench_size(n, args.repeat, args.rounds, Path(tmp)) for n in sizes}

    print(f"event body ~{len(BODY) + 8} chars; WAL, synchronous=NORMAL; ratio = store / raw\n")
    print("appends, µs per event (ratio = median over interleaved chunks of store/raw time)")
    print(f"{'N':>8} | {'mode':<11} | {'store':>8} | {'raw':>8} | {'ratio':>6}")
    for n, r in results.items():
        for mode in MODES:
            store, raw, ratio = r[f"{mode}_store"], r[f"{mode}_raw"], r[f"{mode}_ratio"]
            print(f"{n:>8} | {mode:<11} | {store:8.1f} | {raw:8.1f} | {ratio:6.2f}")
    print(f"\nlone appends after N, {LONE} each: WAL frames and process CPU µs per append")
    print(f"{'N':>8} | {'frames':>6} | {'raw':>6} | {'ratio':>6} | {'cpu':>6} | {'raw':>6} | ratio")
    for n, r in results.items():
        frames, raw_frames = r["lone_frames_store"], r["lone_frames_raw"]
        cpu, raw_cpu = r["lone_cpu_store"], r["lone_cpu_raw"]
        print(
            f"{n:>8} | {frames:6.2f} | {raw_frames:6.2f} | {frames / raw_frames:6.2f} | "
            f"{cpu:6.1f} | {raw_cpu:6.1f} | {cpu / raw_cpu:5.2f}"
        )
    print(
        f"\npage latency, limit {PAGE}, median ms (raw = SELECT only; raw+dec also decodes the "
        "rows with msgspec, i.e. the least work a page needs)"
    )
    header = f"{'N':>8} | {'where':<7} | {'store':>7} | {'raw':>7} | {'raw+dec':>7} | "
    print(header + f"{'/raw':>6} | {'/raw+dec':>8}")
    for n, r in results.items():
        for where in ("newest", "middle", "oldest"):
            store, raw, dec = (r[f"page_{where}_{k}"] for k in ("store", "raw", "rawdec"))
            print(
                f"{n:>8} | {where:<7} | {store:7.3f} | {raw:7.3f} | {dec:7.3f} | "
                f"{store / raw:6.2f} | {store / dec:8.2f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
