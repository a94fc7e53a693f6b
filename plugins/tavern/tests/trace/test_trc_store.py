"""The store's caps, compaction, atomic writes and tolerance of bad files."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sqlite3
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import msgspec
import pytest

from innkeeper_tavern.state.trace import AssemblyRecord, TraceLimits, TraceStore
from innkeeper_tavern.state.trace.model import SectionMeta, SessionTraceFile, SourceMeta
from innkeeper_tavern.state.trace.store import compact


def record(session: str, turn: int, *, decisions: int = 0, sections: int = 0) -> AssemblyRecord:
    books = [
        {
            "resource": {"id": "book"},
            "budget": {},
            "decisions": [
                {
                    "entryId": str(i),
                    "decision": "included" if i % 2 else "rejected",
                    "primaryKeys": ["k" * 40] * 4,
                    "detail": "x" * 40,
                }
                for i in range(decisions)
            ],
        }
    ]
    return AssemblyRecord(
        record_id=f"t{turn}-s1",
        session_id=session,
        turn=turn,
        step=1,
        captured_at="2026-01-01T00:00:00.000Z",
        status="sent",
        lore={"books": books},
        sections=tuple(
            SectionMeta(
                name=f"pmp-dsh-tavern:part:{i}",
                identifier=str(i),
                kind="prompt",
                role="system",
                bytes=10,
                sha256="a" * 64,
                sources=(SourceMeta(id=f"preset:{i}", kind="preset"),) * 3,
            )
            for i in range(sections)
        ),
    )


def stored_sessions(store: TraceStore) -> set[str]:
    with closing(sqlite3.connect(store.path)) as conn:
        return {s for (s,) in conn.execute("SELECT DISTINCT session FROM records")}


async def test_records_per_session_evict_oldest(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, limits=TraceLimits(max_records_per_session=3))
    await store.open()
    for turn in range(1, 6):
        await store.add("s", [record("s", turn)])
    assert [r.turn for r in await store.records("s")] == [3, 4, 5]
    # Re-adding a record id replaces it instead of duplicating it.
    await store.add("s", [record("s", 5)])
    assert [r.turn for r in await store.records("s")] == [3, 4, 5]


async def test_sessions_and_total_bytes_evict_least_recently_written(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, limits=TraceLimits(max_sessions=2))
    await store.open()
    for session in ("a", "b", "c"):
        await store.add(session, [record(session, 1)])
    assert await store.records("a") == []
    assert [r.session_id for r in await store.records("c")] == ["c"]
    assert stored_sessions(store) == {"b", "c"}

    size = store.total_bytes // 2  # two equal files
    small = TraceStore(tmp_path / "small", limits=TraceLimits(max_total_bytes=2 * size + 10))
    await small.open()
    for session in ("a", "b", "c"):
        await small.add(session, [record(session, 1)])
    assert small.session_count == 2 and small.total_bytes <= 2 * size + 10
    assert await small.records("a") == []


async def test_session_bytes_evict_oldest_records(tmp_path: Path) -> None:
    one = len(msgspec.json.encode(record("s", 1, decisions=20)))
    limits = TraceLimits(max_session_bytes=3 * one + 600)
    store = TraceStore(tmp_path, limits=limits)
    await store.open()
    for turn in range(1, 7):
        await store.add("s", [record("s", turn, decisions=20)])
    kept = await store.records("s")
    assert [r.turn for r in kept] == [4, 5, 6]
    assert store.total_bytes <= limits.max_session_bytes


def test_compaction_stages() -> None:
    big = record("s", 1, decisions=200, sections=200)
    full = len(msgspec.json.encode(big))
    stripped, data = compact(big, full - 1)
    assert stripped.compacted[:1] == ["lore.decisionDetails"] and len(data) < full
    assert "primaryKeys" not in str(stripped.lore)
    assert big.lore is not None and "primaryKeys" in str(big.lore)  # the input is not edited
    tiny, data = compact(big, 2_000)
    assert len(data) <= 2_000
    assert tiny.compacted[-1] in ("parameters", "all-but-references", "lore", "sections")
    assert tiny.record_id == "t1-s1" and tiny.status == "sent"
    assert tiny.sections == ()


async def test_oversized_record_is_compacted_not_refused(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, limits=TraceLimits(max_record_bytes=4_000))
    await store.open()
    stored = await store.add("s", [record("s", 1, decisions=100, sections=50)])
    assert stored and stored[0].compacted
    (again,) = await store.records("s")
    assert len(msgspec.json.encode(again)) <= 4_000


async def test_failed_write_changes_nothing(tmp_path: Path) -> None:
    store = TraceStore(tmp_path)
    await store.open()
    await store.add("s", [record("s", 1)])
    before = (store.total_bytes, store.session_count, store.storage("s"))
    # The disk refuses the second insert of the transaction (after the replace's delete).
    with closing(sqlite3.connect(store.path)) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.record_id != 't1-s1' "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
        conn.commit()
    with pytest.raises(OSError, match="disk full"):
        await store.add("s", [record("s", 1), record("s", 2)])
    with pytest.raises(OSError, match="disk full"):
        await store.add("t", [record("t", 3)])
    assert (store.total_bytes, store.session_count, store.storage("s")) == before
    assert [r.turn for r in await store.records("s")] == [1]
    await store.close()
    reopened = TraceStore(tmp_path)
    await reopened.open()
    assert (reopened.total_bytes, reopened.session_count) == before[:2]


async def test_one_record_lookup_and_delete(tmp_path: Path) -> None:
    store = TraceStore(tmp_path)
    await store.open()
    await store.add("s", [record("s", 1), record("s", 2)])
    found = await store.get("s", "t2-s1")
    assert found is not None and found.turn == 2
    assert await store.get("s", "t9-s1") is None
    assert await store.get("other", "t2-s1") is None
    assert await store.delete_session("s") is True
    assert await store.delete_session("s") is False
    assert await store.records("s") == [] and store.session_count == 0
    assert stored_sessions(store) == set()


def _legacy_file(folder: Path, session: str, turns: list[int]) -> Path:
    """A session file as earlier versions wrote it: ``<sha256(sessionId)[:32]>.json``."""
    name = hashlib.sha256(session.encode()).hexdigest()[:32] + ".json"
    document = SessionTraceFile(
        session_id=session,
        updated_at="2026-01-01T00:00:00.000Z",
        records=[record(session, t) for t in turns],
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(msgspec.json.encode(document))
    return path


async def test_legacy_session_files_are_imported_once(tmp_path: Path) -> None:
    folder = tmp_path / "assembly-audit"
    old = _legacy_file(folder, "old", [1, 2])
    new = _legacy_file(folder, "new", [1, 2, 3, 4])
    os.utime(old, (1_000, 1_000))  # written before "new": evicted first
    bad = folder / ("b" * 32 + ".json")
    bad.write_bytes(b"{not json")
    big = folder / ("c" * 32 + ".json")
    big.write_bytes(b" " * (2 * TraceLimits().max_session_bytes + 1))
    temp = folder / ".x.json.1.abc.tmp"
    temp.write_bytes(b"half")

    store = TraceStore(tmp_path, limits=TraceLimits(max_records_per_session=3))
    await store.open()
    assert [r.turn for r in await store.records("old")] == [1, 2]
    assert [r.turn for r in await store.records("new")] == [2, 3, 4]  # bounds applied
    assert not any(p.exists() for p in (old, new, bad, big, temp))
    assert store.session_count == 2
    # The imported session goes on from where its file ended; the import does not run twice.
    await store.add("old", [record("old", 3)])
    await store.close()
    again = TraceStore(tmp_path)
    await again.open()
    assert [r.turn for r in await again.records("old")] == [1, 2, 3]
    # A file left behind by a crash between the commit and its unlink imports idempotently.
    _legacy_file(folder, "new", [3, 4])
    await again.close()
    await again.open()
    assert [r.turn for r in await again.records("new")] == [2, 3, 4]

    capped = TraceStore(tmp_path / "capped", limits=TraceLimits(max_sessions=1))
    for session in ("a", "b"):
        _legacy_file(capped.folder, session, [1])
    os.utime(capped.folder / (hashlib.sha256(b"a").hexdigest()[:32] + ".json"), (1_000, 1_000))
    await capped.open()
    assert stored_sessions(capped) == {"b"}


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from innkeeper_tavern.state.trace import AssemblyRecord, TraceStore
    from innkeeper_tavern.state.trace.model import SectionMeta

    async def main() -> None:
        store = TraceStore(sys.argv[1])
        await store.open()
        turn = 0
        while True:
            turn += 1
            sections = tuple(
                SectionMeta(name=f"part:{i}", identifier="x" * 200, kind="prompt",
                            role="system", bytes=turn, sha256="a" * 64)
                for i in range(40)
            )  # ~12 KB a record: spans pages, so a torn write would show
            records = [
                AssemblyRecord(record_id=f"t{turn}-s{step}", session_id="s", turn=turn,
                               step=step, captured_at="now", status="sent", sections=sections)
                for step in (1, 2)
            ]
            await store.add("s", records)
            if turn == 20:
                print("running", flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.3])
async def test_sigkill_mid_append_leaves_a_readable_trace(tmp_path: Path, delay: float) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert (await proc.stdout.readline()).decode().strip() == "running"
        await asyncio.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        await asyncio.wait_for(proc.wait(), timeout=30)
    assert proc.returncode == -signal.SIGKILL

    store = TraceStore(tmp_path)
    await store.open()
    with closing(sqlite3.connect(store.path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    records = await store.records("s")
    turns = [r.turn for r in records]
    # Every committed record reads back whole; a turn's two records are all-or-nothing; the
    # newest MAX_RECORDS_PER_SESSION are kept in order.
    assert len(records) == min(2 * turns[-1], store.limits.max_records_per_session)
    assert turns == sorted(turns) and turns[-1] >= 20
    for r in records:
        assert len(r.sections) == 40 and all(s.bytes == r.turn for s in r.sections)
    assert [r.record_id for r in records[-2:]] == [f"t{turns[-1]}-s1", f"t{turns[-1]}-s2"]
    # And the store keeps appending after the crash.
    next_turn = turns[-1] + 1
    rec = AssemblyRecord(
        record_id=f"t{next_turn}-s1",
        session_id="s",
        turn=next_turn,
        step=1,
        captured_at="now",
        status="sent",
    )
    assert await store.add("s", [rec])
    assert (await store.records("s"))[-1].turn == next_turn
