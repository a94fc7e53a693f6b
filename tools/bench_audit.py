#!/usr/bin/env python3
"""Benchmark adding one turn's assembly-audit record, as a session grows, in one run.

Three ways to store the same records (realistic schema-4 records of ``--record-kib`` KiB: a long
preset's section metadata and a lore-heavy turn's decisions), measured at turn 40 and turn 400 of
a session (``--turns``):

* ``store`` — :class:`innkeeper_tavern.state.trace.TraceStore` (one SQLite row per record, bounds
  applied in the same transaction);
* ``file`` — the previous design, one JSON file per session: read and decode the file, append,
  apply the bounds, encode, decode a copy, write a temp file, fsync, rename (what every turn paid
  before the store moved to SQLite);
* ``raw`` — the floor: encode the record, one raw ``INSERT`` + ``COMMIT`` of its bytes into a
  WAL database with ``synchronous=NORMAL`` (no bounds, no compaction).

Prints the median per-turn cost at each checkpoint and the ratios ``file/store`` (how much the
old design cost) and ``store/raw`` (how far from the floor), then what a record occupies: the
store keeps a session's records as deltas against a shared base chunk, the baseline is the raw
row of the record's JSON (the store's own layout before chunks). No assertions: read the numbers.

The records are what a long story writes: the same preset's section metadata every turn, the same
book's decisions with a few entries changing state from turn to turn, and per-turn references,
ids and hashes.

    uv run --no-sync python tools/bench_audit.py [--turns 40,400] [--samples 15] [--record-kib 96]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import msgspec

from innkeeper_tavern.state.resources import atomic
from innkeeper_tavern.state.trace import AssemblyRecord, SessionTraceFile, TraceStore
from innkeeper_tavern.state.trace.compaction import compact
from innkeeper_tavern.state.trace.limits import MAX_RECORDS_PER_SESSION, MAX_SESSION_BYTES
from innkeeper_tavern.state.trace.model import EventRef, Hashes, References, SectionMeta, SourceMeta

_file_decoder = msgspec.json.Decoder(SessionTraceFile)
_encoder = msgspec.json.Encoder()


def make_record(session: str, turn: int, kib: int) -> AssemblyRecord:
    """A record of about ``kib`` KiB: section metadata plus lore decisions."""
    sections = tuple(
        SectionMeta(
            name=f"pmp-dsh-tavern:part:{i}",
            identifier=f"prompt-{i:04d}",
            kind="prompt",
            role="system",
            bytes=100 + i,
            sha256=f"{i:064x}",
            sources=(SourceMeta(id=f"preset:{i}", kind="preset"),),
        )
        for i in range(120)
    )
    base = len(_encoder.encode(sections))
    decisions = [
        {
            "entryId": str(i),
            "entryName": f"Entry {i}",
            "decision": "included" if (i + turn) % 40 == 0 else "rejected",
            "reason": "primary-key-match" if (i + turn) % 40 == 0 else "no-match",
            "primaryKeys": [f"key{i}a", f"key{i}b"],
        }
        for i in range(max(0, (kib * 1024 - base) // 150))
    ]
    digest = hashlib.sha256(f"{session}:{turn}".encode()).hexdigest()
    return AssemblyRecord(
        record_id=f"t{turn}-s1",
        audit_id=digest[:32],
        references=References(
            system=EventRef(type="system/message", seq=turn * 9, sha256=digest),
            reply=EventRef(type="assistant/message", seq=turn * 9 + 4, sha256=digest[::-1]),
            turn_end=EventRef(type="turn/end", seq=turn * 9 + 5, sha256=digest[1:] + "0"),
        ),
        hashes=Hashes(system=digest, audit=digest[2:] + "00"),
        session_id=session,
        turn=turn,
        step=1,
        captured_at="2026-01-01T00:00:00.000Z",
        status="sent",
        lore={"books": [{"resource": {"id": "book"}, "budget": {}, "decisions": decisions}]},
        sections=sections,
    )


def file_add(
    path: Path, session: str, record: AssemblyRecord, before: list[AssemblyRecord] | None = None
) -> None:
    """The previous per-session JSON file: whole-file read, bounds, re-encode, check, fsync.

    ``before`` seeds the file with earlier turns instead of reading it (the file only ever holds
    the newest records within the bounds, so seeding reaches the state turn-by-turn writes would).
    """
    kept: list[AssemblyRecord] = []
    if before is not None:
        kept = before[-MAX_RECORDS_PER_SESSION:]
    elif path.exists():
        kept = list(_file_decoder.decode(path.read_bytes()).records)
    kept = [r for r in kept if r.record_id != record.record_id]
    fitted, _ = compact(record, 256 * 1024)
    merged = [*kept, fitted][-MAX_RECORDS_PER_SESSION:]
    sizes = [len(_encoder.encode(r)) for r in merged]
    while len(merged) > 1 and sum(sizes) + 512 > MAX_SESSION_BYTES:
        merged.pop(0)
        sizes.pop(0)
    document = SessionTraceFile(session_id=session, updated_at="now", records=merged)
    data = _encoder.encode(document)
    _file_decoder.decode(data)
    atomic.atomic_write(path, data)


def raw_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS r (seq INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    return conn


async def run(turns: list[int], samples: int, kib: int) -> None:
    records = [make_record("s", t, kib) for t in range(1, max(turns) + samples + 1)]
    print(f"record size ≈ {len(_encoder.encode(records[0])) / 1024:.0f} KiB")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = TraceStore(root / "store")
        await store.open()
        file_path = root / "file" / "session.json"
        file_path.parent.mkdir()
        raw = raw_connect(root / "raw.sqlite3")
        costs: dict[str, dict[int, list[float]]] = {
            "store": {t: [] for t in turns},
            "file": {t: [] for t in turns},
            "raw": {t: [] for t in turns},
        }

        def note(kind: str, turn: int, seconds: float) -> None:
            for checkpoint in turns:
                if checkpoint <= turn < checkpoint + samples:
                    costs[kind][checkpoint].append(seconds)

        for turn, record in enumerate(records, start=1):
            timed = any(c <= turn < c + samples for c in turns)
            started = time.perf_counter()
            await store.add("s", [record])
            note("store", turn, time.perf_counter() - started)
            started = time.perf_counter()
            data = _encoder.encode(record)
            raw.execute("BEGIN")
            raw.execute("INSERT INTO r (data) VALUES (?)", (data,))
            raw.execute("COMMIT")
            note("raw", turn, time.perf_counter() - started)
            # The old design is slow: run it only where it is measured, seeding the file with the
            # earlier turns (untimed) when a checkpoint starts.
            if timed:
                if turn in turns and turn > 1:
                    await asyncio.to_thread(
                        file_add, file_path, "s", records[turn - 2], records[: turn - 2]
                    )
                started = time.perf_counter()
                await asyncio.to_thread(file_add, file_path, "s", record)
                note("file", turn, time.perf_counter() - started)
        stats = store.chunk_stats()
        await store.close()
        raw.close()
    print(
        f"{'turn':>6} {'store ms':>9} {'file ms':>9} {'raw ms':>8} "
        f"{'file/store':>11} {'store/raw':>10}"
    )
    for turn in turns:
        s, f, r = (statistics.median(costs[k][turn]) * 1000 for k in ("store", "file", "raw"))
        print(f"{turn:>6} {s:>9.2f} {f:>9.2f} {r:>8.3f} {f / s:>10.1f}× {s / r:>9.1f}×")
    kept = stats["records"]
    stored = (stats["rowBytes"] + stats["chunkBytes"]) / kept
    whole = stats["recordBytes"] / kept
    print(
        f"disk per record ({kept} kept, {stats['chunks']} base chunks): store {stored:,.0f} B, "
        f"raw row {whole:,.0f} B (raw/store {whole / stored:.1f}×)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", default="40,400", help="checkpoints (comma-separated)")
    parser.add_argument("--samples", type=int, default=15, help="turns timed per checkpoint")
    parser.add_argument("--record-kib", type=int, default=96, help="size of one record")
    args = parser.parse_args()
    turns = sorted(int(t) for t in args.turns.split(","))
    asyncio.run(run(turns, args.samples, args.record_kib))


if __name__ == "__main__":
    main()
