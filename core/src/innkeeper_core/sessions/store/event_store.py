"""The event store's facade: one object over the schema, the writer, the forks and the reads."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

from innkeeper_core.sessions.bodies import BodyCodec
from innkeeper_core.sessions.store.forks import IdFactory, SessionLineage
from innkeeper_core.sessions.store.reads import StoreReader
from innkeeper_core.sessions.store.schema import (
    STORE_FILE_NAME,
    insert_workspace,
    open_inline_connection,
    open_write_connection,
)
from innkeeper_core.sessions.store.writer import AppendListener, Clock, StoreWriter
from innkeeper_hostapi.sessions import (
    DEFAULT_PAGE_LIMIT,
    MAX_PAGE_LIMIT,
    EventData,
    HistoryPage,
    SessionEvent,
    SessionHeader,
    SessionInspection,
    SessionList,
    Workspace,
)

__all__ = ["EventStore", "event_store_resource", "system_clock", "uuid_ids"]

log = logging.getLogger("innkeeper.sessions.store")


def system_clock() -> int:
    """The wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def uuid_ids() -> str:
    """A random UUID4 string."""
    return str(uuid.uuid4())


class EventStore:
    """Async facade over the SQLite session store. Create with :meth:`open`; close with
    :meth:`close` (or ``async with``).

    The work is split by concern: :mod:`.schema` (tables, migrations, row SQL),
    :mod:`.writer` (the writer thread, inline appends, turn invariants, listeners),
    :mod:`.forks` (new, delegated and forked sessions; fork chains) and :mod:`.reads` (the read
    pool and every query).
    """

    def __init__(
        self,
        path: Path,
        write_conn: sqlite3.Connection,
        *,
        inline_conn: sqlite3.Connection | None = None,
        clock: Clock,
        new_id: IdFactory,
    ) -> None:
        self.path = path
        self._clock = clock
        self._new_id = new_id
        self._bodies = BodyCodec()
        self._writer = StoreWriter(
            path, write_conn, inline_conn=inline_conn, clock=clock, bodies=self._bodies
        )
        self._lineage = SessionLineage(self._writer, clock=clock, new_id=new_id)
        self._reader = StoreReader(path, self._lineage, self._bodies)
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        data_dir: Path | str,
        *,
        clock: Clock = system_clock,
        new_id: IdFactory = uuid_ids,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        file_name: str = STORE_FILE_NAME,
    ) -> EventStore:
        """Open (creating if needed) the store file in ``data_dir``.

        ``synchronous="NORMAL"`` (the default) survives any process crash; ``"FULL"`` also
        survives power loss at the cost of an fsync per transaction.
        """
        path = Path(data_dir) / file_name
        conn = await asyncio.to_thread(open_write_connection, path, synchronous)
        inline = await asyncio.to_thread(open_inline_connection, path, synchronous)
        return cls(path, conn, inline_conn=inline, clock=clock, new_id=new_id)

    async def close(self) -> None:
        """Finish queued writes, then close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._writer.closed = self._reader.closed = True
        await self._writer.stop()
        await self._reader.stop()

    async def __aenter__(self) -> EventStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def cache_stats(self) -> dict[str, int]:
        """Sizes of the store's in-memory caches (each bounded by a named constant):
        ``chunkChars`` (chunk bodies, :data:`MAX_CACHED_CHUNK_CHARS`), ``keyframeBytes`` and
        ``cachedKeyframeBytes`` (delta keyframes for writes and reads, ``deltas``),
        ``baseBytes`` (recent rows remembered as delta bases, ``deltas``),
        ``appendStates`` and ``chains`` (sessions, :data:`MAX_CACHED_CHAINS`)."""
        return {
            "chunkChars": self._bodies.cached_chars(),
            **self._bodies.deltas.stats(),
            "appendStates": self._writer.cached_states(),
            "chains": self._lineage.cached_chains(),
        }

    def add_listener(self, listener: AppendListener) -> Callable[[], None]:
        """Call ``listener(session_id, events)`` on the event loop after every commit that
        appended events, in commit order, before the appender's ``await`` returns. Returns a
        function that removes exactly this registration. A failing listener is logged and
        never affects the append or the other listeners."""
        return self._writer.add_listener(listener)

    # ------------------------------------------------------------------ sessions

    async def create_session(
        self,
        *,
        title: str | None = None,
        workspace_id: str | None = None,
        delegated_from: str | None = None,
        session_id: str | None = None,
    ) -> SessionHeader:
        """Create an empty session. ``delegated_from`` links a sub-agent session to its parent
        (``parent.atEventId`` = the parent's last seq, no inherited events, depth + 1)."""
        return await self._lineage.create_session(
            title=title,
            workspace_id=workspace_id,
            delegated_from=delegated_from,
            session_id=session_id,
        )

    async def fork(self, session_id: str, at_event_id: int) -> SessionHeader:
        """Create a child inheriting events ``1..at_event_id`` of ``session_id``.

        Raises :class:`TurnConflict` when the source has an open turn, and
        :class:`CoordinateOutOfRange` when ``at_event_id`` is not in ``0..last_seq``.
        """
        return await self._lineage.fork(session_id, at_event_id)

    async def rename(self, session_id: str, title: str) -> tuple[SessionHeader, SessionEvent]:
        """Set the title and append the matching ``session/title`` event, atomically."""
        result = await self._writer.rename(session_id, title)
        log.info("session renamed id=%s", session_id)
        return result

    async def inspect(self, session_id: str) -> SessionInspection:
        """Header, ``meta.version``, open turn and last seq of a session."""
        return await self._reader.inspect(session_id)

    async def open_turn_sessions(self) -> list[str]:
        """Ids of the sessions whose last turn has no ``turn/end`` (a crash left it open)."""
        return await self._reader.open_turn_sessions()

    async def header(self, session_id: str) -> SessionHeader:
        """The header of a session."""
        return (await self.inspect(session_id)).header

    async def list_sessions(
        self,
        *,
        workspace_id: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
    ) -> SessionList:
        """Sessions newest first (optionally of one workspace), ``limit`` per page."""
        return await self._reader.list_sessions(
            workspace_id=workspace_id, limit=limit, cursor=cursor
        )

    # ------------------------------------------------------------------ events

    async def append(self, session_id: str, data: EventData) -> SessionEvent:
        """Append one event; returns it with its ``seq`` and timestamp.

        ``turn/start`` needs no open turn and a turn number above every earlier one;
        ``turn/end`` must close the open turn (:class:`TurnConflict` otherwise).
        """
        (event,) = await self._writer.append_many(session_id, (data,))
        return event

    async def append_many(self, session_id: str, datas: Iterable[EventData]) -> list[SessionEvent]:
        """Append events in order, all or nothing, in one transaction."""
        return await self._writer.append_many(session_id, datas)

    async def page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        through_seq: int | None = None,
    ) -> HistoryPage:
        """Events newest first with seq ``< before_seq`` and ``<= through_seq``.

        Without ``through_seq`` the read pins the current last seq and returns it as
        ``through_seq``; passing it back on every later page keeps the read on one snapshot
        even while new events are appended. Cost is O(limit), independent of log length.
        """
        return await self._reader.page(
            session_id, before_seq=before_seq, limit=limit, through_seq=through_seq
        )

    async def read(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        through_seq: int | None = None,
        limit: int = MAX_PAGE_LIMIT,
    ) -> tuple[SessionEvent, ...]:
        """Events oldest first with seq ``> after_seq`` (e.g. SSE replay after
        ``Last-Event-ID``), at most ``limit``."""
        return await self._reader.read(
            session_id, after_seq=after_seq, through_seq=through_seq, limit=limit
        )

    async def read_all(self, session_id: str) -> tuple[SessionEvent, ...]:
        """Every event of a session, oldest first, from one pinned snapshot."""
        return await self._reader.read_all(session_id)

    async def read_seqs(self, session_id: str, seqs: Sequence[int]) -> dict[int, SessionEvent]:
        """The events with the given ``seqs`` (each ``1..last_seq``), by seq, in one read."""
        return await self._reader.read_seqs(session_id, seqs)

    # ------------------------------------------------------------------ workspaces

    async def create_workspace(self, root_path: str, name: str) -> Workspace:
        """Register ``root_path`` (already validated and normalized by the caller); the same
        root returns the existing workspace."""
        new_id = self._new_id()
        now = self._clock()
        return await self._writer.write(
            lambda conn: insert_workspace(conn, new_id, root_path, name, now)
        )

    async def list_workspaces(self) -> tuple[Workspace, ...]:
        """Every workspace, oldest first."""
        return await self._reader.list_workspaces()

    async def workspace(self, workspace_id: str) -> Workspace:
        """One workspace by id (:class:`WorkspaceNotFound` if missing)."""
        return await self._reader.workspace(workspace_id)


async def event_store_resource(
    data_dir: Path | str, *, clock: Clock = system_clock, new_id: IdFactory = uuid_ids
) -> AsyncIterator[EventStore]:
    """A dependency-injector ``Resource``: open the store on start-up, close it on shutdown::

    event_store = providers.Resource(event_store_resource, data_dir=config.provided.data_dir)
    """
    store = await EventStore.open(data_dir, clock=clock, new_id=new_id)
    try:
        yield store
    finally:
        await store.close()
