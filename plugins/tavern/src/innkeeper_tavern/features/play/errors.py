"""The play workspace's error type and its stable codes (`docs/contract/play.md#v2-surface`;
the codes of each route: `docs/play.md`).

Every failure of the play package is a :class:`PlayError`: an
:class:`~innkeeper_hostapi.HttpProblem`, so a route handler can let it propagate and the host
answers ``{ok:false, error, code}`` with the status chosen here.
"""

from __future__ import annotations

from typing import Any, Final

from innkeeper_hostapi import HttpProblem

# -- paths and files ----------------------------------------------------------------------------
PLAY_WORKSPACE_UNBOUND: Final = "PLAY_WORKSPACE_UNBOUND"
PLAY_WORKSPACE_INVALID: Final = "PLAY_WORKSPACE_INVALID"
PLAY_WORKSPACE_SCOPE_INVALID: Final = "PLAY_WORKSPACE_SCOPE_INVALID"
PLAY_WORKSPACE_CHANGED: Final = "PLAY_WORKSPACE_CHANGED"
PLAY_PATH_INVALID: Final = "PLAY_PATH_INVALID"
PLAY_PATH_ESCAPE: Final = "PLAY_PATH_ESCAPE"
PLAY_PATH_LINK: Final = "PLAY_PATH_LINK"
PLAY_PATH_CONFLICT: Final = "PLAY_PATH_CONFLICT"
PLAY_PATH_RACE: Final = "PLAY_PATH_RACE"
PLAY_PATH_BUSY: Final = "PLAY_PATH_BUSY"
PLAY_PATH_NOT_FOUND: Final = "PLAY_PATH_NOT_FOUND"
PLAY_FILE_TOO_LARGE: Final = "PLAY_FILE_TOO_LARGE"
PLAY_FILE_NOT_UTF8: Final = "PLAY_FILE_NOT_UTF8"
PLAY_FILE_WRITE_FAILED: Final = "PLAY_FILE_WRITE_FAILED"
PLAY_FILE_REVISION_REQUIRED: Final = "PLAY_FILE_REVISION_REQUIRED"
PLAY_FILE_REVISION_INVALID: Final = "PLAY_FILE_REVISION_INVALID"
PLAY_FILE_REVISION_CONFLICT: Final = "PLAY_FILE_REVISION_CONFLICT"
PLAY_STORAGE_LIMIT: Final = "PLAY_STORAGE_LIMIT"
PLAY_TIMELINE_INVALID: Final = "PLAY_TIMELINE_INVALID"
PLAY_CATALOG_INVALID: Final = "PLAY_CATALOG_INVALID"
PLAY_APPEARANCE_INVALID: Final = "PLAY_APPEARANCE_INVALID"
PLAY_BODY_INVALID: Final = "PLAY_BODY_INVALID"
PLAY_METHOD_NOT_ALLOWED: Final = "PLAY_METHOD_NOT_ALLOWED"

# -- sessions -------------------------------------------------------------------------------------
PLAY_SESSION_INVALID: Final = "PLAY_SESSION_INVALID"
PLAY_SESSION_NOT_FOUND: Final = "PLAY_SESSION_NOT_FOUND"
PLAY_COORDINATES_INVALID: Final = "PLAY_COORDINATES_INVALID"
PLAY_COORDINATES_MIGRATION_REQUIRED: Final = "PLAY_COORDINATES_MIGRATION_REQUIRED"
PLAY_FORK_UNAVAILABLE: Final = "PLAY_FORK_UNAVAILABLE"
PLAY_BRANCH_INPUT_RESET_FAILED: Final = "PLAY_BRANCH_INPUT_RESET_FAILED"
PLAY_BRANCH_COPY_FAILED: Final = "PLAY_BRANCH_COPY_FAILED"
PLAY_HISTORY_CURSOR_STALLED: Final = "PLAY_HISTORY_CURSOR_STALLED"
PLAY_MESSAGES_QUERY_INVALID: Final = "PLAY_MESSAGES_QUERY_INVALID"
PLAY_STATE_SOURCE_INVALID: Final = "PLAY_STATE_SOURCE_INVALID"
PLAY_REQUEST_ID_CONFLICT: Final = "PLAY_REQUEST_ID_CONFLICT"
PLAY_REQUEST_RECORD_FAILED: Final = "PLAY_REQUEST_RECORD_FAILED"
PLAY_HOST_UNAVAILABLE: Final = "PLAY_HOST_UNAVAILABLE"
PLAY_HOST_ERROR: Final = "PLAY_HOST_ERROR"
#: A continue or impersonate asked for while a turn runs or input is queued.
PLAY_TURN_OPEN: Final = "PLAY_TURN_OPEN"
#: A continue asked for when the last message is not a finished assistant reply.
PLAY_NOTHING_TO_CONTINUE: Final = "PLAY_NOTHING_TO_CONTINUE"

# -- playthroughs, focus, import context ----------------------------------------------------
PLAY_PLAYTHROUGH_NOT_FOUND: Final = "PLAY_PLAYTHROUGH_NOT_FOUND"
PLAY_PLAYTHROUGH_INVALID: Final = "PLAY_PLAYTHROUGH_INVALID"
PLAY_CATALOG_UNAVAILABLE: Final = "PLAY_CATALOG_UNAVAILABLE"
PLAY_FOCUS_UNAVAILABLE: Final = "PLAY_FOCUS_UNAVAILABLE"
PLAY_FOCUS_PATH_REQUIRED: Final = "PLAY_FOCUS_PATH_REQUIRED"
PLAY_DETACH_NOT_FOUND: Final = "PLAY_DETACH_NOT_FOUND"
PLAY_RELINK_CONFLICT: Final = "PLAY_RELINK_CONFLICT"
PLAY_CHARACTER_NOT_FOUND: Final = "PLAY_CHARACTER_NOT_FOUND"
PLAY_CLEANUP_CONFLICT: Final = "PLAY_CLEANUP_CONFLICT"
PLAY_CLEANUP_INVALID: Final = "PLAY_CLEANUP_INVALID"
PLAY_IMPORT_CONTEXT_INVALID: Final = "PLAY_IMPORT_CONTEXT_INVALID"
PLAY_IMPORT_CONTEXT_LOCKED: Final = "PLAY_IMPORT_CONTEXT_LOCKED"
PLAY_IMPORT_CONTEXT_HASH_MISMATCH: Final = "PLAY_IMPORT_CONTEXT_HASH_MISMATCH"
PLAY_CHROME_INVALID: Final = "PLAY_CHROME_INVALID"
PLAY_OPERATION_LOG_QUERY_INVALID: Final = "PLAY_OPERATION_LOG_QUERY_INVALID"


class PlayError(HttpProblem):
    """A play-workspace failure with its HTTP status and stable code."""

    def __init__(
        self, status: int, code: str, message: str, *, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(status, code, message, details=details)


def bad_body(message: str, code: str = PLAY_BODY_INVALID) -> PlayError:
    """400 for a request body of the wrong shape."""
    return PlayError(400, code, message)
