"""Durable opening world books: ``<plugin data>/opening-world-books.json``.

One state file holds every committed session-local book and the receipt of every committed
operation, so a commit (book and receipt together) is one atomic replace: a crash leaves the
previous file or the new one, never a book without its receipt. Skipped openings create no book
and are not stored here (their receipts live in memory for the host's lifetime).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_tavern.state.resources.statefile import StateFile

__all__ = [
    "MAX_BOOKS",
    "MAX_BOOKS_PER_SESSION",
    "MAX_RECEIPTS",
    "STATE_FILE",
    "OpeningBookState",
    "OpeningBookStore",
    "StoredBook",
    "StoredReceipt",
    "receipt_key",
]

STATE_FILE: Final = "opening-world-books.json"
#: Committed books kept in the whole store, and per session.
MAX_BOOKS: Final = 1024
MAX_BOOKS_PER_SESSION: Final = 32
#: Committed operation receipts kept (replays of older ones stay answerable until this fills).
MAX_RECEIPTS: Final = 8192
#: The state file's byte limit (books carry at most 64 entries of 32 KiB each).
MAX_STATE_BYTES: Final = 64 << 20


class StoredBook(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One session-local opening book (entries are the manifest's literal entry objects)."""

    resource_id: str
    session_id: str
    source_identity: dict[str, Any]
    opening_id: str
    name: str
    entries: list[dict[str, Any]]
    entries_hash: str
    revision: int
    updated_at: str


class StoredReceipt(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A committed operation: what it asked (its fingerprint) and what it answered."""

    fingerprint: str
    receipt: dict[str, Any]


class OpeningBookState(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    version: int = 1
    books: dict[str, StoredBook] = msgspec.field(default_factory=dict)
    receipts: dict[str, StoredReceipt] = msgspec.field(default_factory=dict)


def receipt_key(session_id: str, operation_id: str) -> str:
    """Operation ids are per session."""
    return f"{session_id}\n{operation_id}"


class OpeningBookStore:
    """The state file plus a per-session index (rebuilt from the published state)."""

    def __init__(self, root: Path, *, logger: logging.Logger) -> None:
        self.file: StateFile[OpeningBookState] = StateFile(
            root / STATE_FILE, OpeningBookState, max_bytes=MAX_STATE_BYTES, logger=logger
        )

    async def open(self) -> None:
        await self.file.open()

    @property
    def state(self) -> OpeningBookState:
        return self.file.state

    @property
    def revision(self) -> int:
        """Changes whenever a commit is published."""
        return self.file.revision

    def book(self, resource_id: str) -> StoredBook | None:
        return self.file.state.books.get(resource_id)

    def session_books(self, session_id: str) -> list[StoredBook]:
        """The session's books in resource-id order."""
        books = self.file.state.books.values()
        return sorted((b for b in books if b.session_id == session_id), key=lambda b: b.resource_id)

    def receipt(self, session_id: str, operation_id: str) -> StoredReceipt | None:
        return self.file.state.receipts.get(receipt_key(session_id, operation_id))
