"""Small appends commit on the event loop when the writer is idle, never waiting for a lock."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.store import STORE_FILE_NAME
from innkeeper_hostapi.sessions import SessionEvent, SystemMessage, UserMessage, text_content


def small(i: int) -> UserMessage:
    return UserMessage(message_id=f"u{i}", content=text_content(f"line {i}"))


def big(i: int) -> SystemMessage:
    text = "\n\n".join(f"Rule {i}.{k}: keep the fire lit." * 20 for k in range(40))
    return SystemMessage(message_id=f"s{i}", content=text_content(text))


async def test_a_held_write_lock_does_not_block_the_loop(tmp_path: Path) -> None:
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        await store.append(sid, small(0))
        with closing(sqlite3.connect(tmp_path / STORE_FILE_NAME, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            append = asyncio.create_task(store.append(sid, small(1)))
            ticks = 0
            for _ in range(20):  # the loop keeps running while the append waits
                await asyncio.sleep(0.01)
                ticks += 1
            assert ticks == 20 and not append.done()
            other.execute("COMMIT")
        event = await asyncio.wait_for(append, 10)
        assert event.seq == 2
        assert [e.seq for e in await store.read_all(sid)] == [1, 2]


async def test_listeners_see_commit_order_with_inline_and_writer_appends(tmp_path: Path) -> None:
    seen: dict[str, list[int]] = {}

    def listener(session_id: str, events: list[SessionEvent]) -> None:
        seen.setdefault(session_id, []).extend(e.seq for e in events)

    async with await EventStore.open(tmp_path) as store:
        store.add_listener(listener)
        sids = [(await store.create_session()).id for _ in range(3)]

        async def writer(n: int) -> None:
            for i in range(30):
                sid = sids[(n + i) % 3]
                data = big(i) if (n + i) % 7 == 0 else small(i)
                if i % 5 == 0:
                    await store.append_many(sid, [data, small(i + 100)])
                else:
                    await store.append(sid, data)

        await asyncio.gather(*(writer(n) for n in range(8)))
        for sid in sids:
            last = (await store.inspect(sid)).last_seq
            assert seen[sid] == list(range(1, last + 1))
            assert [e.seq for e in await store.read_all(sid)] == seen[sid]


async def test_many_inline_appends_keep_the_wal_checkpointed(tmp_path: Path) -> None:
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        body = "x" * 3000
        for i in range(3000):  # ~9 MB through the inline connection
            await store.append(sid, UserMessage(message_id=f"m{i}", content=text_content(body)))
        await store.append(sid, big(1))  # a writer job: the queued checkpoint has run before it
        await store.append(sid, small(1))  # wraps to the start of the checkpointed WAL
        wal = tmp_path / f"{STORE_FILE_NAME}-wal"
        # Without checkpoints the WAL would hold all ~9 MB written.
        assert wal.stat().st_size < 6 * 1024 * 1024


async def test_a_task_appending_in_a_tight_loop_lets_others_run(tmp_path: Path) -> None:
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = ticks
        for i in range(320):
            await store.append(sid, small(i))
        task.cancel()
        assert ticks - start >= 5  # the loop ran other tasks during the appends
