"""The durable ``requestId`` ledger of ``POST /sessions/:id/user-message``.

One small file per session, ``<plugin data>/play-requests/<sessionId>.json`` (replaced
atomically, the last :data:`MAX_REQUESTS_PER_SESSION` ids), records every accepted id with the
SHA-256 of its text. The record is written as ``pending`` **before** the prompt is queued and
becomes ``accepted`` (with the host's receipt) after it: a crash between the two writes leaves
``pending``, which is then settled from the host's own durable log — the ``agent/inbox/spliced``
insert of that text after the recorded ``afterSeq`` is the acceptance; no such splice means the
prompt never reached the log and it is sent (once). Writing the record *after* the prompt
instead would double-send on a crash between the splice and the record.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from innkeeper_hostapi.sessions import (
    InboxSpliced,
    SessionController,
    SessionError,
    TextBlock,
)
from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded

#: How many request ids each session remembers (oldest dropped first).
MAX_REQUESTS_PER_SESSION: Final = 256
#: A ledger file is never larger (256 entries of at most ~400 bytes).
MAX_LEDGER_BYTES: Final = 256 * 1024
LEDGER_FOLDER: Final = "play-requests"
#: How many sessions' ledgers stay in memory (the files are the truth; older ones are re-read).
MAX_CACHED_SESSIONS: Final = 256


class RequestEntry(msgspec.Struct, rename="camel"):
    """One request id of one session."""

    request_id: str
    text_sha256: str
    #: The session's last seq when the entry was written: its splice comes after it.
    after_seq: int
    state: Literal["pending", "accepted"]
    item_id: str | None = None
    splice_seq: int | None = None
    started_turn: bool = False


class _Ledger(msgspec.Struct):
    schemaVersion: int = 1
    requests: list[RequestEntry] = []


def text_sha256(text: str) -> str:
    """The hex SHA-256 of the UTF-8 text (the ledger never stores a body)."""
    return hashlib.sha256(text.encode()).hexdigest()


class RequestLedger:
    """Per-session durable memory of accepted request ids (see the module docstring)."""

    def __init__(self, data_dir: Path, logger: logging.Logger) -> None:
        self._folder = data_dir / LEDGER_FOLDER
        self._log = logger
        self._cache: collections.OrderedDict[str, list[RequestEntry]] = collections.OrderedDict()
        #: Per-session guards with their holder counts; dropped when the last holder leaves.
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        """The per-session guard: one acceptance decision at a time."""
        lock, users = self._locks.get(session_id, (asyncio.Lock(), 0))
        self._locks[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[session_id]
            if users > 1:
                self._locks[session_id] = (lock, users - 1)
            else:
                del self._locks[session_id]

    def _remember(self, session_id: str, entries: list[RequestEntry]) -> None:
        self._cache[session_id] = entries
        self._cache.move_to_end(session_id)
        while len(self._cache) > MAX_CACHED_SESSIONS:
            self._cache.popitem(last=False)

    def _path(self, session_id: str) -> Path:
        return self._folder / f"{session_id}.json"

    async def _entries(self, session_id: str) -> list[RequestEntry]:
        cached = self._cache.get(session_id)
        if cached is not None:
            self._cache.move_to_end(session_id)
            return cached
        raw = await asyncio.to_thread(read_bounded, self._path(session_id), MAX_LEDGER_BYTES)
        entries: list[RequestEntry] = []
        if raw is not None:
            try:
                entries = msgspec.json.decode(raw, type=_Ledger).requests
            except (msgspec.ValidationError, msgspec.DecodeError):
                self._log.warning("unreadable request ledger of a play session; starting empty")
        self._remember(session_id, entries)
        return entries

    async def get(self, session_id: str, request_id: str) -> RequestEntry | None:
        """The entry of ``request_id``, if one was recorded."""
        for entry in await self._entries(session_id):
            if entry.request_id == request_id:
                return entry
        return None

    async def put(self, session_id: str, entry: RequestEntry) -> None:
        """Record ``entry`` (replacing the same id) durably; raises ``OSError`` unchanged."""
        entries = [e for e in await self._entries(session_id) if e.request_id != entry.request_id]
        entries.append(entry)
        await self._write(session_id, entries[-MAX_REQUESTS_PER_SESSION:])

    async def drop(self, session_id: str, request_id: str) -> None:
        """Forget ``request_id`` (its prompt was refused)."""
        entries = await self._entries(session_id)
        kept = [e for e in entries if e.request_id != request_id]
        if len(kept) != len(entries):
            await self._write(session_id, kept)

    async def _write(self, session_id: str, entries: list[RequestEntry]) -> None:
        data = msgspec.json.encode(_Ledger(requests=entries))
        await asyncio.to_thread(atomic_write, self._path(session_id), data)
        self._remember(session_id, entries)


async def find_splice(
    controller: SessionController, session_id: str, entry: RequestEntry
) -> tuple[int, str] | None:
    """``(spliceSeq, itemId)`` of the first inbox insert of the entry's text (by its SHA-256)
    after its ``afterSeq`` in the session's durable log, or ``None``."""
    found: tuple[int, str] | None = None
    before: int | None = None
    through: int | None = None
    while True:
        try:
            page = await controller.page(
                session_id, before_seq=before, limit=1000, through_seq=through
            )
        except SessionError:
            return found
        through = page.through_seq
        for event in page.events:  # newest first: keep the oldest match
            if event.seq <= entry.after_seq:
                return found
            data = event.data
            if (
                isinstance(data, InboxSpliced)
                and data.op == "insert"
                and _is_text(data, entry.text_sha256)
            ):
                found = (event.seq, data.inserted[0].id)
        if not page.has_more or page.next_before_seq is None:
            return found
        before = page.next_before_seq


def _is_text(splice: InboxSpliced, digest: str) -> bool:
    if len(splice.inserted) != 1:
        return False
    content: Any = splice.inserted[0].content
    return (
        len(content) == 1
        and isinstance(content[0], TextBlock)
        and text_sha256(content[0].text) == digest
    )
