"""A 100,000-event session pages back every event exactly once."""

from __future__ import annotations

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.store import MAX_EVENTS_PER_APPEND
from innkeeper_hostapi.sessions import MAX_PAGE_LIMIT, UserMessage, text_content

TOTAL = 100_000


async def test_paging_100k_events_returns_each_once(store: EventStore) -> None:
    sid = (await store.create_session()).id
    for start in range(0, TOTAL, MAX_EVENTS_PER_APPEND):
        stop = min(TOTAL, start + MAX_EVENTS_PER_APPEND)
        await store.append_many(
            sid,
            [
                UserMessage(message_id=str(i), content=text_content(f"e{i}"))
                for i in range(start, stop)
            ],
        )
    # A fork sharing most of it, so paging also crosses a segment boundary.
    child = (await store.fork(sid, TOTAL - 1234)).id
    await store.append(child, UserMessage(message_id="child", content=text_content("c")))

    for session, expected in ((sid, TOTAL), (child, TOTAL - 1234 + 1)):
        seen: list[int] = []
        ids: set[str] = set()
        first = await store.page(session, limit=MAX_PAGE_LIMIT)
        through = first.through_seq
        page = first
        while True:
            seen.extend(e.seq for e in page.events)
            ids.update(e.data.message_id for e in page.events if isinstance(e.data, UserMessage))
            if not page.has_more:
                break
            assert page.next_before_seq is not None
            page = await store.page(
                session, before_seq=page.next_before_seq, limit=MAX_PAGE_LIMIT, through_seq=through
            )
        assert through == expected
        assert seen == list(range(expected, 0, -1))
        assert len(ids) == expected
