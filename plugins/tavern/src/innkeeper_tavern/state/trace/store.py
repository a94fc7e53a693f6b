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
record (compacted, never refused, :mod:`.compaction`). The bounds count a record's JSON, what a
reader gets back, not what it occupies on disk. Blocking work runs in a thread.

Content-addressed storage (:mod:`.chunks`): a session's consecutive records repeat almost
everything (section metadata, rejected decisions, selections). A record is stored as a delta
(:mod:`.delta`) against its session's *base* record, which lives once in ``chunks`` (deflated,
addressed by the SHA-256 of its JSON) and is referenced by every row built on it
(``records.base``); a record whose delta would exceed :data:`.chunks.BASE_DELTA_RATIO` of its base
becomes the next base. Rows and chunks change in the same transaction; a chunk goes in the
transaction that deletes the last row referencing it, never before. Reading a row gives back the
record's JSON byte for byte. Rows written before this layout (``base`` NULL) hold the JSON itself
and read as before; the column is added in place.

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
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_tavern.state.resources import atomic

from .chunks import Base, collect, delete_session_rows, encode_row, load_chunk, upgrade
from .compaction import compact, encode_record
from .delta import DeltaError, apply_delta, inflate
from .limits import (
    MAX_CACHED_BASES,
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
        #: each recently written session's base (bounded: :data:`~.limits.MAX_CACHED_BASES`)
        self._bases: OrderedDict[str, Base] = OrderedDict()
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
                upgrade(conn)
                self._conn = conn
            self._bases.clear()
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
                self._bases.clear()

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
        return self._decode(session_id, await self._session_rows(session_id))

    async def get(self, session_id: str, record_id: str) -> AssemblyRecord | None:
        """One record by id."""
        if session_id not in self._usage:
            return None
        rows = await asyncio.to_thread(
            self._select,
            "SELECT record_id, base, data FROM records WHERE session = ? AND record_id = ?",
            (session_id, record_id),
        )
        found = self._decode(session_id, rows)
        return found[0] if found else None

    async def stored_json(self, session_id: str) -> list[bytes]:
        """The session's records as the JSON bytes they were stored as, oldest first (what
        every read decodes; byte for byte what :meth:`add` encoded)."""
        return [data for _, data in await self._session_rows(session_id)]

    async def _session_rows(self, session_id: str) -> list[tuple[str, bytes]]:
        if session_id not in self._usage:
            return []
        return await asyncio.to_thread(
            self._select,
            "SELECT record_id, base, data FROM records WHERE session = ? ORDER BY seq",
            (session_id,),
        )

    def _select(self, sql: str, args: tuple[str, ...]) -> list[tuple[str, bytes]]:
        """Rows as ``(recordId, JSON)``; a row whose delta or chunk is corrupt is skipped."""
        with self._db_lock:
            conn = self._db()
            bases: dict[int, bytes] = {b.chunk: b.data for b in self._bases.values()}
            out: list[tuple[str, bytes]] = []
            for record_id, chunk, data in conn.execute(sql, args).fetchall():
                try:
                    if chunk is not None:
                        base = bases.get(chunk)
                        if base is None:
                            base = bases[chunk] = load_chunk(conn, chunk)
                        data = apply_delta(data, base)
                except DeltaError as exc:
                    self.log.error("assembly audit record %s unreadable (%s)", record_id, exc)
                    continue
                out.append((record_id, data))
            return out

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
            except (sqlite3.Error, DeltaError) as exc:
                raise OSError(f"assembly audit write failed: {exc}") from exc
        return [record for record, _ in fitted if record.record_id in kept]

    def _write(self, session_id: str, fitted: list[tuple[AssemblyRecord, bytes]]) -> set[str]:
        """One transaction: insert, evict, collect chunks; memory changes only after COMMIT."""
        conn = self._db()
        usage = dict(self._usage)
        mine = usage.get(session_id)
        own = _Usage(mine.bytes, mine.records, mine.last_seq) if mine else _Usage(0, 0, 0)
        released: set[int | None] = set()
        conn.execute("BEGIN IMMEDIATE")
        try:
            base = self._session_base(conn, session_id)
            inserted: dict[int, str] = {}
            for record, data in fitted:
                old = conn.execute(
                    "DELETE FROM records WHERE session = ? AND record_id = ? RETURNING bytes, base",
                    (session_id, record.record_id),
                ).fetchall()
                for size, chunk in old:
                    own.bytes -= size
                    own.records -= 1
                    released.add(chunk)
                base, delta = encode_row(conn, data, base)
                cursor = conn.execute(
                    "INSERT INTO records (session, record_id, bytes, data, base) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (session_id, record.record_id, len(data), delta, base.chunk),
                )
                seq = int(cursor.lastrowid or 0)
                inserted[seq] = record.record_id
                own.bytes += len(data)
                own.records += 1
                own.last_seq = seq
            evicted = self._evict_oldest(conn, session_id, own, released)
            usage[session_id] = own
            gone = self._evict_sessions(conn, usage, keep=session_id, released=released)
            collected = collect(conn, released)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self._usage = usage
        self._forget_bases(gone, collected)
        if base is not None and base.chunk not in collected:
            self._bases[session_id] = base
            self._bases.move_to_end(session_id)
            while len(self._bases) > MAX_CACHED_BASES:
                self._bases.popitem(last=False)
        return {record_id for seq, record_id in inserted.items() if seq not in evicted}

    def _session_base(self, conn: sqlite3.Connection, session_id: str) -> Base | None:
        """The base of the session's newest chunked row (cached), ``None`` when it has none."""
        cached = self._bases.get(session_id)
        if cached is not None:
            return cached
        row = conn.execute(
            "SELECT c.id, c.bytes, c.data FROM records AS r JOIN chunks AS c ON c.id = r.base "
            "WHERE r.session = ? AND r.base IS NOT NULL ORDER BY r.seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        chunk, size, packed = row
        try:
            return Base(chunk, inflate(packed, size), len(packed))
        except DeltaError:
            self.log.error("assembly audit chunk %d unreadable; a new base is started", chunk)
            return None

    def _forget_bases(self, sessions: Iterable[str], chunks: set[int]) -> None:
        for session in sessions:
            self._bases.pop(session, None)
        for session in [s for s, b in self._bases.items() if b.chunk in chunks]:
            del self._bases[session]

    def _evict_oldest(
        self, conn: sqlite3.Connection, session_id: str, own: _Usage, released: set[int | None]
    ) -> set[int]:
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
                "SELECT seq, bytes, base FROM records WHERE session = ? ORDER BY seq LIMIT 16",
                (session_id,),
            ).fetchall()
            doomed: list[int] = []
            for seq, size, chunk in rows:
                if not over():
                    break
                doomed.append(seq)
                released.add(chunk)
                own.bytes -= size
                own.records -= 1
            conn.executemany("DELETE FROM records WHERE seq = ?", [(s,) for s in doomed])
            evicted.update(doomed)
        return evicted

    def _evict_sessions(
        self,
        conn: sqlite3.Connection,
        usage: dict[str, _Usage],
        *,
        keep: str,
        released: set[int | None],
    ) -> list[str]:
        """Drop least recently written sessions until the session count and total bytes fit."""
        limits = self.limits
        order = sorted((u.last_seq, s) for s, u in usage.items() if s != keep)
        gone: list[str] = []

        def total() -> int:
            return sum(u.bytes + SESSION_OVERHEAD_BYTES for u in usage.values())

        while order and (len(usage) > limits.max_sessions or total() > limits.max_total_bytes):
            _, victim = order.pop(0)
            released.update(delete_session_rows(conn, victim))
            del usage[victim]
            gone.append(victim)
        return gone

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session's records (``True`` if it had any)."""
        async with self._lock:
            if session_id not in self._usage:
                return False

            def delete() -> None:
                with self._db_lock:
                    conn = self._db()
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        collected = collect(conn, delete_session_rows(conn, session_id))
                        conn.execute("COMMIT")
                    except BaseException:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                        raise
                    usage = dict(self._usage)
                    usage.pop(session_id, None)
                    self._usage = usage
                    self._forget_bases([session_id], collected)

            await asyncio.to_thread(delete)
            return True

    def chunk_stats(self) -> dict[str, int]:
        """What the store holds on disk (for benchmarks and tests): rows, chunks and the bytes
        of each (``recordBytes`` is what the bounds count: the records' JSON)."""
        with self._db_lock:
            conn = self._db()
            rows, data, logical = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0), COALESCE(SUM(bytes), 0) "
                "FROM records"
            ).fetchone()
            chunks, packed = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM chunks"
            ).fetchone()
        return {
            "records": int(rows),
            "recordBytes": int(logical),
            "rowBytes": int(data),
            "chunks": int(chunks),
            "chunkBytes": int(packed),
        }

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
