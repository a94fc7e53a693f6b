"""``session-selections.json`` is current after every acknowledged write and always a complete
state on disk; a ``session-selections.log`` left by an earlier version is replayed once."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.state.resources import atomic
from innkeeper_tavern.state.session_bindings import journal, snapshot
from innkeeper_tavern.state.session_bindings.model import Selection, SessionRecord
from innkeeper_tavern.state.session_bindings.store import (
    SELECTIONS_FILE,
    SelectionStoreError,
    SessionSelectionStore,
)

NOW = "2026-08-15T00:00:00.000Z"


async def opened(root: Path) -> SessionSelectionStore:
    store = SessionSelectionStore(root, clock=lambda: NOW)
    await store.open()
    return store


def on_disk(root: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((root / SELECTIONS_FILE).read_bytes())
    return doc["sessions"]


def in_memory(store: SessionSelectionStore) -> dict[str, Any]:
    return {key: json.loads(msgspec.json.encode(store.record(key))) for key in store.session_ids()}


def log_line(sessions: dict[str, Selection], deleted: list[str] = []) -> bytes:  # noqa: B006
    change = {
        "set": {k: SessionRecord(selection=v, updated_at=NOW) for k, v in sessions.items()},
        "delete": deleted,
    }
    return msgspec.json.encode(change) + b"\n"


def test_the_assembled_file_is_the_encoded_state() -> None:
    rng = random.Random(7)
    for _ in range(50):
        sessions = {
            f"s-{rng.randrange(10**6)}": SessionRecord(
                selection=Selection(
                    preset_id=rng.choice([None, "p" * rng.randrange(1, 30), 'q"\\é']),
                    world_book_ids=tuple(f"b{i}" for i in range(rng.randrange(4))),
                ),
                updated_at=NOW,
            )
            for _ in range(rng.randrange(0, 12))
        }
        fragments = {k: snapshot.encode_entry(k, r) for k, r in sessions.items()}
        data = snapshot.assemble(fragments)
        assert data == snapshot.encode_state(sessions)
        assert snapshot.assembled_size({k: len(v) for k, v in fragments.items()}) == len(data)


async def test_every_acknowledged_write_is_in_the_file(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    writes = [
        lambda: store.set("s-1", Selection(preset_id="a")),
        lambda: store.set_many({f"s-{i}": Selection(preset_id="b") for i in range(2, 6)}),
        lambda: store.update("s-2", lambda s: msgspec.structs.replace(s, user_id="u")),
        lambda: store.ensure("s-9", Selection(world_book_ids=("w",))),
        lambda: store.clear_resource("preset", "b"),
        lambda: store.delete_session("s-3"),
        lambda: store.delete_sessions(["s-4", "s-5"]),
    ]
    for write in writes:
        await write()
        assert on_disk(tmp_path) == in_memory(store)
        assert not (tmp_path / journal.LOG_FILE).exists()
    assert list(on_disk(tmp_path)) == ["s-1", "s-2", "s-9"]


async def test_a_log_left_by_an_earlier_version_is_replayed_then_removed(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.set_many({"s-1": Selection(preset_id="snap"), "s-2": Selection()})
    log = tmp_path / journal.LOG_FILE
    log.write_bytes(
        log_line({"s-1": Selection(preset_id="logged")})
        + log_line({"s-3": Selection(user_id="u")}, ["s-2"])
    )
    again = await opened(tmp_path)
    assert again.session_ids() == ["s-1", "s-3"]
    assert again.get("s-1").preset_id == "logged"
    assert not log.exists()
    assert on_disk(tmp_path) == in_memory(again)


async def test_a_cut_short_last_line_drops_only_that_change(tmp_path: Path) -> None:
    log = tmp_path / journal.LOG_FILE
    torn = log_line({"s-1": Selection(preset_id="lost")})
    log.write_bytes(log_line({"s-1": Selection(preset_id="kept")}) + torn[: len(torn) // 2])
    again = await opened(tmp_path)
    assert again.get("s-1").preset_id == "kept"
    assert not log.exists()


async def test_an_invalid_line_ends_the_replay_and_is_moved_aside(tmp_path: Path) -> None:
    log = tmp_path / journal.LOG_FILE
    good = log_line({"s-1": Selection(preset_id="kept")})
    log.write_bytes(good + b'{"set":{"bad id":1}}\n' + log_line({"s-2": Selection()}))
    again = await opened(tmp_path)
    assert again.session_ids() == ["s-1"]
    assert (tmp_path / (journal.LOG_FILE + ".corrupt")).exists() and not log.exists()


async def test_a_log_that_cannot_be_folded_in_refuses_to_start_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await opened(tmp_path)
    await store.set("s-1", Selection(preset_id="snap"))
    (tmp_path / journal.LOG_FILE).write_bytes(log_line({"s-1": Selection(preset_id="logged")}))
    raw = [(tmp_path / n).read_bytes() for n in (SELECTIONS_FILE, journal.LOG_FILE)]

    def fail(*_: Any) -> None:
        raise OSError("rename refused")

    monkeypatch.setattr(atomic, "_replace", fail)
    with pytest.raises(SelectionStoreError) as caught:
        await opened(tmp_path)
    assert (caught.value.status, caught.value.code) == (500, "SESSION_SELECTION_WRITE_FAILED")
    assert [(tmp_path / n).read_bytes() for n in (SELECTIONS_FILE, journal.LOG_FILE)] == raw
    monkeypatch.undo()
    assert (await opened(tmp_path)).get("s-1").preset_id == "logged"


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from innkeeper_tavern.state.session_bindings.model import Selection
    from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

    async def main() -> None:
        store = SessionSelectionStore(Path(sys.argv[1]), max_sessions=4096)
        await store.open()
        for i in range(100_000):
            await store.set(f"s-{i % 3000}", Selection(preset_id=f"p{i}"))
            print(i, flush=True)

    asyncio.run(main())
    """
)


def check_complete(path: Path) -> int:
    """The number of sessions of the file on disk, which must be a whole, valid state in which
    session ``s-i`` holds ``p<i>`` for every ``i`` written so far."""
    doc = json.loads(path.read_bytes())
    assert doc["schemaVersion"] == 2
    names = list(doc["sessions"])
    assert names == [f"s-{i}" for i in range(len(names))]
    assert all(
        doc["sessions"][f"s-{i}"]["selection"]["presetId"] == f"p{i}" for i in range(len(names))
    )
    return len(names)


async def test_a_kill_mid_write_leaves_a_complete_state_holding_every_acknowledged_write(
    tmp_path: Path,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _WRITER, str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    path = tmp_path / SELECTIONS_FILE
    acknowledged = -1
    seen = 0
    while acknowledged < 150:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line, "the writer ended early"
        acknowledged = int(line)
        # Read while the writer writes: every read is a whole previous-or-new state, never
        # older than what was acknowledged before the read began.
        count = check_complete(path)
        assert count >= acknowledged + 1 and count >= seen
        seen = count
    os.kill(proc.pid, signal.SIGKILL)
    rest = (await proc.stdout.read()).split()
    await proc.wait()
    acknowledged = int(rest[-1]) if rest else acknowledged
    # Every acknowledged change is there; at most the one being written after it too.
    assert check_complete(path) in (acknowledged + 1, acknowledged + 2)
    store = await opened(tmp_path)
    assert len(store) in (acknowledged + 1, acknowledged + 2)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []
