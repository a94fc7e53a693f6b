"""The /traces compatibility bounds (16 books / 128 decisions, clipped ids) and profile spans."""

from __future__ import annotations

import hashlib

from innkeeper_tavern.state.trace import AssemblyRecord
from innkeeper_tavern.state.trace.capture import locate_profile
from innkeeper_tavern.state.trace.views import clip_utf16, trace_record, trace_world_books


def _book(index: int, decisions: int) -> dict[str, object]:
    return {
        "resource": {"id": f"book-{index}", "name": f"Book {index}"},
        "budget": {"limit": 100, "used": 1},
        "decisions": [
            {"entryId": str(i), "resourceId": f"book-{index}", "decision": "included"}
            for i in range(decisions)
        ],
    }


def test_world_books_keep_16_books_and_128_decisions() -> None:
    books = [_book(i, 10) for i in range(20)]
    out = trace_world_books(books)
    assert len(out) == 16
    counts = [len(b["decisions"]) for b in out]
    assert sum(counts) == 128
    assert counts[:12] == [10] * 12 and counts[12] == 8 and counts[13:] == [0, 0, 0]
    assert books[0]["decisions"] and len(books[0]["decisions"]) == 10  # input untouched


def test_ids_are_clipped_in_utf16_units() -> None:
    long_entry = "e" * 121
    assert clip_utf16(long_entry, 120) == "e" * 119 + "…"
    assert clip_utf16("e" * 120, 120) == "e" * 120
    # Astral characters count two units and are never split.
    emoji = "😀" * 70  # 140 units
    clipped = clip_utf16(emoji, 120)
    assert clipped == "😀" * 59 + "…"
    assert len(clipped.encode("utf-16-le")) // 2 <= 120
    book = {
        "resource": {"id": "r" * 250},
        "budget": {},
        "decisions": [{"entryId": long_entry, "resourceId": "r" * 250}],
    }
    (out,) = trace_world_books([book])
    assert out["resource"]["id"] == "r" * 199 + "…"
    assert out["decisions"][0]["entryId"] == "e" * 119 + "…"
    assert out["decisions"][0]["resourceId"] == "r" * 199 + "…"


def test_trace_record_shape() -> None:
    record = AssemblyRecord(
        record_id="t3-s1",
        session_id="s",
        turn=3,
        step=1,
        captured_at="2026-01-01T00:00:00.000Z",
        status="not-sent",
        lore={"books": [_book(0, 2)], "renderedLoreIds": ["book-0:1"]},
    )
    row = trace_record(record)
    assert row["id"] == "3:1:0" and row["status"] == "request-not-confirmed"
    assert row["assemblyStatus"] == "not-sent" and row["schemaVersion"] == 4
    assert set(row["worldBooks"][0]) == {"resource", "budget", "decisions"}
    assert row["activation"]["renderedLoreIds"] == ["book-0:1"]
    assert set(row["authority"]) >= {"tavernProfilePresent", "tavernCallConfigApplied"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_profile_is_located_after_other_sections() -> None:
    parts = [b"First part", b"Second\n\npart", "Третья".encode()]
    profile = b"\n\n".join(parts)
    system = b"early section\n\nFirst part is not here\n\n" + profile + b"\n\nrp policy"
    meta = [{"bytes": len(p), "sha256": _sha(p)} for p in parts]
    located = locate_profile(system, meta, len(profile), _sha(profile))
    assert located is not None
    span, spans = located
    assert system[span.start : span.end] == profile
    assert [system[s.start : s.end] for s in spans] == parts
    assert locate_profile(system, meta, len(profile), "0" * 64) is None
    assert locate_profile(b"short", meta, len(profile), _sha(profile)) is None
