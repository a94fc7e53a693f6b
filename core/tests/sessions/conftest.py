"""Fixtures for the session store tests: a store in a temp dir with a fake clock and ids."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from innkeeper_core.sessions import EventStore, StoreSessionController

EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z


class FakeClock:
    """Advances one millisecond per reading."""

    def __init__(self) -> None:
        self.now = EPOCH_MS

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture
def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"id-{next(counter)}"


@pytest.fixture
async def store(tmp_path: Path, ids: Callable[[], str]) -> AsyncIterator[EventStore]:
    async with await EventStore.open(tmp_path, clock=FakeClock(), new_id=ids) as opened:
        yield opened


@pytest.fixture
def controller(store: EventStore) -> StoreSessionController:
    return StoreSessionController(store)


def legacy_events_table(conn: sqlite3.Connection) -> None:
    """Give a store file the ``events`` table of schema versions 1 to 3 (with a ``type``
    column), keeping its rows, as an older host left it."""
    conn.execute("ALTER TABLE events RENAME TO events_now")
    conn.execute(
        "CREATE TABLE events (sid INTEGER NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL, "
        "type TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (sid, seq)) WITHOUT ROWID"
    )
    conn.execute(
        "INSERT INTO events SELECT sid, seq, at, "
        "CASE message WHEN 1 THEN 'user/message' ELSE 'event' END, data FROM events_now"
    )
    conn.execute("DROP TABLE events_now")
