"""Forks: shared prefixes, nested forks, coordinates, open-turn conflicts, deep-chain copies."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.store import forks as store_forks
from innkeeper_hostapi.sessions import (
    CoordinateOutOfRange,
    DelegationTooDeep,
    ParentRef,
    SessionEvent,
    TurnConflict,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    text_content,
)


def user(text: str) -> UserMessage:
    return UserMessage(message_id=f"m-{text}", content=text_content(text))


def texts(events: tuple[SessionEvent, ...]) -> list[str]:
    return [e.data.content[0].text for e in events if isinstance(e.data, UserMessage)]


def row_count(store: EventStore) -> int:
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM events").fetchone()
    return int(count)


async def test_fork_inherits_prefix_without_copying(store: EventStore) -> None:
    parent = (await store.create_session(title="p")).id
    await store.append_many(parent, [user(f"p{i}") for i in range(1, 11)])
    child = await store.fork(parent, 6)
    assert child.parent == ParentRef(session_id=parent, at_event_id=6)
    assert child.seed_length == 6
    assert child.title == "p (branch)"  # a fork is titled as a branch (issue 10)
    assert row_count(store) == 10  # nothing copied

    await store.append_many(child.id, [user("c7"), user("c8")])
    await store.append(parent, user("p11"))
    assert texts(await store.read_all(child.id)) == [f"p{i}" for i in range(1, 7)] + ["c7", "c8"]
    assert [e.seq for e in await store.read_all(child.id)] == list(range(1, 9))
    assert len(await store.read_all(parent)) == 11

    page = await store.page(child.id, limit=3)
    assert [e.seq for e in page.events] == [8, 7, 6]
    assert texts(page.events) == ["c8", "c7", "p6"]


async def test_nested_forks_and_forking_inside_the_inherited_prefix(store: EventStore) -> None:
    a = (await store.create_session()).id
    await store.append_many(a, [user(f"a{i}") for i in range(1, 6)])
    b = (await store.fork(a, 4)).id
    await store.append_many(b, [user("b5"), user("b6")])
    c = (await store.fork(b, 5)).id
    await store.append(c, user("c6"))
    d = (await store.fork(c, 2)).id  # entirely inside a's rows
    await store.append(d, user("d3"))
    assert texts(await store.read_all(c)) == ["a1", "a2", "a3", "a4", "b5", "c6"]
    assert texts(await store.read_all(d)) == ["a1", "a2", "d3"]
    # Descending pages across three segments.
    seen: list[int] = []
    before: int | None = None
    while True:
        page = await store.page(c, before_seq=before, limit=2)
        seen += [e.seq for e in page.events]
        if not page.has_more:
            break
        before = page.next_before_seq
    assert seen == [6, 5, 4, 3, 2, 1]


async def test_fork_at_zero_and_at_end(store: EventStore) -> None:
    a = (await store.create_session()).id
    await store.append_many(a, [user("x"), user("y")])
    empty = await store.fork(a, 0)
    assert empty.seed_length == 0
    assert await store.read_all(empty.id) == ()
    full = await store.fork(a, 2)
    assert texts(await store.read_all(full.id)) == ["x", "y"]
    with pytest.raises(CoordinateOutOfRange):
        await store.fork(a, 3)
    with pytest.raises(CoordinateOutOfRange):
        await store.fork(a, -1)


async def test_fork_with_open_turn_conflicts(store: EventStore) -> None:
    a = (await store.create_session()).id
    await store.append_many(a, [user("x"), TurnStart(turn=1)])
    with pytest.raises(TurnConflict):
        await store.fork(a, 1)
    await store.append(a, TurnEnd(turn=1, reason=TurnEndReason(kind="interrupted")))
    # Cutting inside a finished turn is allowed: the child is not running anything.
    child = await store.fork(a, 2)
    inspection = await store.inspect(child.id)
    assert not inspection.turn_open
    assert inspection.last_seq == 2
    # Turn numbers continue above the parent's.
    with pytest.raises(TurnConflict):
        await store.append(child.id, TurnStart(turn=1))
    await store.append(child.id, TurnStart(turn=2))


async def test_deep_fork_chains_copy_past_the_share_limit(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_forks, "MAX_FORK_SHARE_DEPTH", 3)
    current = (await store.create_session()).id
    await store.append(current, user("s1"))
    expected = ["s1"]
    for depth in range(2, 9):
        current = (await store.fork(current, depth - 1)).id
        await store.append(current, user(f"s{depth}"))
        expected.append(f"s{depth}")
        assert texts(await store.read_all(current)) == expected
    assert row_count(store) > 8  # some prefixes were copied


async def test_delegated_session(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_forks, "MAX_DELEGATION_DEPTH", 2)
    root = (await store.create_session()).id
    await store.append(root, user("r"))
    one = await store.create_session(delegated_from=root)
    assert one.delegation_depth == 1
    assert one.parent == ParentRef(session_id=root, at_event_id=1)
    assert one.seed_length == 0
    assert await store.read_all(one.id) == ()
    two = await store.create_session(delegated_from=one.id)
    assert two.delegation_depth == 2
    with pytest.raises(DelegationTooDeep):
        await store.create_session(delegated_from=two.id)
    forked = await store.fork(two.id, 0)
    assert forked.delegation_depth == 2


async def test_the_last_seq_follows_plain_appends_in_forks_and_after_a_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends that change no turn state do not rewrite the header row; every read of the
    header (inspect, list, fork bounds, the next append) still sees their seqs."""
    monkeypatch.setattr(store_forks, "MAX_FORK_SHARE_DEPTH", 1)  # the second fork copies
    async with await EventStore.open(tmp_path) as store:
        root = (await store.create_session()).id
        await store.append_many(root, [TurnStart(turn=1), user("a")])
        await store.append(root, TurnEnd(turn=1, reason=TurnEndReason(kind="completed")))
        await store.append_many(root, [user("b"), user("c")])
        shared = (await store.fork(root, 5)).id
        assert (await store.inspect(shared)).last_seq == 5  # no rows of its own yet
        await store.append(shared, user("d"))
        copied = (await store.fork(shared, 6)).id
        await store.append(copied, user("e"))
    async with await EventStore.open(tmp_path) as store:
        lasts = {s.header.id: s.last_seq for s in (await store.list_sessions()).sessions}
        assert lasts == {root: 5, shared: 6, copied: 7}
        for sid, last in lasts.items():
            inspection = await store.inspect(sid)
            assert (inspection.last_seq, inspection.open_turn, inspection.last_turn) == (
                last,
                None,
                1,
            )
            with pytest.raises(CoordinateOutOfRange):
                await store.fork(sid, last + 1)
        assert (await store.append(copied, user("f"))).seq == 8
        assert texts(await store.read_all(copied)) == ["a", "b", "c", "d", "e", "f"]
        with pytest.raises(TurnConflict):
            await store.append(copied, TurnStart(turn=1))
