"""Inbox projection: queue, steer, cancel and claim as durable splices, replay, forks."""

from __future__ import annotations

import pytest

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.inbox import MAX_QUEUED_ITEMS, InboxProjection, InvalidSplice
from innkeeper_hostapi.sessions import InboxItem, InboxSpliced, TurnStart, text_content


def item(text: str) -> InboxItem:
    return InboxItem(id=f"in-{text}", content=text_content(text))


async def commit(store: EventStore, sid: str, inbox: InboxProjection, splice: InboxSpliced) -> int:
    """Durable first, then the live projection (the order the agent will use)."""
    event = await store.append(sid, splice)
    inbox.apply(event.seq, splice)
    return event.seq


async def test_queue_steer_cancel_claim_are_durable_and_replayable(store: EventStore) -> None:
    sid = (await store.create_session()).id
    inbox = InboxProjection()
    q1 = await commit(store, sid, inbox, inbox.plan_insert("next-turn", [item("a")]))
    q2 = await commit(store, sid, inbox, inbox.plan_insert("next-turn", [item("b"), item("c")]))
    await commit(store, sid, inbox, inbox.plan_insert("next-step", [item("steer")]))
    cancel = inbox.plan_cancel("next-turn", start=2, count=1)
    assert cancel is not None
    await commit(store, sid, inbox, cancel)
    assert [i.id for i in inbox.queue("next-turn")] == ["in-a", "in-b"]
    await store.append(sid, TurnStart(turn=1))
    claim = inbox.plan_claim("next-turn", turn=1)
    assert claim is not None
    assert claim.claim_event_seqs == (q1, q2)
    claim_seq = await commit(store, sid, inbox, claim)
    assert inbox.queue("next-turn") == ()
    assert inbox.last_claim_seq == claim_seq
    assert inbox.plan_claim("next-turn") is None

    events = await store.read_all(sid)
    ops = [(e.data.op, e.data.target) for e in events if isinstance(e.data, InboxSpliced)]
    assert ops == [
        ("insert", "next-turn"),
        ("insert", "next-turn"),
        ("insert", "next-step"),
        ("cancel", "next-turn"),
        ("claim", "next-turn"),
    ]
    replayed = InboxProjection.from_events(events)
    assert replayed.queue("next-turn") == ()
    assert [i.id for i in replayed.queue("next-step")] == ["in-steer"]
    assert replayed.last_claim_seq == claim_seq
    assert replayed.invalid_events == 0


async def test_forks_copy_no_queued_input(store: EventStore) -> None:
    sid = (await store.create_session()).id
    inbox = InboxProjection()
    await commit(store, sid, inbox, inbox.plan_insert("next-turn", [item("queued")]))
    child = await store.fork(sid, 1)
    events = await store.read_all(child.id)
    assert len(InboxProjection.from_events(events)) == 1  # naive replay would inherit it
    assert len(InboxProjection.from_events(events, after_seq=child.seed_length)) == 0
    assert len(inbox.plan_clear()) == 1


def test_invalid_splices_are_rejected_or_counted() -> None:
    inbox = InboxProjection()
    with pytest.raises(InvalidSplice):
        inbox.apply(1, InboxSpliced(op="cancel", target="next-turn", start=0, removed_count=1))
    with pytest.raises(InvalidSplice):  # op does not match shape
        inbox.apply(1, InboxSpliced(op="claim", target="next-turn", start=0, inserted=(item("x"),)))
    with pytest.raises(InvalidSplice):
        inbox.plan_replace("next-turn", 0, 1, [item("x")])
    with pytest.raises(InvalidSplice):
        inbox.plan_insert("next-step", [item(str(i)) for i in range(MAX_QUEUED_ITEMS + 1)])
    assert inbox.plan_cancel("next-turn") is None
    assert len(inbox) == 0
