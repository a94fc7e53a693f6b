"""A lightweight, in-memory audit of assemblies (body-free).

Issue 6 item 8 asks for one canonical schema-4 record per assembly behind ``/traces`` and v3;
until that store exists the loader keeps its records here: the newest
:data:`~.limits.AUDIT_MAX_RECORDS` records, newest last, each JSON builtins with the selection,
resource summaries, lore decisions, section metadata (names, sizes, SHA-256 of each part — never
the text) and the requested/effective/omitted call parameters. Records of real turns are
completed at turn end with the parameters the host actually recorded (``request/header``).
"""

from __future__ import annotations

import collections
from typing import Any

from .limits import AUDIT_MAX_RECORDS

__all__ = ["AssemblyAuditLog"]


class AssemblyAuditLog:
    """Bounded ring of audit records (dicts); the plugin provides it as a service."""

    def __init__(self, max_records: int = AUDIT_MAX_RECORDS) -> None:
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_records)

    def add(self, record: dict[str, Any]) -> None:
        """Keep ``record`` (the oldest record is dropped when full)."""
        self._records.append(record)

    def records(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Records, oldest first, optionally of one session."""
        return [r for r in self._records if session_id is None or r.get("sessionId") == session_id]

    def latest(self, session_id: str, turn: int | None = None) -> dict[str, Any] | None:
        """The newest record of ``session_id`` (of ``turn`` when given)."""
        record: dict[str, Any]
        for record in reversed(self._records):
            if record.get("sessionId") == session_id and (
                turn is None or record.get("turn") == turn
            ):
                return record
        return None

    def __len__(self) -> int:
        return len(self._records)
