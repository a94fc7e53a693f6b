"""``GroupSessionStore``: which host sessions play a group (docs/groups.md "Group playthroughs").

``<plugin data>/group-sessions.json`` maps a session id to the group it plays:
``{schemaVersion: 1, sessions: {<session id>: {groupId, boundAt}}}``. Only a playthrough's root
session is written; a branch (a fork) plays the group of its nearest bound ancestor, so
branching writes nothing here. The file is replaced atomically and validated before it is
published; a failed write changes nothing in memory or on disk.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final

import msgspec

from innkeeper_tavern.state.session_bindings.files import FileTooLarge, atomic_write, read_limited

GROUP_SESSIONS_FILE: Final = "group-sessions.json"
SCHEMA_VERSION: Final = 1
#: Most sessions bound to groups (one per group playthrough; branches are not counted).
MAX_GROUP_SESSIONS: Final = 65_536
#: Largest file read (65,536 rows of ~150 bytes fit well below it).
MAX_FILE_BYTES: Final = 32 << 20


class GroupSessionRow(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One bound session."""

    group_id: str
    bound_at: str


class GroupSessionFile(msgspec.Struct, kw_only=True, rename="camel"):
    """The whole document."""

    schema_version: int
    sessions: dict[str, GroupSessionRow] = {}


_DECODER: Final = msgspec.json.Decoder(GroupSessionFile)


class GroupSessionLimit(Exception):
    """:data:`MAX_GROUP_SESSIONS` sessions are bound already."""


class GroupSessionStore:
    """Session id → group id, durable."""

    def __init__(self, data_dir: Path, *, logger: logging.Logger | None = None) -> None:
        self.path = data_dir / GROUP_SESSIONS_FILE
        self._rows: dict[str, GroupSessionRow] = {}
        self._lock = asyncio.Lock()
        self._log = logger or logging.getLogger(__name__)

    async def open(self) -> None:
        """Read the file (a missing one is empty; a corrupt one is moved aside)."""
        self._rows = await asyncio.to_thread(self._load)

    def _load(self) -> dict[str, GroupSessionRow]:
        try:
            data = read_limited(self.path, MAX_FILE_BYTES)
        except FileTooLarge:
            raise RuntimeError(f"{self.path.name} is larger than {MAX_FILE_BYTES} bytes") from None
        if data is None:
            return {}
        try:
            doc = _DECODER.decode(data)
        except msgspec.DecodeError:
            aside = self.path.with_name(self.path.name + ".corrupt")
            self.path.replace(aside)
            self._log.warning("%s was not readable; moved aside", self.path.name)
            return {}
        if doc.schema_version != SCHEMA_VERSION:
            raise RuntimeError(f"{self.path.name} has schema {doc.schema_version}")
        return dict(doc.sessions)

    def group_of(self, session_id: str) -> str | None:
        """The group ``session_id`` itself is bound to (not its ancestors')."""
        row = self._rows.get(session_id)
        return row.group_id if row is not None else None

    def sessions_of(self, group_id: str) -> list[str]:
        """The sessions bound to ``group_id``."""
        return [sid for sid, row in self._rows.items() if row.group_id == group_id]

    async def bind(self, session_id: str, group_id: str, now: str) -> None:
        """Bind ``session_id`` to ``group_id`` (durable before it is visible)."""
        async with self._lock:
            if session_id not in self._rows and len(self._rows) >= MAX_GROUP_SESSIONS:
                raise GroupSessionLimit(f"at most {MAX_GROUP_SESSIONS} group playthroughs")
            rows = {**self._rows, session_id: GroupSessionRow(group_id=group_id, bound_at=now)}
            await self._write(rows)

    async def unbind(self, session_id: str) -> None:
        """Forget ``session_id`` (nothing when it is not bound)."""
        async with self._lock:
            if session_id not in self._rows:
                return
            rows = {k: v for k, v in self._rows.items() if k != session_id}
            await self._write(rows)

    async def _write(self, rows: dict[str, GroupSessionRow]) -> None:
        data = msgspec.json.encode(GroupSessionFile(schema_version=SCHEMA_VERSION, sessions=rows))
        _DECODER.decode(data)  # what is written must read back
        await asyncio.to_thread(atomic_write, self.path, data)
        self._rows = rows


__all__ = [
    "GROUP_SESSIONS_FILE",
    "MAX_GROUP_SESSIONS",
    "GroupSessionLimit",
    "GroupSessionStore",
]
