"""Errors of the selection store: a stable ``code``, an HTTP ``status`` and a message.

Messages name ids and limits, never resource bodies.
"""

from __future__ import annotations

from typing import Final

#: The store holds ``max_sessions`` sessions and a mutation would add one (HTTP 409).
SESSION_SELECTION_LIMIT_REACHED: Final = "SESSION_SELECTION_LIMIT_REACHED"
#: The serialized state would exceed 4 MiB (HTTP 413).
SESSION_SELECTION_STORAGE_LIMIT_REACHED: Final = "SESSION_SELECTION_STORAGE_LIMIT_REACHED"
#: The file on disk is over 8 MiB; it was not parsed.
SESSION_SELECTION_FILE_TOO_LARGE: Final = "SESSION_SELECTION_FILE_TOO_LARGE"
#: The file has a schema version this code does not know; it was left untouched.
SESSION_SELECTION_SCHEMA_UNSUPPORTED: Final = "SESSION_SELECTION_SCHEMA_UNSUPPORTED"
#: The encoded new state did not validate (a bug); nothing was written (HTTP 500).
SESSION_SELECTION_VALIDATION_FAILED: Final = "SESSION_SELECTION_VALIDATION_FAILED"
#: Writing the file failed; nothing changed (HTTP 500).
SESSION_SELECTION_WRITE_FAILED: Final = "SESSION_SELECTION_WRITE_FAILED"


class SelectionStoreError(Exception):
    """The store refused an operation or could not load; nothing changed."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
