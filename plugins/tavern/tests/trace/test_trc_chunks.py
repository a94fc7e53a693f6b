"""Content-addressed audit storage: records as deltas against shared base chunks.

What a user relies on: every record reads back exactly as it was written (byte for byte, after a
restart, after evictions, from databases written before chunks existed), a chunk stays while a
row needs it and goes with the last one, and a long session's records stop costing their full
size on disk.
"""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.state.trace import AssemblyRecord, TraceLimits, TraceStore
from innkeeper_tavern.state.trace.compaction import encode_record
from innkeeper_tavern.state.trace.model import EventRef, References, SectionMeta, SourceMeta, Span
from innkeeper_tavern.state.trace.views import trace_record

#: The schema every version before chunks created (rows hold the record's JSON).
OLD_SCHEMA = """
CREATE TABLE records (
    seq INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    record_id TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE UNIQUE INDEX records_by_id ON records (session, record_id);
CREATE INDEX records_by_session ON records (session, seq);
"""


def realistic(session: str, turn: int, *, fired: set[int] = frozenset(), grow: int = 0) -> Any:
    """A record shaped like a long preset's turn: 80 sections, 120 lore decisions, references
    that change every turn; ``fired`` entries are included, ``grow`` bytes of (incompressible)
    identifier are inserted into section 3, moving everything after it."""
    rng = random.Random(turn)
    inserted = random.Random(grow).randbytes(grow // 2).hex()
    spans: list[SectionMeta] = []
    at = 0
    for i in range(80):
        size = 300 + i
        spans.append(
            SectionMeta(
                name=f"pmp-dsh-tavern:part:{i}",
                identifier=f"prompt-{i:03d}" + (inserted if i == 3 else ""),
                kind="prompt",
                role="system",
                bytes=size,
                sha256=f"{i * 7919 + (turn if i == 40 else 0):064x}",
                sources=(SourceMeta(id=f"preset:{i}", kind="preset"),),
                span=Span(start=at, end=at + size),
            )
        )
        at += size + 2
    decisions = [
        {
            "entryId": str(i),
            "entryName": f"Entry {i}",
            "decision": "included" if i in fired else "rejected",
            "reason": "primary-key" if i in fired else "no-key-match",
            "primaryKeys": [f"key{i}", f"alias{i}"],
            "primaryMatches": [f"key{i}"] if i in fired else [],
            "loop": 1 if i in fired else 0,
        }
        for i in range(120)
    ]
    return AssemblyRecord(
        record_id=f"t{turn}-s1",
        audit_id=f"{rng.getrandbits(128):032x}",
        session_id=session,
        turn=turn,
        step=1,
        captured_at=f"2026-01-01T00:{turn // 60 % 60:02d}:{turn % 60:02d}.000Z",
        status="sent",
        lore={"activation": {"seed": rng.getrandbits(32)}, "books": [{"decisions": decisions}]},
        sections=tuple(spans),
        references=References(
            system=EventRef(type="system/message", seq=turn * 9, sha256=f"{turn:064x}"),
            reply=EventRef(type="assistant/message", seq=turn * 9 + 5, sha256=f"{-turn:064x}"),
        ),
    )


def chunk_rows(store: TraceStore) -> tuple[set[int], set[int]]:
    """(chunk ids, chunk ids some row references)."""
    with closing(sqlite3.connect(store.path)) as conn:
        chunks = {c for (c,) in conn.execute("SELECT id FROM chunks")}
        used = {b for (b,) in conn.execute("SELECT base FROM records WHERE base IS NOT NULL")}
    return chunks, used


async def test_records_read_back_byte_identical_and_cost_a_delta(tmp_path: Path) -> None:
    store = TraceStore(tmp_path)
    await store.open()
    written: list[bytes] = []
    for turn in range(1, 41):
        record = realistic("s", turn, fired={turn % 120, (turn * 7) % 120})
        written.append(encode_record(record))
        await store.add("s", [record])
    assert await store.stored_json("s") == written
    assert [encode_record(r) for r in await store.records("s")] == written
    stats = store.chunk_stats()
    logical = sum(map(len, written))
    assert stats["recordBytes"] == logical
    # The section metadata and rejected decisions are stored once, not 40 times.
    assert stats["rowBytes"] + stats["chunkBytes"] < logical / 20
    assert stats["chunks"] < 5
    chunks, used = chunk_rows(store)
    assert chunks == used

    await store.close()
    again = TraceStore(tmp_path)
    await again.open()
    assert await again.stored_json("s") == written
    # Writing on after a restart builds on the stored base (nothing is re-stored whole).
    before = again.chunk_stats()["chunks"]
    record = realistic("s", 41)
    await again.add("s", [record])
    assert again.chunk_stats()["chunks"] == before
    assert (await again.stored_json("s"))[-1] == encode_record(record)


async def test_a_moved_tail_starts_a_new_base(tmp_path: Path) -> None:
    store = TraceStore(tmp_path)
    await store.open()
    records = [realistic("s", 1), realistic("s", 2, grow=40_000), realistic("s", 3, grow=40_000)]
    for record in records:
        await store.add("s", [record])
    assert await store.stored_json("s") == [encode_record(r) for r in records]
    assert store.chunk_stats()["chunks"] == 2


async def test_chunks_stay_while_referenced_and_go_with_the_last_row(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, limits=TraceLimits(max_records_per_session=3))
    await store.open()
    first = realistic("s", 1)
    await store.add("s", [first])
    (base,) = chunk_rows(store)[0]
    for turn in range(2, 4):
        await store.add("s", [realistic("s", turn)])
    # Turn 1 (the row the base came from) is evicted; turns 2 and 3 are deltas against it.
    await store.add("s", [realistic("s", 4)])
    assert [r.turn for r in await store.records("s")] == [2, 3, 4]
    assert chunk_rows(store) == ({base}, {base})
    assert [encode_record(r) for r in await store.records("s")] == [
        encode_record(realistic("s", t)) for t in (2, 3, 4)
    ]
    # A record far from the base becomes the next base; once no row uses the old one it goes.
    for turn in range(5, 8):
        await store.add("s", [realistic("s", turn, grow=40_000)])
    chunks, used = chunk_rows(store)
    assert base not in chunks and chunks == used and len(chunks) == 1
    assert await store.delete_session("s")
    assert chunk_rows(store) == (set(), set())


async def test_databases_from_before_chunks_upgrade_in_place(tmp_path: Path) -> None:
    folder = tmp_path / "assembly-audit"
    folder.mkdir()
    old = [realistic("s", turn) for turn in (1, 2)]
    with closing(sqlite3.connect(folder / "audit.sqlite3")) as conn, conn:
        conn.executescript(OLD_SCHEMA)
        for record in old:
            data = encode_record(record)
            conn.execute(
                "INSERT INTO records (session, record_id, bytes, data) VALUES (?, ?, ?, ?)",
                ("s", record.record_id, len(data), data),
            )
    store = TraceStore(tmp_path, limits=TraceLimits(max_records_per_session=3))
    await store.open()
    views_before = [trace_record(r) for r in old]
    assert await store.stored_json("s") == [encode_record(r) for r in old]
    assert [trace_record(r) for r in await store.records("s")] == views_before
    assert store.storage("s")["sessionBytes"] == sum(len(encode_record(r)) for r in old) + 512
    new = [realistic("s", turn) for turn in (3, 4)]
    for record in new:
        await store.add("s", [record])
    await store.close()
    await store.open()
    # Turn 1 evicted (an old-layout row: no chunk to release); 2 old, 3 and 4 chunked.
    assert await store.stored_json("s") == [encode_record(r) for r in (old[1], *new)]
    with closing(sqlite3.connect(store.path)) as conn:
        layout = [b is None for (b,) in conn.execute("SELECT base FROM records ORDER BY seq")]
    assert layout == [True, False, False]


async def test_a_corrupt_row_is_skipped_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TraceStore(tmp_path)
    await store.open()
    for turn in (1, 2, 3):
        await store.add("s", [realistic("s", turn)])
    with closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute("UPDATE records SET data = ? WHERE record_id = 't2-s1'", (b"\x92\x01",))
    assert [r.turn for r in await store.records("s")] == [1, 3]
    assert "t2-s1 unreadable" in caplog.text


@pytest.mark.parametrize("seed", range(6))
async def test_random_writes_evictions_and_restarts_reconstruct_exactly(
    tmp_path: Path, seed: int
) -> None:
    """For random sequences of records (small and large edits, replaced ids, several sessions,
    tight bounds, deletes, restarts), every stored record reads back as the bytes last written
    for its id, usage matches the rows and the chunks are exactly those referenced."""
    rng = random.Random(seed)
    one = len(encode_record(realistic("a", 1)))
    limits = TraceLimits(
        max_records_per_session=rng.choice([2, 5, 128]),
        max_sessions=rng.choice([2, 3]),
        max_session_bytes=rng.choice([4 * one, 64 * one]),
        max_total_bytes=rng.choice([6 * one, 1_000 * one]),
    )
    store = TraceStore(tmp_path, limits=limits)
    await store.open()
    latest: dict[tuple[str, str], bytes] = {}
    for _ in range(60):
        session = rng.choice("abcd")
        action = rng.random()
        if action < 0.05:
            await store.delete_session(session)
        elif action < 0.1:
            await store.close()
            await store.open()
        else:
            turn = rng.randrange(1, 30)
            fired = {rng.randrange(120) for _ in range(rng.randrange(4))}
            grow = rng.choice([0, 0, 0, 500, 30_000])
            batch = [realistic(session, turn, fired=fired, grow=grow)]
            if rng.random() < 0.3:
                batch.append(realistic(session, turn + 1, fired=fired))
            for record in await store.add(session, batch):
                latest[(session, record.record_id)] = encode_record(record)
        for name in "abcd":
            got = await store.records(name)
            assert [encode_record(r) for r in got] == [latest[(name, r.record_id)] for r in got]
            usage = store.storage(name)
            assert usage["sessionBytes"] == (
                sum(len(encode_record(r)) for r in got) + 512 if got else 0
            )
        chunks, used = chunk_rows(store)
        assert chunks == used


def test_delta_roundtrip_edge_cases() -> None:
    from innkeeper_tavern.state.trace.delta import (
        DeltaError,
        apply_delta,
        deflate,
        inflate,
        make_delta,
    )

    rng = random.Random(7)
    base = msgspec.json.encode([rng.random() for _ in range(9_000)])
    for data in (b"", base, base[:100], base[5_000:] + base[:5_000], b"x" * 70_000):
        assert apply_delta(make_delta(data, base), base) == data
        assert apply_delta(make_delta(data, b""), b"") == data
    assert inflate(deflate(base), len(base)) == base
    with pytest.raises(DeltaError):
        apply_delta(make_delta(base[:10], base), base[:20] + b"!")
    with pytest.raises(DeltaError):
        inflate(b"not deflate", 10)
