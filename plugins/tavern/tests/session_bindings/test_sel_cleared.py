"""Notes of deleted resources survive a restart and end with the next selection change."""

from __future__ import annotations

from pathlib import Path

from innkeeper_tavern.state.session_bindings.cleared import ClearedBindings


async def test_notes_persist_and_follow_only_the_selection_they_describe(tmp_path: Path) -> None:
    notes = ClearedBindings(tmp_path)
    await notes.open()
    await notes.note("character-card", "card-1", "Seraphina", {"s1": ("t0", "t1")})
    await notes.note("world-book", "book-1", None, {"s1": ("t1", "t2")})

    reopened = ClearedBindings(tmp_path)
    await reopened.open()
    assert [(n.kind, n.id, n.name) for n in reopened.current("s1", "t2")] == [
        ("character-card", "card-1", "Seraphina"),
        ("world-book", "book-1", None),
    ]
    assert reopened.current("s1", "t3") == []  # the selection changed since: no report
    assert reopened.current("s2", "t2") == []
