"""A lightweight, in-memory audit of assemblies (body-free).

The loader builds one record per real assembly: JSON builtins with the selection, resource
summaries, lore decisions, section metadata (names, sizes, SHA-256 of each part — never the
text) and the requested/effective/omitted call parameters. Records of real turns are completed
at turn end with the parameters the host actually recorded (``request/header``), then the trace
recorder stores them durably (the schema-4 trace store behind ``/traces`` and v3).

A record carries up to 128 lore decisions (tens of KB), so only what is still needed stays in
memory: the records of each session's newest turn (one per step, at most
:data:`~.limits.AUDIT_MAX_STEPS`), for at most :data:`~.limits.AUDIT_MAX_SESSIONS` sessions
(least recently written first out). A long story therefore holds one turn's records, not one per
turn; older turns are read from the durable trace store.
"""

from __future__ import annotations

import collections
from typing import Any

from .limits import AUDIT_MAX_SESSIONS, AUDIT_MAX_STEPS

__all__ = ["AssemblyAuditLog"]


class AssemblyAuditLog:
    """Each session's newest-turn audit records (dicts); the plugin provides it as a service."""

    def __init__(
        self, max_sessions: int = AUDIT_MAX_SESSIONS, max_steps: int = AUDIT_MAX_STEPS
    ) -> None:
        self.max_sessions = max_sessions
        self.max_steps = max_steps
        #: session id -> records of its newest turn, oldest step first.
        self._sessions: collections.OrderedDict[str | None, list[dict[str, Any]]] = (
            collections.OrderedDict()
        )

    def add(self, record: dict[str, Any]) -> None:
        """Keep ``record``; it replaces the session's records of any other turn."""
        session_id = record.get("sessionId")
        kept = self._sessions.pop(session_id, None)
        if kept is None or kept[-1].get("turn") != record.get("turn"):
            kept = []
        kept.append(record)
        del kept[: max(0, len(kept) - self.max_steps)]
        self._sessions[session_id] = kept
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)

    def records(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Records kept, oldest first, optionally of one session."""
        if session_id is not None:
            return list(self._sessions.get(session_id, ()))
        return [r for kept in self._sessions.values() for r in kept]

    def latest(self, session_id: str, turn: int | None = None) -> dict[str, Any] | None:
        """The newest record of ``session_id`` (of ``turn`` when given)."""
        record: dict[str, Any]
        for record in reversed(self._sessions.get(session_id, [])):
            if turn is None or record.get("turn") == turn:
                return record
        return None

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._sessions.values())
