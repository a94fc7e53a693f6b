"""The store's caps, compaction, atomic writes and tolerance of bad files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.resources import atomic
from innkeeper_tavern.trace import AssemblyRecord, TraceLimits, TraceStore
from innkeeper_tavern.trace.model import SectionMeta, SourceMeta
from innkeeper_tavern.trace.store import compact, session_file_name


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


def files(store: TraceStore) -> set[str]:
    return {p.name for p in store.folder.iterdir()}


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
    assert files(store) == {session_file_name("b"), session_file_name("c")}

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


async def test_failed_write_changes_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    store = TraceStore(tmp_path)
    await store.open()
    await store.add("s", [record("s", 1)])
    path = store.folder / session_file_name("s")
    before = path.read_bytes()
    index_before = (store.total_bytes, store.session_count)

    def refuse(source: Path, target: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic, "_replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        await store.add("s", [record("s", 2)])
    with pytest.raises(OSError, match="disk full"):
        await store.add("t", [record("t", 1)])
    assert path.read_bytes() == before
    assert (store.total_bytes, store.session_count) == index_before
    assert files(store) == {session_file_name("s")}  # no temp file left behind
    assert [r.turn for r in await store.records("s")] == [1]


async def test_open_indexes_without_parsing_and_tolerates_bad_files(tmp_path: Path) -> None:
    store = TraceStore(tmp_path)
    await store.open()
    await store.add("s", [record("s", 1)])
    folder = store.folder
    (folder / ".x.json.1.abc.tmp").write_bytes(b"half")
    (folder / session_file_name("bad")).write_bytes(b"{not json")
    (folder / session_file_name("big")).write_bytes(b" " * (2 * store.limits.max_session_bytes + 1))
    reopened = TraceStore(tmp_path)
    await reopened.open()
    assert not (folder / ".x.json.1.abc.tmp").exists()
    assert reopened.session_count == 3
    assert [r.turn for r in await reopened.records("s")] == [1]
    assert await reopened.records("bad") == []
    assert await reopened.records("big") == []
    # A bad file is replaced by the next write of its session.
    await reopened.add("bad", [record("bad", 7)])
    assert [r.turn for r in await reopened.records("bad")] == [7]
    # A file holding another session's records is never served under this id.
    (folder / session_file_name("other")).write_bytes(
        (folder / session_file_name("s")).read_bytes()
    )
    await reopened.open()
    assert await reopened.records("other") == []
    assert await reopened.delete_session("other") is True
    assert await reopened.delete_session("other") is False
