"""Live fan-out of session events (durable and partial) to SSE subscribers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from innkeeper_hostapi.sessions import SessionEvent

#: Items one subscriber may lag behind before it is cut off (it reconnects with Last-Event-ID).
SUBSCRIBER_QUEUE_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True)
class Partial:
    """A non-durable live item (e.g. streamed assistant text)."""

    type: str
    data: dict[str, Any]


LiveItem = SessionEvent | Partial | None  # None ends the stream


class Subscription:
    """One subscriber's bounded queue."""

    def __init__(self, hub: LiveHub, session_id: str) -> None:
        self.hub = hub
        self.session_id = session_id
        self.queue: asyncio.Queue[LiveItem] = asyncio.Queue(SUBSCRIBER_QUEUE_LIMIT + 1)
        self.overflowed = False

    def offer(self, item: LiveItem) -> None:
        if self.overflowed:
            return
        if item is not None and self.queue.qsize() >= SUBSCRIBER_QUEUE_LIMIT:
            self.overflowed = True
            item = None
        self.queue.put_nowait(item)

    async def get(self) -> LiveItem:
        return await self.queue.get()

    def take_ready(self) -> list[LiveItem]:
        """Every item already queued, oldest first, without waiting (empty when none): a
        streaming turn queues its partials faster than a writer sends them, so the stream
        writes them in one go instead of waking once per item."""
        ready: list[LiveItem] = []
        while not self.queue.empty():
            ready.append(self.queue.get_nowait())
        return ready

    def close(self) -> None:
        self.hub.unsubscribe(self)


class LiveHub:
    """Per-session subscriber sets. Publishing never blocks the publisher."""

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = {}
        self._closed = False

    def subscribe(self, session_id: str) -> Subscription:
        sub = Subscription(self, session_id)
        if self._closed:
            sub.offer(None)
        else:
            self._subs.setdefault(session_id, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.session_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.session_id]

    def publish(self, session_id: str, item: SessionEvent | Partial) -> None:
        for sub in tuple(self._subs.get(session_id, ())):
            sub.offer(item)

    def close(self) -> None:
        """End every stream (server shutdown)."""
        self._closed = True
        for subs in self._subs.values():
            for sub in subs:
                sub.offer(None)
        self._subs.clear()

    def on_append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Event-store append listener: every committed event goes live."""
        for event in events:
            self.publish(session_id, event)

    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subs.values())
