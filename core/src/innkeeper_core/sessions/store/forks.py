"""Sessions and their lineage: new and delegated sessions, forks, and the fork chains reads
follow.

Forks share rows: a child records ``seed_sid``/``seed_length`` and reads its inherited prefix
from its ancestors, so forking a long session costs O(1) rows. Past
:data:`MAX_FORK_SHARE_DEPTH` shared ancestors the prefix is copied instead, which keeps every
read at a bounded number of range scans (:meth:`SessionLineage.segments`).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Final

from innkeeper_core.sessions.store.schema import (
    MAX_CACHED_CHAINS,
    SessionRow,
    insert_session,
    require_workspace,
    session_row,
    session_row_by_sid,
)
from innkeeper_core.sessions.store.writer import Clock, StoreWriter
from innkeeper_hostapi.sessions import (
    MAX_DELEGATION_DEPTH,
    CoordinateOutOfRange,
    DelegationTooDeep,
    InvalidSessionArgument,
    SessionHeader,
    TurnConflict,
    branch_title,
)

__all__ = ["MAX_FORK_SHARE_DEPTH", "IdFactory", "Segment", "SessionLineage"]

log = logging.getLogger("innkeeper.sessions.store")

#: Most ancestors whose rows a fork shares before its prefix is copied instead.
MAX_FORK_SHARE_DEPTH: Final = 32

#: Returns a fresh unique id.
IdFactory = Callable[[], str]

#: A range of seqs ``(lo, hi]`` of one session's own rows; ``hi is None`` means unbounded.
Segment = tuple[int, int, int | None]


class SessionLineage:
    """Creates sessions (plain, delegated, forked) and knows which rows each one reads."""

    def __init__(self, writer: StoreWriter, *, clock: Clock, new_id: IdFactory) -> None:
        self._writer = writer
        self._clock = clock
        self._new_id = new_id
        # sid -> own-row segments of its inherited chain; rows never move once written.
        self._chains: dict[int, tuple[Segment, ...]] = {}

    def cached_chains(self) -> int:
        """Sessions whose chain is cached (at most :data:`MAX_CACHED_CHAINS`)."""
        return len(self._chains)

    def segments(self, conn: sqlite3.Connection, row: SessionRow) -> tuple[Segment, ...]:
        """Own-row ranges of ``row`` and its shared ancestors, newest first."""
        cached = self._chains.get(row.sid)
        if cached is not None:
            return cached
        segments: list[Segment] = []
        current = row
        hi: int | None = None
        while True:
            lo = current.seed_length if current.seed_sid is not None else 0
            segments.append((current.sid, lo, hi))
            if current.seed_sid is None or current.seed_length == 0:
                break
            hi = current.seed_length if hi is None else min(hi, current.seed_length)
            current = session_row_by_sid(conn, current.seed_sid)
        result = tuple(segments)
        if len(self._chains) >= MAX_CACHED_CHAINS:
            self._chains.clear()  # cheap to rebuild; keeps memory bounded
        self._chains[row.sid] = result
        return result

    async def create_session(
        self,
        *,
        title: str | None,
        workspace_id: str | None,
        delegated_from: str | None,
        session_id: str | None,
    ) -> SessionHeader:
        """See :meth:`EventStore.create_session`."""
        new_id = session_id or self._new_id()
        now = self._clock()

        def job(conn: sqlite3.Connection) -> SessionHeader:
            if workspace_id is not None:
                require_workspace(conn, workspace_id)
            parent_sid: int | None = None
            parent_at: int | None = None
            depth = 0
            if delegated_from is not None:
                parent = session_row(conn, delegated_from)
                depth = parent.delegation_depth + 1
                if depth > MAX_DELEGATION_DEPTH:
                    raise DelegationTooDeep(
                        f"delegation depth {depth} exceeds {MAX_DELEGATION_DEPTH}"
                    )
                parent_sid, parent_at = parent.sid, parent.last_seq
            insert_session(
                conn,
                session_id=new_id,
                created_at=now,
                title=title,
                workspace_id=workspace_id,
                parent_sid=parent_sid,
                parent_at=parent_at,
                seed_sid=None,
                seed_length=0,
                chain_depth=0,
                delegation_depth=depth,
                last_turn=0,
            )
            return session_row(conn, new_id).header()

        header = await self._writer.write(job)
        log.info("session created id=%s depth=%d", header.id, header.delegation_depth)
        return header

    async def fork(self, session_id: str, at_event_id: int) -> SessionHeader:
        """See :meth:`EventStore.fork`."""
        if isinstance(at_event_id, bool) or not isinstance(at_event_id, int):
            raise InvalidSessionArgument("atEventId must be an integer")
        new_id = self._new_id()
        now = self._clock()

        def job(conn: sqlite3.Connection) -> SessionHeader:
            source = session_row(conn, session_id)
            if source.open_turn is not None:
                raise TurnConflict(
                    f"session {session_id!r} has an open turn ({source.open_turn}); "
                    "fork after it ends or cancel it"
                )
            if not 0 <= at_event_id <= source.last_seq:
                raise CoordinateOutOfRange(
                    f"atEventId {at_event_id} is outside 0..{source.last_seq}"
                )
            # Point the child at the nearest ancestor that owns seq ``at_event_id``.
            owner = source
            while owner.seed_sid is not None and at_event_id <= owner.seed_length:
                owner = session_row_by_sid(conn, owner.seed_sid)
            copy = owner.chain_depth + 1 > MAX_FORK_SHARE_DEPTH
            if at_event_id == 0 or copy:
                seed_sid, chain_depth = None, 0
            else:
                seed_sid, chain_depth = owner.sid, owner.chain_depth + 1
            sid = insert_session(
                conn,
                session_id=new_id,
                created_at=now,
                title=branch_title(source.title),
                workspace_id=source.workspace_id,
                parent_sid=source.sid,
                parent_at=at_event_id,
                seed_sid=seed_sid,
                seed_length=at_event_id,
                chain_depth=chain_depth,
                delegation_depth=source.delegation_depth,
                last_turn=source.last_turn,
                last_seq=at_event_id,
            )
            if copy and at_event_id > 0:
                for seg_sid, lo, hi in self.segments(conn, owner):
                    top = at_event_id if hi is None else min(hi, at_event_id)
                    if top > lo:
                        conn.execute(
                            "INSERT INTO events (sid, seq, at, message, data) "
                            "SELECT ?, seq, at, message, data FROM events "
                            "WHERE sid = ? AND seq > ? AND seq <= ?",
                            (sid, seg_sid, lo, top),
                        )
            return session_row(conn, new_id).header()

        header = await self._writer.write(job)
        log.info("session forked id=%s from=%s at=%d", header.id, session_id, at_event_id)
        return header
