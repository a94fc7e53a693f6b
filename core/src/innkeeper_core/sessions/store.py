"""The durable session event store: one SQLite file (WAL) under the data directory.

Layout and guarantees (docs/contract/sessions.md#durability):

* ``events(sid, seq, at, message, data)``: per-session append-only rows, ``seq`` 1-based and
  contiguous; ``data`` is the msgspec JSON of the tagged :data:`EventData` payload (its type
  is inside it), or what ``bodies`` and ``deltas`` made of it; ``message`` is 1 for a
  ``user/message`` or ``assistant/message`` row (what a session's preview looks for), else 0
  (the integers 0 and 1 take no bytes in a SQLite record).
* ``sessions``: the header plus ``open_turn``/``last_turn``, updated in the same transaction as
  the ``turn/start``/``turn/end`` rows that change them. Its ``last_seq`` column is a floor (the
  fork point, or the last seq when the turn state last changed): the session's last seq is the
  greater of it and the newest row of its own in the ``events`` index (:data:`_LAST_SEQ`, one
  index seek), so an append that changes no turn state writes its event rows only, and a reader
  still never sees a seq the header does not cover.
* One writer thread owns the only write connection and applies jobs in submission order; jobs
  that queue up while a transaction commits are grouped into the next transaction (group
  commit), each inside its own SAVEPOINT so one failing job never takes the others down. A
  crash (even SIGKILL) loses at most uncommitted jobs and never leaves a partial event.
* Reads run on a small pool of read connections. WAL gives each statement a snapshot, so reads
  never block the writer and the writer never blocks reads.
* Forks share rows: a child records ``seed_sid``/``seed_length`` and reads its inherited prefix
  from its ancestors, so forking a long session costs O(1) rows. Past
  :data:`MAX_FORK_SHARE_DEPTH` shared ancestors the prefix is copied instead, which keeps every
  read at a bounded number of range scans.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import msgspec

from innkeeper_core.sessions.bodies import CHUNK_SCHEMA, CHUNKED_JSON_MIN_BYTES, BodyCodec
from innkeeper_core.sessions.deltas import PendingDeltas, delta_kind
from innkeeper_hostapi.sessions import (
    DEFAULT_PAGE_LIMIT,
    MAX_DELEGATION_DEPTH,
    MAX_PAGE_LIMIT,
    MESSAGE_PREVIEW_MAX_CHARS,
    SESSION_FORMAT_VERSION,
    AssistantMessage,
    CoordinateOutOfRange,
    DelegationTooDeep,
    EventData,
    HistoryPage,
    InvalidSessionArgument,
    MessagePreview,
    ParentRef,
    SessionError,
    SessionEvent,
    SessionHeader,
    SessionInspection,
    SessionList,
    SessionMeta,
    SessionNotFound,
    SessionSummary,
    SessionTitle,
    TurnConflict,
    TurnEnd,
    TurnStart,
    UserMessage,
    Workspace,
    WorkspaceNotFound,
    branch_title,
    event_type,
    text_of,
)

__all__ = [
    "MAX_CACHED_CHAINS",
    "MAX_EVENTS_PER_APPEND",
    "MAX_EVENT_DATA_BYTES",
    "MAX_FORK_SHARE_DEPTH",
    "MAX_WRITE_BATCH",
    "READ_THREADS",
    "STORE_FILE_NAME",
    "STORE_SCHEMA_VERSION",
    "AppendListener",
    "Clock",
    "EventStore",
    "IdFactory",
    "StoreClosed",
    "event_store_resource",
    "iso_ms",
    "system_clock",
    "uuid_ids",
]

log = logging.getLogger("innkeeper.sessions.store")

#: File name of the store inside the data directory.
STORE_FILE_NAME: Final = "sessions.sqlite3"
#: Version of the SQLite schema below (not the session *log* format, which is
#: :data:`SESSION_FORMAT_VERSION`).
STORE_SCHEMA_VERSION: Final = 4
#: Most jobs grouped into one write transaction.
MAX_WRITE_BATCH: Final = 512
#: Most events one ``append_many`` call may write (one transaction).
MAX_EVENTS_PER_APPEND: Final = 20_000
#: Largest encoded payload of one event.
MAX_EVENT_DATA_BYTES: Final = 8 * 1024 * 1024
#: Largest SQLite rowid (a session list cursor names one).
_MAX_ROWID: Final = (1 << 63) - 1
#: Most ancestors whose rows a fork shares before its prefix is copied instead.
MAX_FORK_SHARE_DEPTH: Final = 32
#: Sessions whose fork chain is cached for reads.
MAX_CACHED_CHAINS: Final = 10_000
#: Read connections (threads) serving queries.
READ_THREADS: Final = 2
#: How long a connection waits on a lock held by another process before failing.
BUSY_TIMEOUT_S: Final = 10.0
#: Largest encoded append (all its events) written inline on the event loop when the writer is
#: idle; larger ones, and any needing body chunks, always go to the writer thread.
MAX_INLINE_APPEND_BYTES: Final = 16 * 1024
#: WAL size past which the writer thread checkpoints and truncates it (the inline connection
#: never checkpoints itself, so a commit on the loop never copies pages).
INLINE_CHECKPOINT_BYTES: Final = 4 * 1024 * 1024
#: Inline commits between two yields to the event loop (about a millisecond of work).
_YIELD_EVERY: Final = 32
#: Inline commits between two looks at the WAL's size.
_WAL_CHECK_EVERY: Final = 32
#: Seqs bound into one ``IN (...)`` query (SQLite's default variable limit is 999 or more).
_SEQS_PER_QUERY: Final = 500

#: Returns the current time in epoch milliseconds.
Clock = Callable[[], int]
#: Returns a fresh unique id.
IdFactory = Callable[[], str]
#: Called on the event loop with the events one commit appended to a session.
AppendListener = Callable[[str, Sequence[SessionEvent]], None]

T = TypeVar("T")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS store_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workspaces (
    id TEXT PRIMARY KEY,
    root_path TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    sid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    title TEXT,
    workspace_id TEXT,
    parent_sid INTEGER,
    parent_at INTEGER,
    seed_sid INTEGER,
    seed_length INTEGER NOT NULL,
    chain_depth INTEGER NOT NULL,
    delegation_depth INTEGER NOT NULL,
    format_version INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    last_turn INTEGER NOT NULL,
    open_turn INTEGER
);
CREATE INDEX IF NOT EXISTS sessions_by_workspace ON sessions (workspace_id, sid);
CREATE TABLE IF NOT EXISTS events (
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    message INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;
"""

#: A session's last seq (``s`` is its ``sessions`` row): the stored floor or its newest own row.
_LAST_SEQ: Final = (
    "MAX(s.last_seq, COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.sid = s.sid), 0))"
)
_SESSION_COLUMNS: Final = (
    "s.sid, s.id, s.created_at, s.title, s.workspace_id, p.id, s.parent_at, s.seed_sid, "
    f"s.seed_length, s.chain_depth, s.delegation_depth, s.format_version, {_LAST_SEQ}, "
    "s.last_turn, s.open_turn"
)
_INSERT_EVENT: Final = "INSERT INTO events (sid, seq, at, message, data) VALUES (?, ?, ?, ?, ?)"
_SESSION_SELECT: Final = (
    f"SELECT {_SESSION_COLUMNS} FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent_sid"
)


def _replace_event_type_column(conn: sqlite3.Connection) -> None:
    """Rebuild a schema 1-3 ``events`` table with a ``message`` flag instead of its ``type``
    text (the type is inside each row's data; the text cost about 13 bytes a row and was only
    read to find a session's last message), in one transaction: a crash leaves the old table
    and version, and the next open tries again; a crash after it leaves the new table, which
    the next open finds and only bumps the version."""
    columns = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
    if "type" not in columns:
        return
    count = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    log.info("session store: rebuilding %d event rows without their type column", count)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE events_v4 (sid INTEGER NOT NULL, seq INTEGER NOT NULL, "
            "at INTEGER NOT NULL, message INTEGER NOT NULL, data BLOB NOT NULL, "
            "PRIMARY KEY (sid, seq)) WITHOUT ROWID"
        )
        conn.execute(
            "INSERT INTO events_v4 SELECT sid, seq, at, "
            "type IN ('user/message', 'assistant/message'), data FROM events ORDER BY sid, seq"
        )
        conn.execute("DROP TABLE events")
        conn.execute("ALTER TABLE events_v4 RENAME TO events")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class StoreClosed(SessionError):
    """The store was closed; no further reads or writes are possible."""

    code = "store-closed"


def system_clock() -> int:
    """The wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def uuid_ids() -> str:
    """A random UUID4 string."""
    return str(uuid.uuid4())


def iso_ms(epoch_ms: int) -> str:
    """Format epoch milliseconds as ``YYYY-MM-DDTHH:mm:ss.sssZ`` (UTC)."""
    moment = datetime.fromtimestamp(epoch_ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class _Row:
    """A ``sessions`` row as the store uses it internally."""

    sid: int
    id: str
    created_at: int
    title: str | None
    workspace_id: str | None
    parent_id: str | None
    parent_at: int | None
    seed_sid: int | None
    seed_length: int
    chain_depth: int
    delegation_depth: int
    format_version: int
    last_seq: int
    last_turn: int
    open_turn: int | None

    def header(self) -> SessionHeader:
        parent = (
            ParentRef(session_id=self.parent_id, at_event_id=self.parent_at)
            if self.parent_id is not None and self.parent_at is not None
            else None
        )
        return SessionHeader(
            id=self.id,
            created_at=iso_ms(self.created_at),
            title=self.title,
            workspace_id=self.workspace_id,
            parent=parent,
            delegation_depth=self.delegation_depth,
            format_version=self.format_version,
            seed_length=self.seed_length,
        )


#: A range of seqs ``(lo, hi]`` of one session's own rows; ``hi is None`` means unbounded.
_Segment = tuple[int, int, int | None]


def _connect(path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    return conn


#: An appending job: runs in a transaction on ``conn``, given the session's cached append
#: state when the caller has one.
_AppendJob = Callable[..., "_Appended"]

_Job = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop]


_Results = list[tuple["asyncio.Future[Any]", bool, Any]]


@dataclass(frozen=True, slots=True)
class _Appended:
    """What an appending job returns: the durable events (for listeners) and its result."""

    session_id: str
    events: Sequence[SessionEvent]
    result: Any
    #: The session's append state after the job (``None``: unknown, forget the cached one).
    state: _AppendState | None = None
    #: Keyframes and delta bases the job wrote (usable by later writes once it committed).
    deltas: PendingDeltas | None = None


def _checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the WAL into the database (a writer-thread job run outside any transaction)."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _checkpointed(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("session store checkpoint failed: %s", future.exception())


class _Writer:
    """The single writer thread: runs jobs in order, grouping queued ones into a transaction.

    Results go back with one ``call_soon_threadsafe`` per batch and loop, which keeps the
    per-append hand-off cost to one wake-up each way.
    """

    def __init__(self, conn: sqlite3.Connection, deliver: Callable[[_Results], None]) -> None:
        self._conn = conn
        self._deliver = deliver
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name="innkeeper-sqlite-writer", daemon=True
        )
        self._thread.start()

    def submit(self, job: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((job, future, loop))
        return future

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while len(batch) < MAX_WRITE_BATCH:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._run_batch(batch)
            if stop:
                return

    def _run_batch(self, batch: list[_Job]) -> None:
        # A job whose waiter is already cancelled is skipped (a benign race: a cancel that
        # arrives after this check lets the job commit, and its result is dropped). Skipped
        # jobs are still reported, so the store's count of jobs in flight stays exact.
        live = [job for job in batch if not job[1].cancelled() and job[0] is not _checkpoint]
        done: list[tuple[_Job, bool, Any]] = [
            (job, False, None) for job in batch if job[1].cancelled()
        ]
        if live:
            outcomes = self._transaction(live)
            done.extend((job, ok, value) for job, (ok, value) in zip(live, outcomes, strict=True))
        for job in batch:  # maintenance runs outside any transaction
            if job[0] is _checkpoint and not job[1].cancelled():
                try:
                    done.append((job, True, job[0](self._conn)))
                except Exception as exc:
                    done.append((job, False, exc))
        by_loop: dict[asyncio.AbstractEventLoop, _Results] = {}
        for (_, future, loop), ok, value in done:
            by_loop.setdefault(loop, []).append((future, ok, value))
        for loop, results in by_loop.items():
            # A loop closed while we worked has nobody waiting on it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._deliver, results)

    def _transaction(self, live: list[_Job]) -> list[tuple[bool, Any]]:
        """Run ``live`` in one transaction, each in its own savepoint; their outcomes."""
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            if len(live) == 1:
                try:
                    outcomes.append((True, live[0][0](conn)))
                except BaseException as exc:
                    conn.execute("ROLLBACK")
                    outcomes.append((False, exc))
            else:
                for job, _, _ in live:
                    conn.execute("SAVEPOINT job")
                    try:
                        value = job(conn)
                    except BaseException as exc:
                        conn.execute("ROLLBACK TO job")
                        conn.execute("RELEASE job")
                        outcomes.append((False, exc))
                    else:
                        conn.execute("RELEASE job")
                        outcomes.append((True, value))
            if conn.in_transaction:
                conn.execute("COMMIT")
        except BaseException as exc:  # the transaction itself failed: nothing was written
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            log.exception("session store transaction failed; %d job(s) rolled back", len(live))
            outcomes = [(False, exc)] * len(live)
        return outcomes


class EventStore:
    """Async facade over the SQLite session store. Create with :meth:`open`; close with
    :meth:`close` (or ``async with``)."""

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
        self._listeners: list[AppendListener] = []
        self._writer = _Writer(write_conn, self._deliver)
        self._write_conn = write_conn
        #: session id -> its append state as of the last published commit (inline appends
        #: skip reading the row; valid because this process is the file's only writer).
        self._states: dict[str, _AppendState] = {}
        #: Jobs submitted to the writer thread whose results the loop has not delivered yet.
        self._inflight = 0
        #: A second write connection that never waits for a lock (see :meth:`_try_inline`).
        self._inline_conn = inline_conn
        self._inline_commits = 0
        self._next_wal_check = _WAL_CHECK_EVERY
        self._local = threading.local()
        self._read_conns: list[sqlite3.Connection] = []
        self._read_lock = threading.Lock()
        self._readers = concurrent.futures.ThreadPoolExecutor(
            max_workers=READ_THREADS, thread_name_prefix="innkeeper-sqlite-read"
        )
        # sid -> own-row segments of its inherited chain; rows never move once written.
        self._chains: dict[int, tuple[_Segment, ...]] = {}
        self._encoder = msgspec.json.Encoder()
        self._bodies = BodyCodec()
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

        def setup() -> sqlite3.Connection:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = _connect(path)
            try:
                conn.execute(f"PRAGMA synchronous={synchronous}")
                conn.executescript(_SCHEMA + CHUNK_SCHEMA)
                row = conn.execute(
                    "SELECT value FROM store_meta WHERE key='schema_version'"
                ).fetchone()
                if row is None:
                    conn.execute(
                        "INSERT INTO store_meta(key, value) VALUES ('schema_version', ?)",
                        (str(STORE_SCHEMA_VERSION),),
                    )
                elif int(row[0]) in (1, 2, 3):
                    # 1 -> 2 adds text_chunks (created above); 2 -> 3 adds delta rows
                    # (``deltas``), 3 -> 4 deflated chunk bodies (``bodies``), which an
                    # older version could not read, and replaces the events' type column.
                    _replace_event_type_column(conn)
                    conn.execute(
                        "UPDATE store_meta SET value = ? WHERE key = 'schema_version'",
                        (str(STORE_SCHEMA_VERSION),),
                    )
                elif int(row[0]) != STORE_SCHEMA_VERSION:
                    raise SessionError(
                        f"session store schema {row[0]} is not supported "
                        f"(expected {STORE_SCHEMA_VERSION})"
                    )
            except BaseException:
                conn.close()
                raise
            return conn

        def inline() -> sqlite3.Connection:
            conn = _connect(path, busy_timeout_s=0)
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.execute("PRAGMA wal_autocheckpoint=0")
            return conn

        conn = await asyncio.to_thread(setup)
        return cls(
            path, conn, inline_conn=await asyncio.to_thread(inline), clock=clock, new_id=new_id
        )

    async def close(self) -> None:
        """Finish queued writes, then close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._writer.stop)
        await asyncio.to_thread(self._readers.shutdown, True)
        self._write_conn.close()
        if self._inline_conn is not None:
            self._inline_conn.close()
        with self._read_lock:
            for conn in self._read_conns:
                conn.close()
            self._read_conns.clear()

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
            "appendStates": len(self._states),
            "chains": len(self._chains),
        }

    # ------------------------------------------------------------------ listeners

    def add_listener(self, listener: AppendListener) -> Callable[[], None]:
        """Call ``listener(session_id, events)`` on the event loop after every commit that
        appended events, in commit order, before the appender's ``await`` returns. Returns a
        function that removes exactly this registration. A failing listener is logged and
        never affects the append or the other listeners."""
        self._listeners.append(listener)

        def remove() -> None:
            for index, each in enumerate(self._listeners):
                if each is listener:
                    del self._listeners[index]
                    return

        return remove

    def _publish(self, appended: _Appended) -> None:
        # Commit order: the cached state is the session row as of the last published commit.
        states = self._states
        if appended.state is None:
            states.pop(appended.session_id, None)
        else:
            if len(states) >= MAX_CACHED_CHAINS:
                states.clear()
            states[appended.session_id] = appended.state
        if appended.deltas is not None:
            self._bodies.deltas.publish(appended.deltas)
        for listener in tuple(self._listeners):
            try:
                listener(appended.session_id, appended.events)
            except Exception:
                log.exception("session append listener failed")

    def _deliver(self, results: _Results) -> None:
        """Runs on the event loop: publish committed events, then resolve the waiters."""
        self._inflight -= len(results)
        for future, ok, value in results:
            if ok and isinstance(value, _Appended):
                self._publish(value)
                value = value.result
            if future.done():  # the awaiting task was cancelled meanwhile
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    # ------------------------------------------------------------------ plumbing

    def _submit(self, job: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        future = self._writer.submit(job)
        self._inflight += 1
        return future

    async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreClosed("the session store is closed")
        return await self._submit(job)

    async def _write_appended(
        self,
        job: _AppendJob,
        *,
        inline_bytes: int | None = None,
        session_id: str | None = None,
    ) -> Any:
        """Like :meth:`_write` for appending jobs: listeners see the events, the caller gets
        ``_Appended.result``. ``inline_bytes`` (the encoded size) allows the inline path,
        which passes the job ``session_id``'s cached append state when it has one."""
        if self._closed:
            raise StoreClosed("the session store is closed")
        if inline_bytes is not None and inline_bytes <= MAX_INLINE_APPEND_BYTES:
            state = self._states.get(session_id) if session_id is not None else None
            appended = self._try_inline(job, state)
            if appended is not None:
                self._publish(appended)
                # An inline append does not suspend the caller. A task appending in a tight
                # loop must still let the loop run: yield every so many inline commits (a
                # loop iteration per append would double a lone append's cost).
                if not self._inline_commits % _YIELD_EVERY:
                    await asyncio.sleep(0)
                return appended.result
        future: asyncio.Future[Any] = self._submit(job)
        return await future

    def _try_inline(self, job: _AppendJob, state: _AppendState | None) -> _Appended | None:
        """Run a small append on the event loop when nothing is queued for the writer thread;
        ``None`` when it must go to the writer instead.

        A lone append otherwise pays two thread hand-offs (queue to the writer, wake-up of the
        loop), several times the cost of the insert itself. Inline is only taken when the
        writer has no job in flight, so commit order and listener order stay the submission
        order; the connection's busy timeout is zero, so a write lock held by anyone else (a
        backup, another process) makes ``BEGIN`` fail at once instead of blocking the loop; and
        it never checkpoints on commit (the writer does, past :data:`INLINE_CHECKPOINT_BYTES`).
        """
        conn = self._inline_conn
        if conn is None or self._inflight:
            return None
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # locked by someone else: the writer will wait
            return None
        try:
            appended = job(conn, state)
            conn.execute("COMMIT")
        except sqlite3.IntegrityError:
            # The cached state was stale (someone else appended): forget it, let the writer
            # read the row.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._states.clear()
            return None
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if "locked" in str(exc) or "busy" in str(exc):
                return None  # a lock appeared after all: let the writer wait for it
            raise
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._inline_commits += 1
        if self._inline_commits >= self._next_wal_check:
            self._next_wal_check = self._inline_commits + _WAL_CHECK_EVERY
            wal = self.path.with_name(self.path.name + "-wal")
            with contextlib.suppress(OSError):
                if wal.stat().st_size > INLINE_CHECKPOINT_BYTES:
                    # Give the checkpoint time to run before looking again.
                    self._next_wal_check += 8 * _WAL_CHECK_EVERY
                    self._submit(_checkpoint).add_done_callback(_checkpointed)
        return appended

    async def _read(self, job: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreClosed("the session store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._with_read_conn, job)

    def _with_read_conn(self, job: Callable[[sqlite3.Connection], T]) -> T:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._read_lock:
                self._read_conns.append(conn)
        return job(conn)

    @staticmethod
    def _row(conn: sqlite3.Connection, session_id: str) -> _Row:
        found = conn.execute(f"{_SESSION_SELECT} WHERE s.id = ?", (session_id,)).fetchone()
        if found is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return _Row(*found)

    @staticmethod
    def _row_by_sid(conn: sqlite3.Connection, sid: int) -> _Row:
        found = conn.execute(f"{_SESSION_SELECT} WHERE s.sid = ?", (sid,)).fetchone()
        if found is None:  # pragma: no cover - sids come from our own rows
            raise SessionError(f"session row {sid} vanished")
        return _Row(*found)

    def _segments(self, conn: sqlite3.Connection, row: _Row) -> tuple[_Segment, ...]:
        """Own-row ranges of ``row`` and its shared ancestors, newest first."""
        cached = self._chains.get(row.sid)
        if cached is not None:
            return cached
        segments: list[_Segment] = []
        current = row
        hi: int | None = None
        while True:
            lo = current.seed_length if current.seed_sid is not None else 0
            segments.append((current.sid, lo, hi))
            if current.seed_sid is None or current.seed_length == 0:
                break
            hi = current.seed_length if hi is None else min(hi, current.seed_length)
            current = self._row_by_sid(conn, current.seed_sid)
        result = tuple(segments)
        if len(self._chains) >= MAX_CACHED_CHAINS:
            self._chains.clear()  # cheap to rebuild; keeps memory bounded
        self._chains[row.sid] = result
        return result

    def _encode(self, data: EventData) -> bytes:
        blob = self._encoder.encode(data)
        if len(blob) > MAX_EVENT_DATA_BYTES:
            raise InvalidSessionArgument(
                f"event {event_type(data)} is {len(blob)} bytes; the limit is "
                f"{MAX_EVENT_DATA_BYTES}"
            )
        return blob

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
        new_id = session_id or self._new_id()
        now = self._clock()

        def job(conn: sqlite3.Connection) -> SessionHeader:
            if workspace_id is not None:
                _require_workspace(conn, workspace_id)
            parent_sid: int | None = None
            parent_at: int | None = None
            depth = 0
            if delegated_from is not None:
                parent = self._row(conn, delegated_from)
                depth = parent.delegation_depth + 1
                if depth > MAX_DELEGATION_DEPTH:
                    raise DelegationTooDeep(
                        f"delegation depth {depth} exceeds {MAX_DELEGATION_DEPTH}"
                    )
                parent_sid, parent_at = parent.sid, parent.last_seq
            _insert_session(
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
            return self._row(conn, new_id).header()

        header = await self._write(job)
        log.info("session created id=%s depth=%d", header.id, header.delegation_depth)
        return header

    async def fork(self, session_id: str, at_event_id: int) -> SessionHeader:
        """Create a child inheriting events ``1..at_event_id`` of ``session_id``.

        Raises :class:`TurnConflict` when the source has an open turn, and
        :class:`CoordinateOutOfRange` when ``at_event_id`` is not in ``0..last_seq``.
        """
        if isinstance(at_event_id, bool) or not isinstance(at_event_id, int):
            raise InvalidSessionArgument("atEventId must be an integer")
        new_id = self._new_id()
        now = self._clock()

        def job(conn: sqlite3.Connection) -> SessionHeader:
            source = self._row(conn, session_id)
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
                owner = self._row_by_sid(conn, owner.seed_sid)
            copy = owner.chain_depth + 1 > MAX_FORK_SHARE_DEPTH
            if at_event_id == 0 or copy:
                seed_sid, chain_depth = None, 0
            else:
                seed_sid, chain_depth = owner.sid, owner.chain_depth + 1
            sid = _insert_session(
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
                for seg_sid, lo, hi in self._segments(conn, owner):
                    top = at_event_id if hi is None else min(hi, at_event_id)
                    if top > lo:
                        conn.execute(
                            "INSERT INTO events (sid, seq, at, message, data) "
                            "SELECT ?, seq, at, message, data FROM events "
                            "WHERE sid = ? AND seq > ? AND seq <= ?",
                            (sid, seg_sid, lo, top),
                        )
            return self._row(conn, new_id).header()

        header = await self._write(job)
        log.info("session forked id=%s from=%s at=%d", header.id, session_id, at_event_id)
        return header

    async def rename(self, session_id: str, title: str) -> tuple[SessionHeader, SessionEvent]:
        """Set the title and append the matching ``session/title`` event, atomically."""
        data = SessionTitle(title=title)
        blob = self._encode(data)

        def job(conn: sqlite3.Connection) -> _Appended:
            row = self._row(conn, session_id)
            conn.execute("UPDATE sessions SET title = ? WHERE sid = ?", (title, row.sid))
            events, _, frames = self._append_rows(conn, row, [(data, blob)])
            header = self._row(conn, session_id).header()
            return _Appended(session_id, events, (header, events[0]), deltas=frames)

        result: tuple[SessionHeader, SessionEvent] = await self._write_appended(job)
        log.info("session renamed id=%s", session_id)
        return result

    async def inspect(self, session_id: str) -> SessionInspection:
        """Header, ``meta.version``, open turn and last seq of a session."""

        def job(conn: sqlite3.Connection) -> SessionInspection:
            row = self._row(conn, session_id)
            return SessionInspection(
                header=row.header(),
                meta=SessionMeta(version=row.format_version),
                turn_open=row.open_turn is not None,
                open_turn=row.open_turn,
                last_seq=row.last_seq,
                last_turn=row.last_turn,
            )

        return await self._read(job)

    async def open_turn_sessions(self) -> list[str]:
        """Ids of the sessions whose last turn has no ``turn/end`` (a crash left it open)."""

        def job(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT id FROM sessions WHERE open_turn IS NOT NULL ORDER BY sid")
            return [str(r[0]) for r in rows]

        return await self._read(job)

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
            sql = _SESSION_SELECT
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY s.sid DESC LIMIT ?"
            args.append(limit + 1)
            rows = [_Row(*r) for r in conn.execute(sql, args)]
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

        return await self._read(job)

    # ------------------------------------------------------------------ events

    def _append_rows(
        self,
        conn: sqlite3.Connection,
        row: _Row | _AppendState,
        items: Sequence[tuple[EventData, bytes]],
    ) -> tuple[list[SessionEvent], _AppendState, PendingDeltas]:
        """Insert events after ``row.last_seq``, enforcing the turn invariants; returns them,
        the session's append state after them and the keyframes and bases written (to publish
        after the commit). Runs inside the writer's transaction; raising rolls the whole job
        back."""
        open_turn = row.open_turn
        last_turn = row.last_turn
        seq = row.last_seq
        at = self._clock()
        out: list[SessionEvent] = []
        params: list[tuple[int, int, int, int, bytes]] = []
        frames = PendingDeltas()
        for data, blob in items:
            if isinstance(data, TurnStart):
                if open_turn is not None:
                    raise TurnConflict(f"turn {open_turn} is still open")
                if data.turn <= last_turn:
                    raise TurnConflict(f"turn {data.turn} is not after turn {last_turn}")
                open_turn = last_turn = data.turn
            elif isinstance(data, TurnEnd):
                if open_turn != data.turn:
                    raise TurnConflict(f"turn/end {data.turn} does not match open turn {open_turn}")
                open_turn = None
            seq += 1
            if self._bodies.wants_chunks(data):
                blob = self._bodies.store(conn, data)
            elif len(blob) >= CHUNKED_JSON_MIN_BYTES:
                blob = self._bodies.store_json(conn, blob)
            blob = self._bodies.deltas.encode((row.sid, delta_kind(data)), seq, blob, frames)
            message = isinstance(data, UserMessage | AssistantMessage)
            params.append((row.sid, seq, at, int(message), blob))
            out.append(SessionEvent(seq=seq, at=at, data=data))
        if len(params) == 1:
            conn.execute(_INSERT_EVENT, params[0])
        else:
            conn.executemany(_INSERT_EVENT, params)
        if open_turn != row.open_turn or last_turn != row.last_turn:
            conn.execute(
                "UPDATE sessions SET last_seq = ?, open_turn = ?, last_turn = ? WHERE sid = ?",
                (seq, open_turn, last_turn, row.sid),
            )
        return out, _AppendState(row.sid, seq, open_turn, last_turn), frames

    async def append(self, session_id: str, data: EventData) -> SessionEvent:
        """Append one event; returns it with its ``seq`` and timestamp.

        ``turn/start`` needs no open turn and a turn number above every earlier one;
        ``turn/end`` must close the open turn (:class:`TurnConflict` otherwise).
        """
        (event,) = await self.append_many(session_id, (data,))
        return event

    async def append_many(self, session_id: str, datas: Iterable[EventData]) -> list[SessionEvent]:
        """Append events in order, all or nothing, in one transaction."""
        items = [(data, self._encode(data)) for data in datas]
        if len(items) > MAX_EVENTS_PER_APPEND:
            raise InvalidSessionArgument(
                f"{len(items)} events in one append; the limit is {MAX_EVENTS_PER_APPEND}"
            )
        if not items:
            return []

        def job(conn: sqlite3.Connection, state: _AppendState | None = None) -> _Appended:
            row = state or _append_state(conn, session_id)
            events, after, frames = self._append_rows(conn, row, items)
            return _Appended(session_id, events, events, state=after, deltas=frames)

        size: int | None = sum(len(blob) for _, blob in items)  # what the inline path allows
        if any(
            len(blob) >= CHUNKED_JSON_MIN_BYTES or self._bodies.wants_chunks(data)
            for data, blob in items
        ):
            size = None  # chunking hashes and writes more rows: the writer thread does it
        appended: list[SessionEvent] = await self._write_appended(
            job, inline_bytes=size, session_id=session_id
        )
        return appended

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
        _check_limit(limit)
        if before_seq is not None and (_not_int(before_seq) or before_seq < 1):
            raise InvalidSessionArgument("beforeSeq must be an integer >= 1")
        if through_seq is not None and (_not_int(through_seq) or through_seq < 0):
            raise InvalidSessionArgument("throughSeq must be an integer >= 0")

        def job(conn: sqlite3.Connection) -> HistoryPage:
            row = self._row(conn, session_id)
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

        return await self._read(job)

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
        _check_limit(limit)
        if _not_int(after_seq) or after_seq < 0:
            raise InvalidSessionArgument("afterSeq must be an integer >= 0")

        def job(conn: sqlite3.Connection) -> tuple[SessionEvent, ...]:
            row = self._row(conn, session_id)
            hi = row.last_seq if through_seq is None else min(through_seq, row.last_seq)
            rows = self._scan(conn, row, hi=hi, limit=limit, descending=False, lo=after_seq)
            return tuple(self._event(conn, r) for r in rows)

        return await self._read(job)

    async def read_all(self, session_id: str) -> tuple[SessionEvent, ...]:
        """Every event of a session, oldest first, from one pinned snapshot."""
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
        """The events with the given ``seqs`` (each ``1..last_seq``), by seq, in one read."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}

        def job(conn: sqlite3.Connection) -> dict[int, SessionEvent]:
            row = self._row(conn, session_id)
            if wanted[0] < 1 or wanted[-1] > row.last_seq:
                raise CoordinateOutOfRange(f"seqs outside 1..{row.last_seq}")
            out: dict[int, SessionEvent] = {}
            for seg_sid, seg_lo, seg_hi in self._segments(conn, row):
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

        return await self._read(job)

    def _scan(
        self,
        conn: sqlite3.Connection,
        row: _Row,
        *,
        hi: int,
        limit: int,
        descending: bool,
        lo: int = 0,
    ) -> list[tuple[int, int, bytes]]:
        segments = self._segments(conn, row)
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

    def _last_message(self, conn: sqlite3.Connection, row: _Row) -> MessagePreview | None:
        """The newest real user input or assistant reply (context injections are skipped)."""
        sql = (
            "SELECT seq, at, data FROM events WHERE sid = ? AND seq > ? AND seq <= ? "
            "AND message = 1 ORDER BY seq DESC LIMIT 16"
        )
        for seg_sid, seg_lo, seg_hi in self._segments(conn, row):
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

    def _event(self, conn: sqlite3.Connection, r: tuple[int, int, bytes]) -> SessionEvent:
        return SessionEvent(seq=r[0], at=r[1], data=self._bodies.load(conn, r[2]))

    # ------------------------------------------------------------------ workspaces

    async def create_workspace(self, root_path: str, name: str) -> Workspace:
        """Register ``root_path`` (already validated and normalized by the caller); the same
        root returns the existing workspace."""
        new_id = self._new_id()
        now = self._clock()

        def job(conn: sqlite3.Connection) -> Workspace:
            conn.execute(
                "INSERT OR IGNORE INTO workspaces (id, root_path, name, created_at) "
                "VALUES (?, ?, ?, ?)",
                (new_id, root_path, name, now),
            )
            found = conn.execute(
                "SELECT id, root_path, name, created_at FROM workspaces WHERE root_path = ?",
                (root_path,),
            ).fetchone()
            return _workspace(found)

        return await self._write(job)

    async def list_workspaces(self) -> tuple[Workspace, ...]:
        """Every workspace, oldest first."""

        def job(conn: sqlite3.Connection) -> tuple[Workspace, ...]:
            rows = conn.execute(
                "SELECT id, root_path, name, created_at FROM workspaces ORDER BY created_at, rowid"
            )
            return tuple(_workspace(r) for r in rows)

        return await self._read(job)

    async def workspace(self, workspace_id: str) -> Workspace:
        """One workspace by id (:class:`WorkspaceNotFound` if missing)."""

        def job(conn: sqlite3.Connection) -> Workspace:
            return _require_workspace(conn, workspace_id)

        return await self._read(job)


@dataclass(frozen=True, slots=True)
class _AppendState:
    """The columns an append needs (cheaper to read than a full header)."""

    sid: int
    last_seq: int
    open_turn: int | None
    last_turn: int


def _append_state(conn: sqlite3.Connection, session_id: str) -> _AppendState:
    found = conn.execute(
        f"SELECT sid, {_LAST_SEQ}, open_turn, last_turn FROM sessions s WHERE id = ?",
        (session_id,),
    ).fetchone()
    if found is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return _AppendState(*found)


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


def _workspace(row: tuple[str, str, str, int]) -> Workspace:
    return Workspace(id=row[0], root_path=row[1], name=row[2], created_at=iso_ms(row[3]))


def _require_workspace(conn: sqlite3.Connection, workspace_id: str) -> Workspace:
    found = conn.execute(
        "SELECT id, root_path, name, created_at FROM workspaces WHERE id = ?", (workspace_id,)
    ).fetchone()
    if found is None:
        raise WorkspaceNotFound(f"no workspace {workspace_id!r}")
    return _workspace(found)


def _insert_session(
    conn: sqlite3.Connection,
    *,
    session_id: str,
    created_at: int,
    title: str | None,
    workspace_id: str | None,
    parent_sid: int | None,
    parent_at: int | None,
    seed_sid: int | None,
    seed_length: int,
    chain_depth: int,
    delegation_depth: int,
    last_turn: int,
    last_seq: int = 0,
) -> int:
    try:
        cursor = conn.execute(
            "INSERT INTO sessions (id, created_at, title, workspace_id, parent_sid, parent_at, "
            "seed_sid, seed_length, chain_depth, delegation_depth, format_version, last_seq, "
            "last_turn, open_turn) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (
                session_id,
                created_at,
                title,
                workspace_id,
                parent_sid,
                parent_at,
                seed_sid,
                seed_length,
                chain_depth,
                delegation_depth,
                SESSION_FORMAT_VERSION,
                last_seq,
                last_turn,
            ),
        )
    except sqlite3.IntegrityError as exc:
        raise InvalidSessionArgument(f"session id {session_id!r} already exists") from exc
    sid = cursor.lastrowid
    assert sid is not None
    return sid


def _not_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


def _check_limit(limit: int) -> None:
    if _not_int(limit) or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise InvalidSessionArgument(f"limit must be an integer in 1..{MAX_PAGE_LIMIT}")
