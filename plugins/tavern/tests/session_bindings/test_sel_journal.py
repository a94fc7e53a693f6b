"""The selection store's change log: a bind appends what changed; crashes and kills mid-write
lose at most the change being written; folding the log in never changes the state."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.state.session_bindings import journal
from innkeeper_tavern.state.session_bindings import store as store_module
from innkeeper_tavern.state.session_bindings.model import Selection, SessionRecord
from innkeeper_tavern.state.session_bindings.store import SELECTIONS_FILE, SessionSelectionStore

NOW = "2026-08-15T00:00:00.000Z"


async def opened(root: Path) -> SessionSelectionStore:
    store = SessionSelectionStore(root, clock=lambda: NOW)
    await store.open()
    return store


def test_incremental_size_is_the_encoded_size() -> None:
    rng = random.Random(7)
    for _ in range(50):
        sessions = {
            f"s-{rng.randrange(10**6)}{'é' * rng.randrange(2)}"[:40]: SessionRecord(
                selection=Selection(
                    preset_id=rng.choice([None, "p" * rng.randrange(1, 30), 'q"\\']),
                    world_book_ids=tuple(f"b{i}" for i in range(rng.randrange(4))),
                ),
                updated_at=NOW,
            )
            for _ in range(rng.randrange(0, 12))
        }
        costs = {k: store_module.entry_cost(k, r) for k, r in sessions.items()}
        assert store_module.state_size(costs) == len(store_module.encode_state(sessions))


async def test_a_bind_appends_one_line_and_never_rewrites_the_snapshot(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.set_many({f"s-{i}": Selection(preset_id="p") for i in range(50)})
    await store.compact()
    snapshot = (tmp_path / SELECTIONS_FILE).read_bytes()
    for i in range(20):
        await store.set(f"s-{i}", Selection(preset_id=f"q{i}"))
    assert (tmp_path / SELECTIONS_FILE).read_bytes() == snapshot
    lines = (tmp_path / journal.LOG_FILE).read_bytes().splitlines()
    assert len(lines) == 20  # one per bind, each naming only its session
    assert all(len(line) < 400 for line in lines)
    again = await opened(tmp_path)
    assert [again.get(f"s-{i}").preset_id for i in (0, 19, 20)] == ["q0", "q19", "p"]
    assert not (tmp_path / journal.LOG_FILE).exists()  # folded in at start


async def test_the_log_is_folded_in_once_it_outgrows_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal, "COMPACT_MIN_BYTES", 1_000)
    store = await opened(tmp_path)
    for i in range(40):
        await store.set(f"s-{i % 5}", Selection(preset_id=f"p{i}"))
        log = tmp_path / journal.LOG_FILE
        state = {k: store.record(k) for k in store.session_ids()}
        state_size = len(store_module.encode_state(state))  # type: ignore[arg-type]
        assert (log.stat().st_size if log.exists() else 0) <= max(1_000, state_size)
    assert (tmp_path / SELECTIONS_FILE).exists()
    again = await opened(tmp_path)
    assert again.get("s-4").preset_id == "p39"


async def test_a_cut_short_last_line_drops_only_that_change(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.set("s-1", Selection(preset_id="kept"))
    await store.set("s-2", Selection(preset_id="kept"))
    log = tmp_path / journal.LOG_FILE
    good = log.read_bytes()
    torn = journal.encode_change(
        {"s-1": SessionRecord(selection=Selection(preset_id="lost"), updated_at=NOW)}, []
    )
    log.write_bytes(good + torn[: len(torn) // 2])  # killed mid-write
    again = await opened(tmp_path)
    assert [again.get("s-1").preset_id, again.get("s-2").preset_id] == ["kept", "kept"]
    assert not log.exists()
    await again.set("s-3", Selection())
    assert (await opened(tmp_path)).session_ids() == ["s-1", "s-2", "s-3"]


async def test_an_invalid_line_ends_the_replay_and_is_moved_aside(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.set("s-1", Selection(preset_id="kept"))
    log = tmp_path / journal.LOG_FILE
    log.write_bytes(log.read_bytes() + b'{"set":{"bad id":1}}\n' + log.read_bytes())
    again = await opened(tmp_path)
    assert again.session_ids() == ["s-1"]
    assert (tmp_path / (journal.LOG_FILE + ".corrupt")).exists() and not log.exists()


async def test_a_crash_between_the_snapshot_and_removing_the_log_keeps_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await opened(tmp_path)
    await store.set("s-1", Selection(preset_id="a"))
    await store.set("s-2", Selection(preset_id="b"))
    await store.delete_session("s-1")  # the log sets s-1, the snapshot no longer has it

    def crash(path: Path) -> None:
        raise OSError("killed before the unlink")

    monkeypatch.setattr(journal, "remove", crash)
    await store.compact()  # snapshot written, log left behind
    assert (tmp_path / journal.LOG_FILE).exists()
    monkeypatch.undo()
    again = await opened(tmp_path)
    assert again.session_ids() == ["s-2"] and again.get("s-2").preset_id == "b"


async def test_a_failed_fold_keeps_the_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from innkeeper_tavern.state.resources import atomic

    monkeypatch.setattr(journal, "COMPACT_MIN_BYTES", 0)
    store = await opened(tmp_path)

    def fail(*_: Any) -> None:
        raise OSError("rename refused")

    monkeypatch.setattr(atomic, "_replace", fail)
    await store.set("s-1", Selection(preset_id="durable"))  # in the log: not an error
    assert store.get("s-1").preset_id == "durable"
    monkeypatch.undo()
    assert (await opened(tmp_path)).get("s-1").preset_id == "durable"


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from innkeeper_tavern.state.session_bindings import journal
    from innkeeper_tavern.state.session_bindings.model import Selection
    from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

    journal.COMPACT_MIN_BYTES = int(sys.argv[2])

    async def main() -> None:
        store = SessionSelectionStore(Path(sys.argv[1]), max_sessions=4096)
        await store.open()
        for i in range(100_000):
            await store.set(f"s-{i % 3000}", Selection(preset_id=f"p{i}"))
            print(i, flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("compact_min", [journal.COMPACT_MIN_BYTES, 0])
async def test_a_kill_mid_write_loses_no_acknowledged_change(
    tmp_path: Path, compact_min: int
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _WRITER,
        str(tmp_path),
        str(compact_min),
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    acknowledged = -1
    while acknowledged < 150:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line, "the writer ended early"
        acknowledged = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    rest = (await proc.stdout.read()).split()
    await proc.wait()
    acknowledged = int(rest[-1]) if rest else acknowledged
    store = await opened(tmp_path)
    # Every acknowledged change is there; at most the one being written after it too.
    written = len(store)
    assert written in (acknowledged + 1, acknowledged + 2)
    assert store.session_ids() == [f"s-{i}" for i in range(written)]
    assert all(store.get(f"s-{i}").preset_id == f"p{i}" for i in range(written))
