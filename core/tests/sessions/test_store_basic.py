"""Event store basics: create, append, inspect, page, rename, list, workspaces, turns."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from innkeeper_core.sessions import EventStore, StoreClosed, event_store_resource
from innkeeper_core.sessions.store import STORE_FILE_NAME
from innkeeper_hostapi.sessions import (
    SESSION_FORMAT_VERSION,
    CoordinateOutOfRange,
    InvalidSessionArgument,
    SessionEvent,
    SessionNotFound,
    SessionTitle,
    TurnConflict,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    WorkspaceNotFound,
    text_content,
)


def user(text: str) -> UserMessage:
    return UserMessage(message_id=f"m-{text}", content=text_content(text))


async def test_create_append_inspect_page(store: EventStore) -> None:
    header = await store.create_session(title="Tea")
    assert header.title == "Tea"
    assert header.format_version == SESSION_FORMAT_VERSION == 4
    assert header.parent is None
    assert header.delegation_depth == 0
    assert header.created_at == "2026-01-01T00:00:00.001Z"

    events = await store.append_many(header.id, [user(f"t{i}") for i in range(5)])
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert (await store.append(header.id, user("t5"))).seq == 6

    inspection = await store.inspect(header.id)
    assert inspection.meta.version == 4
    assert inspection.last_seq == 6
    assert not inspection.turn_open

    page = await store.page(header.id, limit=4)
    assert [e.seq for e in page.events] == [6, 5, 4, 3]
    assert page.has_more
    assert page.next_before_seq == 3
    assert page.through_seq == 6
    assert page.events[0].data == user("t5")
    rest = await store.page(header.id, before_seq=3, limit=4, through_seq=6)
    assert [e.seq for e in rest.events] == [2, 1]
    assert not rest.has_more
    assert rest.next_before_seq is None


async def test_data_survives_reopen(tmp_path: Path) -> None:
    async with await EventStore.open(tmp_path) as first:
        header = await first.create_session()
        await first.append(header.id, user("kept"))
    assert (tmp_path / STORE_FILE_NAME).exists()
    async with await EventStore.open(tmp_path) as second:
        page = await second.page(header.id)
        assert [e.data for e in page.events] == [user("kept")]


async def test_empty_session_page(store: EventStore) -> None:
    header = await store.create_session()
    page = await store.page(header.id)
    assert page.events == ()
    assert not page.has_more
    assert page.through_seq == 0


async def test_page_argument_errors(store: EventStore) -> None:
    header = await store.create_session()
    await store.append(header.id, user("a"))
    with pytest.raises(SessionNotFound):
        await store.page("nope")
    with pytest.raises(InvalidSessionArgument):
        await store.page(header.id, limit=0)
    with pytest.raises(InvalidSessionArgument):
        await store.page(header.id, limit=1001)
    with pytest.raises(InvalidSessionArgument):
        await store.page(header.id, before_seq=0)
    with pytest.raises(CoordinateOutOfRange):
        await store.page(header.id, through_seq=2)


async def test_append_to_missing_session_fails_without_side_effects(store: EventStore) -> None:
    with pytest.raises(SessionNotFound):
        await store.append("missing", user("x"))


async def test_turn_invariants(store: EventStore) -> None:
    sid = (await store.create_session()).id
    await store.append(sid, TurnStart(turn=1))
    assert (await store.inspect(sid)).open_turn == 1
    with pytest.raises(TurnConflict):
        await store.append(sid, TurnStart(turn=2))
    with pytest.raises(TurnConflict):
        await store.append(sid, TurnEnd(turn=2, reason=TurnEndReason(kind="completed")))
    await store.append(sid, TurnEnd(turn=1, reason=TurnEndReason(kind="completed")))
    with pytest.raises(TurnConflict):
        await store.append(sid, TurnStart(turn=1))  # turn numbers only grow
    # An invalid batch is all-or-nothing.
    with pytest.raises(TurnConflict):
        await store.append_many(sid, [user("a"), TurnStart(turn=2), TurnStart(turn=3)])
    inspection = await store.inspect(sid)
    assert inspection.last_seq == 2
    assert not inspection.turn_open


async def test_rename_records_title_event(store: EventStore) -> None:
    sid = (await store.create_session(title="old")).id
    header, event = await store.rename(sid, "new")
    assert header.title == "new"
    assert event.seq == 1
    assert event.data == SessionTitle(title="new")
    assert (await store.header(sid)).title == "new"


async def test_list_sessions_paginates_newest_first(store: EventStore, tmp_path: Path) -> None:
    ws = await store.create_workspace(str(tmp_path), "ws")
    made = [(await store.create_session(title=f"s{i}")).id for i in range(5)]
    in_ws = (await store.create_session(workspace_id=ws.id)).id
    first = await store.list_sessions(limit=4)
    assert [s.header.id for s in first.sessions] == [in_ws, made[4], made[3], made[2]]
    assert first.next_cursor is not None
    second = await store.list_sessions(limit=4, cursor=first.next_cursor)
    assert [s.header.id for s in second.sessions] == [made[1], made[0]]
    assert second.next_cursor is None
    only = await store.list_sessions(workspace_id=ws.id)
    assert [s.header.id for s in only.sessions] == [in_ws]
    with pytest.raises(InvalidSessionArgument):
        await store.list_sessions(cursor="x")


async def test_workspaces(store: EventStore, tmp_path: Path) -> None:
    first = await store.create_workspace(str(tmp_path), "a")
    again = await store.create_workspace(str(tmp_path), "a")
    assert again == first
    other = await store.create_workspace(str(tmp_path / "b"), "b")
    assert [w.id for w in await store.list_workspaces()] == [first.id, other.id]
    assert await store.workspace(other.id) == other
    with pytest.raises(WorkspaceNotFound):
        await store.create_session(workspace_id="nope")


async def test_closed_store_refuses(tmp_path: Path) -> None:
    opened = await EventStore.open(tmp_path)
    await opened.close()
    await opened.close()  # idempotent
    with pytest.raises(StoreClosed):
        await opened.create_session()
    with pytest.raises(StoreClosed):
        await opened.page("x")


async def test_read_ascending_after_seq(store: EventStore) -> None:
    sid = (await store.create_session()).id
    await store.append_many(sid, [user(str(i)) for i in range(10)])
    chunk = await store.read(sid, after_seq=3, limit=4)
    assert [e.seq for e in chunk] == [4, 5, 6, 7]
    assert [e.seq for e in await store.read_all(sid)] == list(range(1, 11))


async def test_listeners_see_commits_in_order_before_the_append_returns(store: EventStore) -> None:
    sid = (await store.create_session()).id
    seen: list[tuple[str, list[int]]] = []

    def listener(session_id: str, events: Sequence[SessionEvent]) -> None:
        seen.append((session_id, [e.seq for e in events]))

    def broken(session_id: str, events: Sequence[SessionEvent]) -> None:
        raise RuntimeError("listener bug")

    remove_broken = store.add_listener(broken)
    remove = store.add_listener(listener)
    await store.append(sid, user("a"))
    assert seen == [(sid, [1])]  # already published when the append returns
    await asyncio.gather(store.append_many(sid, [user("b"), user("c")]), store.rename(sid, "t"))
    assert seen == [(sid, [1]), (sid, [2, 3]), (sid, [4])]
    with pytest.raises(SessionNotFound):
        await store.append("missing", user("x"))
    assert len(seen) == 3  # failed appends publish nothing
    remove()
    remove_broken()
    await store.append(sid, user("d"))
    assert len(seen) == 3


async def test_event_store_resource_opens_and_closes(tmp_path: Path) -> None:
    resource = event_store_resource(tmp_path)
    opened = await anext(resource)
    await opened.create_session()
    with pytest.raises(StopAsyncIteration):
        await anext(resource)
    with pytest.raises(StoreClosed):
        await opened.create_session()
