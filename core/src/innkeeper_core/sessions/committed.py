"""``session/events-committed``: every commit that appended events, published to plugins.

The event store calls its append listeners synchronously on the event loop, right after a
commit and before the appender's ``await`` returns; plugin listeners are async and may append
events themselves. So :class:`CommittedEvents` queues each commit and one task publishes the
queue in commit order (``EventBus.publish``: a failing listener is logged, the others still
run). Nothing is queued while no plugin listens. A backlog beyond :data:`MAX_BACKLOG` commits
(listeners far slower than the writers) drops the oldest, logged; listeners must treat the
event as a prompt to look at the session's current state, never as its only source.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final

from innkeeper_hostapi.agents import SESSION_EVENTS_COMMITTED, SessionEventsCommitted
from innkeeper_hostapi.events import EventBus
from innkeeper_hostapi.keys import EventKey
from innkeeper_hostapi.sessions import SessionEvent

__all__ = ["MAX_BACKLOG", "CommittedEvents"]

log = logging.getLogger("innkeeper.sessions")

#: Commits waiting for delivery before the oldest are dropped.
MAX_BACKLOG: Final = 65_536


class CommittedEvents:
    """Queues committed events (``on_append``, an event-store listener) and publishes them."""

    def __init__(self, bus: EventBus, listening: Callable[[EventKey[Any]], bool]) -> None:
        self._bus = bus
        self._listening = listening
        self._queue: deque[SessionEventsCommitted] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._dropped = 0

    def on_append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Event-store listener: queue the commit when a plugin listens."""
        if not events or not self._listening(SESSION_EVENTS_COMMITTED):
            return
        if len(self._queue) >= MAX_BACKLOG:
            self._queue.popleft()
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 1024 == 0:
                log.warning("session events backlog full: %d commits dropped", self._dropped)
        self._queue.append(SessionEventsCommitted(session_id=session_id, events=tuple(events)))
        self._wake.set()

    def start(self) -> None:
        """Start the publishing task (on the running loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="host:session-events"
            )

    async def stop(self) -> None:
        """Stop publishing; commits still queued are not delivered."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._queue.clear()

    def backlog(self) -> int:
        """Commits queued and not yet published."""
        return len(self._queue)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                await self._bus.publish(SESSION_EVENTS_COMMITTED, self._queue.popleft())
