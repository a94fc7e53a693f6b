"""The store's tables, their migrations and the row-level SQL every part of the store shares.

``events(sid, seq, at, message, data)`` holds per-session append-only rows, ``seq`` 1-based and
contiguous; ``data`` is the msgspec JSON of the tagged event payload (its type is inside it), or
what ``bodies`` and ``deltas`` made of it; ``message`` is 1 for a ``user/message`` or
``assistant/message`` row (what a session's preview looks for), else 0. ``sessions`` holds the
header plus ``open_turn``/``last_turn``, updated in the same transaction as the ``turn/start`` /
``turn/end`` rows that change them; its ``last_seq`` column is a floor (see :data:`LAST_SEQ`).
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from innkeeper_core.sessions.bodies import CHUNK_SCHEMA
from innkeeper_hostapi.sessions import (
    SESSION_FORMAT_VERSION,
    InvalidSessionArgument,
    ParentRef,
    SessionError,
    SessionHeader,
    SessionNotFound,
    Workspace,
    WorkspaceNotFound,
)

__all__ = [
    "BUSY_TIMEOUT_S",
    "INSERT_EVENT",
    "LAST_SEQ",
    "MAX_CACHED_CHAINS",
    "SESSION_SELECT",
    "STORE_FILE_NAME",
    "STORE_SCHEMA_VERSION",
    "AppendState",
    "SessionRow",
    "append_state",
    "connect",
    "insert_session",
    "insert_workspace",
    "iso_ms",
    "open_inline_connection",
    "open_write_connection",
    "require_workspace",
    "session_row",
    "session_row_by_sid",
    "workspace_of",
]

log = logging.getLogger("innkeeper.sessions.store")

#: File name of the store inside the data directory.
STORE_FILE_NAME: Final = "sessions.sqlite3"
#: Version of the SQLite schema below (not the session *log* format, which is
#: :data:`SESSION_FORMAT_VERSION`).
STORE_SCHEMA_VERSION: Final = 4
#: How long a connection waits on a lock held by another process before failing.
BUSY_TIMEOUT_S: Final = 10.0
#: Sessions whose fork chain (reads) or append state (writes) is cached.
MAX_CACHED_CHAINS: Final = 10_000

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

#: A session's last seq (``s`` is its ``sessions`` row): the stored floor (the fork point, or
#: the last seq when the turn state last changed) or its newest own row in the ``events``
#: index, whichever is greater (one index seek). An append that changes no turn state writes
#: its event rows only, and a reader still never sees a seq the header does not cover.
LAST_SEQ: Final = (
    "MAX(s.last_seq, COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.sid = s.sid), 0))"
)
_SESSION_COLUMNS: Final = (
    "s.sid, s.id, s.created_at, s.title, s.workspace_id, p.id, s.parent_at, s.seed_sid, "
    f"s.seed_length, s.chain_depth, s.delegation_depth, s.format_version, {LAST_SEQ}, "
    "s.last_turn, s.open_turn"
)
INSERT_EVENT: Final = "INSERT INTO events (sid, seq, at, message, data) VALUES (?, ?, ?, ?, ?)"
SESSION_SELECT: Final = (
    f"SELECT {_SESSION_COLUMNS} FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent_sid"
)


def iso_ms(epoch_ms: int) -> str:
    """Format epoch milliseconds as ``YYYY-MM-DDTHH:mm:ss.sssZ`` (UTC)."""
    moment = datetime.fromtimestamp(epoch_ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


# ---------------------------------------------------------------------- connections


def connect(path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A WAL connection in autocommit mode, usable from any thread."""
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    return conn


def open_write_connection(path: Path, synchronous: Literal["NORMAL", "FULL"]) -> sqlite3.Connection:
    """The writer's connection, with the schema created or migrated to
    :data:`STORE_SCHEMA_VERSION` (a newer or unknown schema is refused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(path)
    try:
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.executescript(_SCHEMA + CHUNK_SCHEMA)
        row = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
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
                f"session store schema {row[0]} is not supported (expected {STORE_SCHEMA_VERSION})"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def open_inline_connection(
    path: Path, synchronous: Literal["NORMAL", "FULL"]
) -> sqlite3.Connection:
    """The second write connection of small appends on the event loop: it never waits for a
    lock and never checkpoints on commit (the writer thread does)."""
    conn = connect(path, busy_timeout_s=0)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn


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


# ---------------------------------------------------------------------- sessions rows


@dataclass(frozen=True, slots=True)
class SessionRow:
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


def session_row(conn: sqlite3.Connection, session_id: str) -> SessionRow:
    """The row of ``session_id`` (:class:`SessionNotFound` if there is none)."""
    found = conn.execute(f"{SESSION_SELECT} WHERE s.id = ?", (session_id,)).fetchone()
    if found is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return SessionRow(*found)


def session_row_by_sid(conn: sqlite3.Connection, sid: int) -> SessionRow:
    """The row of the internal ``sid`` (one of the store's own references)."""
    found = conn.execute(f"{SESSION_SELECT} WHERE s.sid = ?", (sid,)).fetchone()
    if found is None:  # pragma: no cover - sids come from our own rows
        raise SessionError(f"session row {sid} vanished")
    return SessionRow(*found)


@dataclass(frozen=True, slots=True)
class AppendState:
    """The columns an append needs (cheaper to read than a full header)."""

    sid: int
    last_seq: int
    open_turn: int | None
    last_turn: int


def append_state(conn: sqlite3.Connection, session_id: str) -> AppendState:
    """The append state of ``session_id`` as stored now."""
    found = conn.execute(
        f"SELECT sid, {LAST_SEQ}, open_turn, last_turn FROM sessions s WHERE id = ?",
        (session_id,),
    ).fetchone()
    if found is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return AppendState(*found)


def insert_session(
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
    """Insert a ``sessions`` row; its ``sid``. A taken id is an
    :class:`InvalidSessionArgument`."""
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


# ---------------------------------------------------------------------- workspaces rows


def workspace_of(row: tuple[str, str, str, int]) -> Workspace:
    """A ``workspaces`` row as the public model."""
    return Workspace(id=row[0], root_path=row[1], name=row[2], created_at=iso_ms(row[3]))


def require_workspace(conn: sqlite3.Connection, workspace_id: str) -> Workspace:
    """The workspace ``workspace_id`` (:class:`WorkspaceNotFound` if missing)."""
    found = conn.execute(
        "SELECT id, root_path, name, created_at FROM workspaces WHERE id = ?", (workspace_id,)
    ).fetchone()
    if found is None:
        raise WorkspaceNotFound(f"no workspace {workspace_id!r}")
    return workspace_of(found)


def insert_workspace(
    conn: sqlite3.Connection, new_id: str, root_path: str, name: str, now: int
) -> Workspace:
    """Register ``root_path`` under ``new_id``; the same root returns the existing one."""
    conn.execute(
        "INSERT OR IGNORE INTO workspaces (id, root_path, name, created_at) VALUES (?, ?, ?, ?)",
        (new_id, root_path, name, now),
    )
    found = conn.execute(
        "SELECT id, root_path, name, created_at FROM workspaces WHERE root_path = ?",
        (root_path,),
    ).fetchone()
    return workspace_of(found)
