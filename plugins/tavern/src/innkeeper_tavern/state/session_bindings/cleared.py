"""What deleting a resource took out of a session's selection, so the session can say so.

`docs/contract/loader.md#session-bindings`: deleting a referenced resource calls
``clearResource(kind, id)``, which clears the dangling ids from every selection. Cleared silently,
the next turn of a session whose card was deleted runs as "Assistant" and nothing says why
(issue 10, item 7). :class:`ClearedBindings` keeps, per session, what a deletion cleared (kind,
id, the display name when one is known) together with the selection's ``updatedAt`` that the
clearing wrote. While the selection is still exactly that one, the profile loader reports the
deletion in ``/active`` and the audit; any later change of the selection (binding another card,
clearing it on purpose) ends the report without another write.

The notes live in ``session-cleared-resources.json`` (schema 1, written atomically), bounded like
the selection store itself: at most :data:`MAX_NOTED_SESSIONS` sessions, the oldest dropped first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import msgspec

from .files import FileTooLarge, atomic_write, read_limited, remove_stale_temps
from .model import ResourceKind
from .store import HARD_MAX_SESSIONS, SessionSelectionStore

__all__ = ["CLEARED_FILE", "MAX_NOTED_SESSIONS", "ClearedBindings", "ClearedResource"]

CLEARED_FILE: Final = "session-cleared-resources.json"
SCHEMA_VERSION: Final = 1
#: As many sessions as the selection store can hold at most.
MAX_NOTED_SESSIONS: Final = HARD_MAX_SESSIONS
#: A note is ~200 bytes; 4,096 sessions × 4 kinds stays far below this.
MAX_READ_BYTES: Final = 8 << 20


class ClearedResource(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One resource a deletion removed from a session's selection."""

    kind: ResourceKind
    id: str
    name: str | None = None
    #: The selection's ``updatedAt`` written by the clearing (the note holds while it is current).
    selection_updated_at: str


class _File(msgspec.Struct, kw_only=True, rename="camel"):
    schema_version: int = SCHEMA_VERSION
    sessions: dict[str, list[ClearedResource]] = msgspec.field(default_factory=dict)


_decoder: Final = msgspec.json.Decoder(_File)
_encoder: Final = msgspec.json.Encoder()

NameOf = Callable[[ResourceKind, str], str | None]


class ClearedBindings:
    """Per-session notes of deleted resources (see the module docstring)."""

    def __init__(self, root: Path, *, logger: logging.Logger | None = None) -> None:
        self.path = root / CLEARED_FILE
        self._logger = logger or logging.getLogger("innkeeper.plugin.tavern.selection")
        self._sessions: dict[str, list[ClearedResource]] = {}
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Read the notes; an unreadable file is moved aside (notes are advisory)."""
        self._sessions = await asyncio.to_thread(self._load)

    def _load(self) -> dict[str, list[ClearedResource]]:
        remove_stale_temps(self.path)
        try:
            data = read_limited(self.path, MAX_READ_BYTES)
            return {} if data is None else _decoder.decode(data).sessions
        except (FileTooLarge, msgspec.DecodeError) as exc:
            self._logger.warning("%s is unreadable (%s); moved aside", CLEARED_FILE, exc)
            self.path.replace(self.path.with_name(self.path.name + ".corrupt"))
            return {}

    def current(self, session_id: str, selection_updated_at: str | None) -> list[ClearedResource]:
        """The notes of ``session_id`` that still describe its selection."""
        if selection_updated_at is None:
            return []
        return [
            n
            for n in self._sessions.get(session_id, ())
            if n.selection_updated_at == selection_updated_at
        ]

    async def note(
        self,
        kind: ResourceKind,
        resource_id: str,
        name: str | None,
        changed: dict[str, tuple[str | None, str]],
    ) -> None:
        """Record that deleting ``resource_id`` cleared it from the sessions in ``changed``
        (session id → the selection's ``updatedAt`` before and after the clearing). Notes that
        were current before the clearing stay current (a clearing is not a choice)."""
        if not changed:
            return
        async with self._lock:
            sessions = dict(self._sessions)
            for session_id, (before, after) in changed.items():
                kept = [
                    msgspec.structs.replace(n, selection_updated_at=after)
                    for n in sessions.pop(session_id, ())
                    if n.selection_updated_at == before and (n.kind, n.id) != (kind, resource_id)
                ]
                kept.append(
                    ClearedResource(
                        kind=kind, id=resource_id, name=name, selection_updated_at=after
                    )
                )
                sessions[session_id] = kept  # re-inserted last: newest at the end
            while len(sessions) > MAX_NOTED_SESSIONS:
                sessions.pop(next(iter(sessions)))
            data = msgspec.json.format(_encoder.encode(_File(sessions=sessions)), indent=2)
            try:
                await asyncio.to_thread(atomic_write, self.path, data + b"\n")
            except OSError as exc:  # the deletion stands; only the report is lost
                self._logger.error("writing %s failed: %s", CLEARED_FILE, exc)
                return
            self._sessions = sessions

    def deletion_listener(
        self, selections: SessionSelectionStore, name_of: NameOf
    ) -> Callable[[ResourceKind, str], Awaitable[None]]:
        """The resources' deletion listener: clear the id from every selection, then note it."""

        async def on_deleted(kind: ResourceKind, resource_id: str) -> None:
            before = {sid: selections.record(sid) for sid in self._sessions}
            changed = await selections.clear_resource(kind, resource_id)
            stamps: dict[str, tuple[str | None, str]] = {}
            for session_id in changed:
                record, old = selections.record(session_id), before.get(session_id)
                if record is not None:
                    stamps[session_id] = (old.updated_at if old else None, record.updated_at)
            await self.note(kind, resource_id, name_of(kind, resource_id), stamps)

        return on_deleted
