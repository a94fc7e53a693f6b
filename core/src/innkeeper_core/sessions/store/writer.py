"""The store's write path: one writer thread with group commit, small appends inline on the
event loop, the turn invariants every append enforces, and the listeners told of each commit.

One writer thread owns the only waiting write connection and applies jobs in submission order;
jobs that queue up while a transaction commits are grouped into the next transaction (group
commit), each inside its own SAVEPOINT so one failing job never takes the others down. A crash
(even SIGKILL) loses at most uncommitted jobs and never leaves a partial event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec

from innkeeper_core.sessions.bodies import CHUNKED_JSON_MIN_BYTES, BodyCodec
from innkeeper_core.sessions.deltas import PendingDeltas, delta_kind
from innkeeper_core.sessions.store.schema import (
    INSERT_EVENT,
    MAX_CACHED_CHAINS,
    AppendState,
    SessionRow,
    append_state,
    session_row,
)
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    EventData,
    InvalidSessionArgument,
    SessionError,
    SessionEvent,
    SessionHeader,
    SessionTitle,
    TurnConflict,
    TurnEnd,
    TurnStart,
    UserMessage,
    event_type,
)

__all__ = [
    "INLINE_CHECKPOINT_BYTES",
    "MAX_EVENTS_PER_APPEND",
    "MAX_EVENT_DATA_BYTES",
    "MAX_INLINE_APPEND_BYTES",
    "MAX_WRITE_BATCH",
    "AppendListener",
    "Clock",
    "StoreClosed",
    "StoreWriter",
]

log = logging.getLogger("innkeeper.sessions.store")

#: Most jobs grouped into one write transaction.
MAX_WRITE_BATCH: Final = 512
#: Most events one ``append_many`` call may write (one transaction).
MAX_EVENTS_PER_APPEND: Final = 20_000
#: Largest encoded payload of one event.
MAX_EVENT_DATA_BYTES: Final = 8 * 1024 * 1024
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

#: Returns the current time in epoch milliseconds.
Clock = Callable[[], int]
#: Called on the event loop with the events one commit appended to a session.
AppendListener = Callable[[str, Sequence[SessionEvent]], None]

T = TypeVar("T")


class StoreClosed(SessionError):
    """The store was closed; no further reads or writes are possible."""

    code = "store-closed"


@dataclass(frozen=True, slots=True)
class _Appended:
    """What an appending job returns: the durable events (for listeners) and its result."""

    session_id: str
    events: Sequence[SessionEvent]
    result: Any
    #: The session's append state after the job (``None``: unknown, forget the cached one).
    state: AppendState | None = None
    #: Keyframes and delta bases the job wrote (usable by later writes once it committed).
    deltas: PendingDeltas | None = None


#: An appending job: runs in a transaction on ``conn``, given the session's cached append
#: state when the caller has one.
_AppendJob = Callable[..., _Appended]

_Job = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop]

_Results = list[tuple["asyncio.Future[Any]", bool, Any]]


def _checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the WAL into the database (a writer-thread job run outside any transaction)."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _checkpointed(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("session store checkpoint failed: %s", future.exception())


class _WriterThread:
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


class StoreWriter:
    """Every write of the store: jobs on the writer thread (or inline), event appends with
    their turn invariants, and the listeners told of each commit, in commit order."""

    def __init__(
        self,
        path: Path,
        write_conn: sqlite3.Connection,
        *,
        inline_conn: sqlite3.Connection | None,
        clock: Clock,
        bodies: BodyCodec,
    ) -> None:
        self._path = path
        self._clock = clock
        self._bodies = bodies
        self._listeners: list[AppendListener] = []
        self._thread = _WriterThread(write_conn, self._deliver)
        self._write_conn = write_conn
        #: session id -> its append state as of the last published commit (inline appends
        #: skip reading the row; valid because this process is the file's only writer).
        self._states: dict[str, AppendState] = {}
        #: Jobs submitted to the writer thread whose results the loop has not delivered yet.
        self._inflight = 0
        #: A second write connection that never waits for a lock (see :meth:`_try_inline`).
        self._inline_conn = inline_conn
        self._inline_commits = 0
        self._next_wal_check = _WAL_CHECK_EVERY
        self._encoder = msgspec.json.Encoder()
        #: Set by the store's ``close``: every later write raises :class:`StoreClosed`.
        self.closed = False

    async def stop(self) -> None:
        """Finish queued writes, then close the write connections."""
        await asyncio.to_thread(self._thread.stop)
        self._write_conn.close()
        if self._inline_conn is not None:
            self._inline_conn.close()

    def cached_states(self) -> int:
        """Sessions whose append state is cached (at most :data:`MAX_CACHED_CHAINS`)."""
        return len(self._states)

    # ------------------------------------------------------------------ listeners

    def add_listener(self, listener: AppendListener) -> Callable[[], None]:
        """See :meth:`EventStore.add_listener`."""
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

    # ------------------------------------------------------------------ jobs

    def _submit(self, job: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        future = self._thread.submit(job)
        self._inflight += 1
        return future

    async def write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``job`` in a write transaction on the writer thread; its result."""
        if self.closed:
            raise StoreClosed("the session store is closed")
        return await self._submit(job)

    async def _write_appended(
        self,
        job: _AppendJob,
        *,
        inline_bytes: int | None = None,
        session_id: str | None = None,
    ) -> Any:
        """Like :meth:`write` for appending jobs: listeners see the events, the caller gets
        ``_Appended.result``. ``inline_bytes`` (the encoded size) allows the inline path,
        which passes the job ``session_id``'s cached append state when it has one."""
        if self.closed:
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

    def _try_inline(self, job: _AppendJob, state: AppendState | None) -> _Appended | None:
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
            wal = self._path.with_name(self._path.name + "-wal")
            with contextlib.suppress(OSError):
                if wal.stat().st_size > INLINE_CHECKPOINT_BYTES:
                    # Give the checkpoint time to run before looking again.
                    self._next_wal_check += 8 * _WAL_CHECK_EVERY
                    self._submit(_checkpoint).add_done_callback(_checkpointed)
        return appended

    # ------------------------------------------------------------------ events

    def _encode(self, data: EventData) -> bytes:
        blob = self._encoder.encode(data)
        if len(blob) > MAX_EVENT_DATA_BYTES:
            raise InvalidSessionArgument(
                f"event {event_type(data)} is {len(blob)} bytes; the limit is "
                f"{MAX_EVENT_DATA_BYTES}"
            )
        return blob

    def _append_rows(
        self,
        conn: sqlite3.Connection,
        row: SessionRow | AppendState,
        items: Sequence[tuple[EventData, bytes]],
    ) -> tuple[list[SessionEvent], AppendState, PendingDeltas]:
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
            conn.execute(INSERT_EVENT, params[0])
        else:
            conn.executemany(INSERT_EVENT, params)
        if open_turn != row.open_turn or last_turn != row.last_turn:
            conn.execute(
                "UPDATE sessions SET last_seq = ?, open_turn = ?, last_turn = ? WHERE sid = ?",
                (seq, open_turn, last_turn, row.sid),
            )
        return out, AppendState(row.sid, seq, open_turn, last_turn), frames

    async def append_many(self, session_id: str, datas: Iterable[EventData]) -> list[SessionEvent]:
        """See :meth:`EventStore.append_many`."""
        items = [(data, self._encode(data)) for data in datas]
        if len(items) > MAX_EVENTS_PER_APPEND:
            raise InvalidSessionArgument(
                f"{len(items)} events in one append; the limit is {MAX_EVENTS_PER_APPEND}"
            )
        if not items:
            return []

        def job(conn: sqlite3.Connection, state: AppendState | None = None) -> _Appended:
            row = state or append_state(conn, session_id)
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

    async def rename(self, session_id: str, title: str) -> tuple[SessionHeader, SessionEvent]:
        """See :meth:`EventStore.rename`."""
        data = SessionTitle(title=title)
        blob = self._encode(data)

        def job(conn: sqlite3.Connection) -> _Appended:
            row = session_row(conn, session_id)
            conn.execute("UPDATE sessions SET title = ? WHERE sid = ?", (title, row.sid))
            events, _, frames = self._append_rows(conn, row, [(data, blob)])
            header = session_row(conn, session_id).header()
            return _Appended(session_id, events, (header, events[0]), deltas=frames)

        result: tuple[SessionHeader, SessionEvent] = await self._write_appended(job)
        return result
