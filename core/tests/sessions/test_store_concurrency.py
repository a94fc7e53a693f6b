"""Concurrent appends, pages, forks and inspects against one store."""

from __future__ import annotations

import asyncio
import sqlite3

from innkeeper_core.sessions import EventStore
from innkeeper_hostapi.sessions import (
    SessionEvent,
    TurnConflict,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    text_content,
)

WRITERS = 8
PER_WRITER = 60


def user(text: str) -> UserMessage:
    return UserMessage(message_id=text, content=text_content(text))


async def test_concurrent_appends_get_unique_contiguous_seqs(store: EventStore) -> None:
    sessions = [(await store.create_session()).id for _ in range(3)]

    async def writer(w: int) -> list[tuple[str, int, str]]:
        out = []
        for i in range(PER_WRITER):
            sid = sessions[(w + i) % len(sessions)]
            event = await store.append(sid, user(f"w{w}-{i}"))
            out.append((sid, event.seq, f"w{w}-{i}"))
        return out

    results = await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    for sid in sessions:
        events = await store.read_all(sid)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        mine = sorted((seq, text) for group in results for s, seq, text in group if s == sid)
        assert mine == [
            (e.seq, e.data.message_id) for e in events if isinstance(e.data, UserMessage)
        ]
    # Each writer's own appends landed in its submission order.
    for group in results:
        for sid in sessions:
            seqs = [seq for s, seq, _ in group if s == sid]
            assert seqs == sorted(seqs)


async def test_through_seq_pins_a_read_while_appends_continue(store: EventStore) -> None:
    sid = (await store.create_session()).id
    await store.append_many(sid, [user(f"a{i}") for i in range(500)])
    stop = asyncio.Event()

    async def appender() -> int:
        n = 0
        while not stop.is_set():
            await store.append(sid, user(f"late{n}"))
            n += 1
        return n

    task = asyncio.create_task(appender())
    await asyncio.sleep(0)
    first = await store.page(sid, limit=37)
    through = first.through_seq
    seen: list[SessionEvent] = list(first.events)
    before = first.next_before_seq
    while before is not None:
        page = await store.page(sid, before_seq=before, limit=37, through_seq=through)
        assert page.through_seq == through
        seen.extend(page.events)
        before = page.next_before_seq
        await asyncio.sleep(0)
    stop.set()
    late = await task
    assert late > 0
    assert [e.seq for e in seen] == list(range(through, 0, -1))
    assert (await store.inspect(sid)).last_seq == 500 + late


async def test_fork_races_turn_start_consistently(store: EventStore) -> None:
    """Fork and turn/start submitted together: either the fork wins (it sees no open turn) or
    it fails with TurnConflict, never a child of a half-open state."""
    for round_ in range(20):
        sid = (await store.create_session()).id
        await store.append(sid, user("x"))
        fork_result, start_result = await asyncio.gather(
            store.fork(sid, 1),
            store.append(sid, TurnStart(turn=1)),
            return_exceptions=True,
        )
        assert not isinstance(start_result, BaseException)
        if isinstance(fork_result, BaseException):
            assert isinstance(fork_result, TurnConflict), round_
        else:
            assert (await store.inspect(fork_result.id)).last_seq == 1
        await store.append(sid, TurnEnd(turn=1, reason=TurnEndReason(kind="completed")))


async def test_inspect_and_page_during_turns(store: EventStore) -> None:
    sid = (await store.create_session()).id

    async def turns() -> None:
        for turn in range(1, 30):
            await store.append_many(sid, [TurnStart(turn=turn), user(f"t{turn}")])
            await store.append(sid, TurnEnd(turn=turn, reason=TurnEndReason(kind="completed")))

    async def observer() -> None:
        for _ in range(60):
            inspection = await store.inspect(sid)
            page = await store.page(sid, limit=5, through_seq=inspection.last_seq)
            assert page.through_seq == inspection.last_seq
            if page.events:
                assert page.events[0].seq == inspection.last_seq

    await asyncio.gather(turns(), observer(), observer())
    assert not (await store.inspect(sid)).turn_open


async def test_cancelled_waiter_does_not_break_the_writer(store: EventStore) -> None:
    sid = (await store.create_session()).id
    tasks = [asyncio.create_task(store.append(sid, user(f"c{i}"))) for i in range(50)]
    for task in tasks[::3]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    events = await store.read_all(sid)
    # Whatever was written is contiguous; no half state.
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert (await store.append(sid, user("after"))).seq == len(events) + 1


async def test_an_open_read_snapshot_never_blocks_appends(store: EventStore) -> None:
    sid = (await store.create_session()).id
    await store.append_many(sid, [user(f"a{i}") for i in range(10)])
    reader = sqlite3.connect(store.path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        (before,) = reader.execute("SELECT COUNT(*) FROM events").fetchone()
        # The reader holds its snapshot open while the writer commits 200 more events.
        await asyncio.wait_for(
            asyncio.gather(*(store.append(sid, user(f"b{i}")) for i in range(200))), timeout=20
        )
        (still,) = reader.execute("SELECT COUNT(*) FROM events").fetchone()
        assert still == before == 10  # its snapshot is stable
        reader.execute("COMMIT")
        (after,) = reader.execute("SELECT COUNT(*) FROM events").fetchone()
        assert after == 210
    finally:
        reader.close()
