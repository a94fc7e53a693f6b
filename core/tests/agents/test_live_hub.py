"""The live fan-out a session's SSE stream reads: a burst of items is taken in one go, in order."""

from __future__ import annotations

import asyncio

from innkeeper_core.agents.hub import SUBSCRIBER_QUEUE_LIMIT, LiveHub, Partial


async def test_take_ready_returns_every_queued_item_in_order_without_waiting() -> None:
    hub = LiveHub()
    sub = hub.subscribe("s1")
    assert sub.take_ready() == []
    items = [Partial("assistant/delta", {"text": str(i)}) for i in range(5)]
    for item in items:
        hub.publish("s1", item)
    hub.publish("other", Partial("assistant/delta", {"text": "not mine"}))
    assert sub.take_ready() == items
    assert sub.take_ready() == []
    hub.publish("s1", items[0])
    assert await asyncio.wait_for(sub.get(), 1) == items[0]


async def test_take_ready_ends_with_the_cut_off_of_a_subscriber_that_fell_behind() -> None:
    hub = LiveHub()
    sub = hub.subscribe("s1")
    for i in range(SUBSCRIBER_QUEUE_LIMIT + 3):
        hub.publish("s1", Partial("assistant/delta", {"text": str(i)}))
    ready = sub.take_ready()
    assert len(ready) == SUBSCRIBER_QUEUE_LIMIT + 1
    assert ready[-1] is None  # the stream ends; the client resumes with Last-Event-ID
    assert sub.take_ready() == []
