"""``TraceStore``: the bounded, durable home of the canonical assembly records.

One SQLite database, ``assembly-audit/audit.sqlite3`` in the Tavern plugin's data directory, one
row per record (WAL, ``synchronous=NORMAL`` like the host's event store). Adding a turn's records
is one transaction that inserts those rows and deletes the rows the bounds evict; nothing else is
read, re-encoded or rewritten, so the cost of a turn's audit does not grow with the session. A
crash (even ``kill -9``) mid-append leaves the previous commit readable; a failed write rolls
back and changes nothing on disk or in memory.

Why SQLite and not an append-only file with an index: the bounds (records and bytes per session,
sessions and bytes in total, oldest first) evict from the *front* of a session and across
sessions, which an append-only file can only do by rewriting it — exactly the cost this store
removes — while SQLite deletes rows in place and reuses their pages; a transaction makes "insert
these, evict those" atomic without a hand-rolled journal; and the v3 detail route looks one
record up by id through an index instead of scanning. ``sqlite3`` is in the standard library.

Bounds (:mod:`.limits`): records per session and bytes per session (oldest records evicted
first), sessions and total bytes (least recently written sessions evicted first), bytes per
record (compacted, never refused, :mod:`.compaction`). Blocking work runs in a thread.

Older Innkeeper versions kept one JSON file per session (``<sha256(sessionId)[:32]>.json``);
:meth:`TraceStore.open` imports such files (oldest written first, through the same bounds) and
removes them once their records are committed, so an interrupted migration simply runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_tavern.resources import atomic

from .compaction import compact, encode_record
from .limits import (
    MAX_FILE_READ_BYTES,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_SESSION,
    MAX_SESSION_BYTES,
    MAX_SESSIONS,
    MAX_TOTAL_BYTES,
    TRACE_DIR,
)
from .model import AssemblyRecord, SessionTraceFile

__all__ = ["DATABASE_NAME", "TraceLimits", "TraceStore", "compact"]

#: The database file inside :data:`~.limits.TRACE_DIR`.
DATABASE_NAME: Final = "audit.sqlite3"
#: Bytes a session is charged beyond its records (the old file's envelope; keeps the per-session
#: budget meaning what it meant when records lived in one JSON file).
SESSION_OVERHEAD_BYTES: Final = 512

_record_decoder = msgspec.json.Decoder(AssemblyRecord)
_legacy_decoder = msgspec.json.Decoder(SessionTraceFile)

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    record_id TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS records_by_id ON records (session, record_id);
CREATE INDEX IF NOT EXISTS records_by_session ON records (session, seq);
"""


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """The store's caps (defaults from :mod:`.limits`; tests lower them)."""

    max_records_per_session: int = MAX_RECORDS_PER_SESSION
    max_sessions: int = MAX_SESSIONS
    max_record_bytes: int = MAX_RECORD_BYTES
    max_session_bytes: int = MAX_SESSION_BYTES
    max_total_bytes: int = MAX_TOTAL_BYTES

    def wire(self) -> dict[str, int]:
        """camelCase JSON for ``/capabilities`` and ``storage``."""
        return {
            "maxRecordsPerSession": self.max_records_per_session,
            "maxSessions": self.max_sessions,
            "maxRecordBytes": self.max_record_bytes,
            "maxSessionBytes": self.max_session_bytes,
            "maxTotalBytes": self.max_total_bytes,
        }


@dataclass(slots=True)
class _Usage:
    """One session's rows, mirrored in memory: bytes, count and the seq of its last write."""

    bytes: int
    records: int
    last_seq: int


class TraceStore:
    """Rows of :class:`AssemblyRecord` per session in one SQLite database, bounded."""

    def __init__(
        self,
        data_dir: Path,
        *,
        limits: TraceLimits | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.folder = Path(data_dir) / TRACE_DIR
        self.path = self.folder / DATABASE_NAME
        self.limits = limits or TraceLimits()
        self.log = logger or logging.getLogger(__name__)
        self._usage: dict[str, _Usage] = {}
        self._conn: sqlite3.Connection | None = None
        #: one connection, used from worker threads one at a time
        self._db_lock = threading.Lock()
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ open / close / stats

    async def open(self) -> None:
        """Open (or create) the database, load per-session usage, import legacy files."""
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        with self._db_lock:
            if self._conn is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
                self._conn = conn
            rows = self._conn.execute(
                "SELECT session, SUM(bytes), COUNT(*), MAX(seq) FROM records GROUP BY session"
            ).fetchall()
            self._usage = {s: _Usage(int(b), int(n), int(q)) for s, b, n, q in rows}
        self._migrate_legacy_files()

    async def close(self) -> None:
        """Close the database (the store can be opened again)."""

        def close() -> None:
            with self._db_lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        async with self._lock:
            await asyncio.to_thread(close)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("TraceStore.open() was not awaited")
        return self._conn

    @property
    def total_bytes(self) -> int:
        """Bytes of every stored record (plus each session's envelope)."""
        return sum(u.bytes + SESSION_OVERHEAD_BYTES for u in self._usage.values())

    @property
    def session_count(self) -> int:
        """Sessions that have records."""
        return len(self._usage)

    def storage(self, session_id: str | None = None) -> dict[str, Any]:
        """``storage`` block of the routes: usage and limits."""
        out: dict[str, Any] = {
            "schemaVersion": 4,
            "sessions": self.session_count,
            "bytes": self.total_bytes,
            **self.limits.wire(),
        }
        if session_id is not None:
            usage = self._usage.get(session_id)
            out["sessionBytes"] = usage.bytes + SESSION_OVERHEAD_BYTES if usage else 0
        return out

    # ------------------------------------------------------------------ reads

    async def records(self, session_id: str) -> list[AssemblyRecord]:
        """The session's records, oldest first (empty when it has none)."""
        if session_id not in self._usage:
            return []
        rows = await asyncio.to_thread(
            self._select,
            "SELECT record_id, data FROM records WHERE session = ? ORDER BY seq",
            (session_id,),
        )
        return self._decode(session_id, rows)

    async def get(self, session_id: str, record_id: str) -> AssemblyRecord | None:
        """One record by id."""
        if session_id not in self._usage:
            return None
        rows = await asyncio.to_thread(
            self._select,
            "SELECT record_id, data FROM records WHERE session = ? AND record_id = ?",
            (session_id, record_id),
        )
        found = self._decode(session_id, rows)
        return found[0] if found else None

    def _select(self, sql: str, args: tuple[str, ...]) -> list[tuple[str, bytes]]:
        with self._db_lock:
            return self._db().execute(sql, args).fetchall()

    def _decode(self, session_id: str, rows: list[tuple[str, bytes]]) -> list[AssemblyRecord]:
        out: list[AssemblyRecord] = []
        for record_id, data in rows:
            try:
                record = _record_decoder.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.log.error("assembly audit record %s is invalid; skipped", record_id)
                continue
            if record.session_id == session_id:
                out.append(record)
        return out

    # ------------------------------------------------------------------ writes

    async def add(self, session_id: str, records: list[AssemblyRecord]) -> list[AssemblyRecord]:
        """Append ``records`` (replacing any with the same ``recordId``) atomically.

        Returns what was stored (compacted records included). Raises ``OSError`` if the disk
        refuses the write; nothing changed then.
        """
        if not records:
            return []
        async with self._lock:
            return await asyncio.to_thread(self._add, session_id, records)

    def _add(self, session_id: str, records: list[AssemblyRecord]) -> list[AssemblyRecord]:
        fitted = [compact(r, self.limits.max_record_bytes) for r in records]
        with self._db_lock:
            try:
                kept = self._write(session_id, fitted)
            except sqlite3.Error as exc:
                raise OSError(f"assembly audit write failed: {exc}") from exc
        return [record for record, _ in fitted if record.record_id in kept]

    def _write(self, session_id: str, fitted: list[tuple[AssemblyRecord, bytes]]) -> set[str]:
        """One transaction: insert, evict; the in-memory usage changes only after COMMIT."""
        conn = self._db()
        usage = dict(self._usage)
        mine = usage.get(session_id)
        own = _Usage(mine.bytes, mine.records, mine.last_seq) if mine else _Usage(0, 0, 0)
        conn.execute("BEGIN IMMEDIATE")
        try:
            inserted: dict[int, str] = {}
            for record, data in fitted:
                old = conn.execute(
                    "DELETE FROM records WHERE session = ? AND record_id = ? RETURNING bytes",
                    (session_id, record.record_id),
                ).fetchall()
                for (size,) in old:
                    own.bytes -= size
                    own.records -= 1
                cursor = conn.execute(
                    "INSERT INTO records (session, record_id, bytes, data) VALUES (?, ?, ?, ?)",
                    (session_id, record.record_id, len(data), data),
                )
                seq = int(cursor.lastrowid or 0)
                inserted[seq] = record.record_id
                own.bytes += len(data)
                own.records += 1
                own.last_seq = seq
            evicted = self._evict_oldest(conn, session_id, own)
            usage[session_id] = own
            self._evict_sessions(conn, usage, keep=session_id)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self._usage = usage
        return {record_id for seq, record_id in inserted.items() if seq not in evicted}

    def _evict_oldest(self, conn: sqlite3.Connection, session_id: str, own: _Usage) -> set[int]:
        """Drop the session's oldest rows until its count and byte budget fit (keep one)."""
        limits = self.limits
        evicted: set[int] = set()

        def over() -> bool:
            return own.records > 1 and (
                own.records > limits.max_records_per_session
                or own.bytes + SESSION_OVERHEAD_BYTES > limits.max_session_bytes
            )

        while over():
            rows = conn.execute(
                "SELECT seq, bytes FROM records WHERE session = ? ORDER BY seq LIMIT 16",
                (session_id,),
            ).fetchall()
            doomed: list[int] = []
            for seq, size in rows:
                if not over():
                    break
                doomed.append(seq)
                own.bytes -= size
                own.records -= 1
            conn.executemany("DELETE FROM records WHERE seq = ?", [(s,) for s in doomed])
            evicted.update(doomed)
        return evicted

    def _evict_sessions(
        self, conn: sqlite3.Connection, usage: dict[str, _Usage], *, keep: str
    ) -> None:
        """Drop least recently written sessions until the session count and total bytes fit."""
        limits = self.limits
        order = sorted((u.last_seq, s) for s, u in usage.items() if s != keep)

        def total() -> int:
            return sum(u.bytes + SESSION_OVERHEAD_BYTES for u in usage.values())

        while order and (len(usage) > limits.max_sessions or total() > limits.max_total_bytes):
            _, victim = order.pop(0)
            conn.execute("DELETE FROM records WHERE session = ?", (victim,))
            del usage[victim]

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session's records (``True`` if it had any)."""
        async with self._lock:
            if session_id not in self._usage:
                return False

            def delete() -> None:
                with self._db_lock:
                    self._db().execute("DELETE FROM records WHERE session = ?", (session_id,))
                    usage = dict(self._usage)
                    usage.pop(session_id, None)
                    self._usage = usage

            await asyncio.to_thread(delete)
            return True

    # ------------------------------------------------------------------ legacy files

    def _migrate_legacy_files(self) -> None:
        """Import ``<hash>.json`` session files of earlier versions, oldest written first."""
        legacy: list[tuple[float, str]] = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(atomic.TEMP_SUFFIX):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            elif entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                legacy.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
        for _, name in sorted(legacy):
            path = self.folder / name
            document = self._read_legacy(path)
            if document is not None and document.records:
                # Committed before the file goes: a crash in between imports it again, and
                # the same record ids replace themselves.
                with self._db_lock:
                    self._write(
                        document.session_id,
                        [compact(r, self.limits.max_record_bytes) for r in document.records],
                    )
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _read_legacy(self, path: Path) -> SessionTraceFile | None:
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size > MAX_FILE_READ_BYTES:
                    self.log.warning("assembly audit file %s is too large; dropped", path.name)
                    return None
                data = handle.read()
            return _legacy_decoder.decode(data)
        except OSError as exc:
            self.log.warning(
                "assembly audit file %s unreadable (%s)", path.name, type(exc).__name__
            )
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.log.error("assembly audit file %s is invalid; dropped", path.name)
        return None


__all__ += ["encode_record"]
