"""The store's read path: a small pool of read-only connections, and every query.

WAL gives each statement a snapshot, so reads never block the writer and the writer never
blocks reads. A session's events are read along its fork chain
(:meth:`SessionLineage.segments`), a bounded number of range scans however it was forked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Literal, TypeVar

from innkeeper_core.sessions.bodies import BodyCodec
from innkeeper_core.sessions.store.forks import SessionLineage
from innkeeper_core.sessions.store.schema import (
    SESSION_SELECT,
    SessionRow,
    connect,
    require_workspace,
    session_row,
    workspace_of,
)
from innkeeper_core.sessions.store.writer import StoreClosed
from innkeeper_hostapi.sessions import (
    DEFAULT_PAGE_LIMIT,
    MAX_PAGE_LIMIT,
    MESSAGE_PREVIEW_MAX_CHARS,
    AssistantMessage,
    CoordinateOutOfRange,
    HistoryPage,
    InvalidSessionArgument,
    MessagePreview,
    SessionEvent,
    SessionInspection,
    SessionList,
    SessionMeta,
    SessionSummary,
    UserMessage,
    Workspace,
    text_of,
)

__all__ = ["READ_THREADS", "StoreReader"]

#: Read connections (threads) serving queries.
READ_THREADS: Final = 2
#: Largest SQLite rowid (a session list cursor names one).
_MAX_ROWID: Final = (1 << 63) - 1
#: Seqs bound into one ``IN (...)`` query (SQLite's default variable limit is 999 or more).
_SEQS_PER_QUERY: Final = 500

T = TypeVar("T")


class StoreReader:
    """Every read of the store, each on a pooled read-only connection. The public methods are
    :class:`EventStore`'s (which documents them)."""

    def __init__(self, path: Path, lineage: SessionLineage, bodies: BodyCodec) -> None:
        self._path = path
        self._lineage = lineage
        self._bodies = bodies
        self._local = threading.local()
        self._read_conns: list[sqlite3.Connection] = []
        self._read_lock = threading.Lock()
        self._readers = concurrent.futures.ThreadPoolExecutor(
            max_workers=READ_THREADS, thread_name_prefix="innkeeper-sqlite-read"
        )
        #: Set by the store's ``close``: every later read raises :class:`StoreClosed`.
        self.closed = False

    async def stop(self) -> None:
        """Let running reads finish, then close every read connection."""
        await asyncio.to_thread(self._readers.shutdown, True)
        with self._read_lock:
            for conn in self._read_conns:
                conn.close()
            self._read_conns.clear()

    async def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``job`` on a read connection of the pool; its result."""
        if self.closed:
            raise StoreClosed("the session store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._with_read_conn, job)

    def _with_read_conn(self, job: Callable[[sqlite3.Connection], T]) -> T:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self._path)
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._read_lock:
                self._read_conns.append(conn)
        return job(conn)

    # ------------------------------------------------------------------ sessions

    async def inspect(self, session_id: str) -> SessionInspection:
        def job(conn: sqlite3.Connection) -> SessionInspection:
            row = session_row(conn, session_id)
            return SessionInspection(
                header=row.header(),
                meta=SessionMeta(version=row.format_version),
                turn_open=row.open_turn is not None,
                open_turn=row.open_turn,
                last_seq=row.last_seq,
                last_turn=row.last_turn,
            )

        return await self.run(job)

    async def open_turn_sessions(self) -> list[str]:
        def job(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT id FROM sessions WHERE open_turn IS NOT NULL ORDER BY sid")
            return [str(r[0]) for r in rows]

        return await self.run(job)

    async def list_sessions(
        self, *, workspace_id: str | None, limit: int, cursor: str | None
    ) -> SessionList:
        _check_limit(limit)
        before: int | None = None
        if cursor is not None:
            # ASCII digits within SQLite's signed 64-bit range ("²".isdigit() is true too).
            if not (cursor.isascii() and cursor.isdigit()) or int(cursor) > _MAX_ROWID:
                raise InvalidSessionArgument("malformed session list cursor")
            before = int(cursor)

        def job(conn: sqlite3.Connection) -> SessionList:
            where: list[str] = []
            args: list[object] = []
            if workspace_id is not None:
                where.append("s.workspace_id = ?")
                args.append(workspace_id)
            if before is not None:
                where.append("s.sid < ?")
                args.append(before)
            sql = SESSION_SELECT
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY s.sid DESC LIMIT ?"
            args.append(limit + 1)
            rows = [SessionRow(*r) for r in conn.execute(sql, args)]
            more = len(rows) > limit
            rows = rows[:limit]
            return SessionList(
                sessions=tuple(
                    SessionSummary(
                        header=r.header(),
                        last_seq=r.last_seq,
                        turn_open=r.open_turn is not None,
                        last_message=self._last_message(conn, r),
                    )
                    for r in rows
                ),
                next_cursor=str(rows[-1].sid) if more and rows else None,
            )

        return await self.run(job)

    def _last_message(self, conn: sqlite3.Connection, row: SessionRow) -> MessagePreview | None:
        """The newest real user input or assistant reply (context injections are skipped)."""
        sql = (
            "SELECT seq, at, data FROM events WHERE sid = ? AND seq > ? AND seq <= ? "
            "AND message = 1 ORDER BY seq DESC LIMIT 16"
        )
        for seg_sid, seg_lo, seg_hi in self._lineage.segments(conn, row):
            top = row.last_seq if seg_hi is None else min(row.last_seq, seg_hi)
            for seq, at, blob in conn.execute(sql, (seg_sid, seg_lo, top)):
                data = self._bodies.load(conn, blob)
                if isinstance(data, UserMessage) and data.origin.kind != "context":
                    role: Literal["user", "assistant"] = "user"
                elif isinstance(data, AssistantMessage):
                    role = "assistant"
                else:
                    continue
                text = text_of(data.content)
                return MessagePreview(
                    seq=seq,
                    at=at,
                    role=role,
                    text=text[:MESSAGE_PREVIEW_MAX_CHARS],
                    truncated=len(text) > MESSAGE_PREVIEW_MAX_CHARS,
                )
        return None

    # ------------------------------------------------------------------ events

    async def page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        through_seq: int | None = None,
    ) -> HistoryPage:
        _check_limit(limit)
        if before_seq is not None and (_not_int(before_seq) or before_seq < 1):
            raise InvalidSessionArgument("beforeSeq must be an integer >= 1")
        if through_seq is not None and (_not_int(through_seq) or through_seq < 0):
            raise InvalidSessionArgument("throughSeq must be an integer >= 0")

        def job(conn: sqlite3.Connection) -> HistoryPage:
            row = session_row(conn, session_id)
            through = row.last_seq if through_seq is None else through_seq
            if through > row.last_seq:
                raise CoordinateOutOfRange(
                    f"throughSeq {through} is beyond the last seq {row.last_seq}"
                )
            hi = through if before_seq is None else min(through, before_seq - 1)
            rows = self._scan(conn, row, hi=hi, limit=limit, descending=True)
            events = tuple(self._event(conn, r) for r in rows)
            has_more = bool(events) and events[-1].seq > 1
            return HistoryPage(
                events=events,
                has_more=has_more,
                through_seq=through,
                next_before_seq=events[-1].seq if has_more else None,
            )

        return await self.run(job)

    async def read(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        through_seq: int | None = None,
        limit: int = MAX_PAGE_LIMIT,
    ) -> tuple[SessionEvent, ...]:
        _check_limit(limit)
        if _not_int(after_seq) or after_seq < 0:
            raise InvalidSessionArgument("afterSeq must be an integer >= 0")

        def job(conn: sqlite3.Connection) -> tuple[SessionEvent, ...]:
            row = session_row(conn, session_id)
            hi = row.last_seq if through_seq is None else min(through_seq, row.last_seq)
            rows = self._scan(conn, row, hi=hi, limit=limit, descending=False, lo=after_seq)
            return tuple(self._event(conn, r) for r in rows)

        return await self.run(job)

    async def read_all(self, session_id: str) -> tuple[SessionEvent, ...]:
        first = await self.page(session_id, limit=1)
        through = first.through_seq
        out: list[SessionEvent] = []
        after = 0
        while after < through:
            chunk = await self.read(session_id, after_seq=after, through_seq=through)
            if not chunk:  # pragma: no cover - contiguous seqs make this unreachable
                break
            out.extend(chunk)
            after = chunk[-1].seq
        return tuple(out)

    async def read_seqs(self, session_id: str, seqs: Sequence[int]) -> dict[int, SessionEvent]:
        wanted = sorted(set(seqs))
        if not wanted:
            return {}

        def job(conn: sqlite3.Connection) -> dict[int, SessionEvent]:
            row = session_row(conn, session_id)
            if wanted[0] < 1 or wanted[-1] > row.last_seq:
                raise CoordinateOutOfRange(f"seqs outside 1..{row.last_seq}")
            out: dict[int, SessionEvent] = {}
            for seg_sid, seg_lo, seg_hi in self._lineage.segments(conn, row):
                mine = [s for s in wanted if s > seg_lo and (seg_hi is None or s <= seg_hi)]
                for lo in range(0, len(mine), _SEQS_PER_QUERY):
                    part = mine[lo : lo + _SEQS_PER_QUERY]
                    marks = ",".join("?" * len(part))
                    for r in conn.execute(
                        f"SELECT seq, at, data FROM events WHERE sid = ? AND seq IN ({marks})",
                        (seg_sid, *part),
                    ):
                        out[r[0]] = self._event(conn, r)
            return out

        return await self.run(job)

    def _scan(
        self,
        conn: sqlite3.Connection,
        row: SessionRow,
        *,
        hi: int,
        limit: int,
        descending: bool,
        lo: int = 0,
    ) -> list[tuple[int, int, bytes]]:
        segments = self._lineage.segments(conn, row)
        if not descending:
            segments = tuple(reversed(segments))
        order = "DESC" if descending else "ASC"
        sql = (
            "SELECT seq, at, data FROM events WHERE sid = ? AND seq > ? AND seq <= ? "
            f"ORDER BY seq {order} LIMIT ?"
        )
        out: list[tuple[int, int, bytes]] = []
        for seg_sid, seg_lo, seg_hi in segments:
            top = hi if seg_hi is None else min(hi, seg_hi)
            bottom = max(lo, seg_lo)
            if top <= bottom:
                continue
            out.extend(conn.execute(sql, (seg_sid, bottom, top, limit - len(out))))
            if len(out) >= limit:
                break
        return out

    def _event(self, conn: sqlite3.Connection, r: tuple[int, int, bytes]) -> SessionEvent:
        return SessionEvent(seq=r[0], at=r[1], data=self._bodies.load(conn, r[2]))

    # ------------------------------------------------------------------ workspaces

    async def list_workspaces(self) -> tuple[Workspace, ...]:
        def job(conn: sqlite3.Connection) -> tuple[Workspace, ...]:
            rows = conn.execute(
                "SELECT id, root_path, name, created_at FROM workspaces ORDER BY created_at, rowid"
            )
            return tuple(workspace_of(r) for r in rows)

        return await self.run(job)

    async def workspace(self, workspace_id: str) -> Workspace:
        def job(conn: sqlite3.Connection) -> Workspace:
            return require_workspace(conn, workspace_id)

        return await self.run(job)


def _not_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


def _check_limit(limit: int) -> None:
    if _not_int(limit) or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise InvalidSessionArgument(f"limit must be an integer in 1..{MAX_PAGE_LIMIT}")
