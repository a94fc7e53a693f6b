"""The chunk layer of :class:`~.store.TraceStore`: schema, base records and their collection.

A session's records are stored as deltas (:mod:`.delta`) against its *base* record, kept once in
``chunks`` (deflated, addressed by the SHA-256 of its JSON) and referenced by ``records.base``.
These helpers run inside the store's transactions; none of them commits.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .delta import DeltaError, deflate, inflate, make_delta

__all__ = [
    "BASE_DELTA_RATIO",
    "Base",
    "collect",
    "delete_session_rows",
    "encode_row",
    "load_chunk",
    "upgrade",
]

#: A record whose delta against its session's base is larger than this fraction of the base's
#: stored (deflated) size becomes the session's next base: deltas stay small, a base is never
#: much worse than a record stored alone.
BASE_DELTA_RATIO: Final = 0.5

#: ``records.data`` is the record's JSON when ``base`` is NULL (rows written before chunks), else
#: a :mod:`.delta` against the chunk ``base``. ``bytes`` is the record's JSON length either way.
TABLE: Final = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    record_id TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    data BLOB NOT NULL,
    base INTEGER
);
"""
SCHEMA: Final = """
CREATE UNIQUE INDEX IF NOT EXISTS records_by_id ON records (session, record_id);
CREATE INDEX IF NOT EXISTS records_by_session ON records (session, seq);
CREATE INDEX IF NOT EXISTS records_by_base ON records (base) WHERE base IS NOT NULL;
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    sha256 BLOB NOT NULL UNIQUE,
    bytes INTEGER NOT NULL,
    data BLOB NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Base:
    """A session's current base record: its chunk, its JSON and its stored (deflated) size."""

    chunk: int
    data: bytes
    stored: int


def upgrade(conn: sqlite3.Connection) -> None:
    """Create the schema, or bring an older database to it in place (``records.base``)."""
    conn.executescript(TABLE)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(records)")}
    if "base" not in columns:
        conn.execute("ALTER TABLE records ADD COLUMN base INTEGER")
    conn.executescript(SCHEMA)
    # A chunk no row references can only be left by a hand-edited file; collect it.
    conn.execute(
        "DELETE FROM chunks WHERE id NOT IN (SELECT base FROM records WHERE base IS NOT NULL)"
    )


def load_chunk(conn: sqlite3.Connection, chunk: int) -> bytes:
    row = conn.execute("SELECT bytes, data FROM chunks WHERE id = ?", (chunk,)).fetchone()
    if row is None:
        raise DeltaError(f"chunk {chunk} is missing")
    return inflate(row[1], row[0])


def encode_row(conn: sqlite3.Connection, data: bytes, base: Base | None) -> tuple[Base, bytes]:
    """``data`` as a delta against ``base``, or as a new base (its chunk inserted unless one
    with the same SHA-256 exists) when the delta would be too large."""
    if base is not None:
        delta = make_delta(data, base.data)
        if len(delta) <= BASE_DELTA_RATIO * base.stored:
            return base, delta
    digest = hashlib.sha256(data).digest()
    row = conn.execute("SELECT id, data FROM chunks WHERE sha256 = ?", (digest,)).fetchone()
    if row is not None:
        chunk, packed = int(row[0]), row[1]
    else:
        packed = deflate(data)
        cursor = conn.execute(
            "INSERT INTO chunks (sha256, bytes, data) VALUES (?, ?, ?)",
            (digest, len(data), packed),
        )
        chunk = int(cursor.lastrowid or 0)
    return Base(chunk, data, len(packed)), make_delta(data, data)


def delete_session_rows(conn: sqlite3.Connection, session_id: str) -> set[int]:
    """Delete a session's rows; the chunks they referenced."""
    rows = conn.execute(
        "DELETE FROM records WHERE session = ? RETURNING base", (session_id,)
    ).fetchall()
    return {chunk for (chunk,) in rows if chunk is not None}


def collect(conn: sqlite3.Connection, candidates: Iterable[int | None]) -> set[int]:
    """Delete those of ``candidates`` that no row references any more; the ones deleted."""
    collected: set[int] = set()
    for chunk in candidates:
        if chunk is None:
            continue
        gone = conn.execute(
            "DELETE FROM chunks WHERE id = ? AND NOT EXISTS "
            "(SELECT 1 FROM records WHERE base = ?) RETURNING id",
            (chunk, chunk),
        ).fetchall()
        collected.update(int(c) for (c,) in gone)
    return collected
