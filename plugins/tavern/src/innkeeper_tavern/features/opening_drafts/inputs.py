"""Inputs of the opening-draft routes (`docs/contract/openings.md#opening-drafts`): their
stable codes, limits and the small body checks every route shares."""

from __future__ import annotations

import hashlib
from typing import Any, Final

from innkeeper_tavern.features.play.errors import PlayError, bad_body
from innkeeper_tavern.state.session_bindings.model import valid_resource_id

from .records import DRAFT_ID

DRAFT_INVALID: Final = "DRAFT_INVALID"
DRAFT_NOT_FOUND: Final = "DRAFT_NOT_FOUND"
DRAFT_REVISION_REQUIRED: Final = "DRAFT_REVISION_REQUIRED"
DRAFT_REVISION_CONFLICT: Final = "DRAFT_REVISION_CONFLICT"
DRAFT_CHARACTER_IMMUTABLE: Final = "DRAFT_CHARACTER_IMMUTABLE"
DRAFT_GREETING_INVALID: Final = "DRAFT_GREETING_INVALID"
DRAFT_PREPARING: Final = "DRAFT_PREPARING"
DRAFT_MATERIALIZED: Final = "DRAFT_MATERIALIZED"
DRAFT_OPERATION_CONFLICT: Final = "DRAFT_OPERATION_CONFLICT"
DRAFT_TOO_LARGE: Final = "DRAFT_TOO_LARGE"
DRAFT_READ_FAILED: Final = "DRAFT_READ_FAILED"

#: ``source`` labels: printable, at most this many characters.
MAX_SOURCE_CHARS: Final = 64
MAX_OPERATION_ID_CHARS: Final = 128

CREATE_KEYS: Final = frozenset({"characterId", "source", "selection", "assemblyPresetId"})
PUT_KEYS: Final = frozenset(
    {
        "expectedRevision",
        "selection",
        "assemblyPresetId",
        "variables",
        "importContextRef",
        "resetVariables",
    }
)
SELECTION_KEYS: Final = frozenset({"greetingIndex", "presetId", "userId", "worldBookIds"})


def now() -> str:
    """The current UTC time as the play records write it."""
    from innkeeper_tavern.features.play import utc_now_ms

    return utc_now_ms()


def only_keys(body: dict[str, Any], allowed: frozenset[str]) -> None:
    """Refuse an unknown field (400 ``DRAFT_INVALID``)."""
    extra = sorted(set(body) - allowed)
    if extra:
        raise bad_body(f"unknown field {extra[0]!r}", DRAFT_INVALID)


def json_object(body: object) -> dict[str, Any]:
    """``body`` when it is a JSON object (400 otherwise)."""
    if not isinstance(body, dict):
        raise bad_body("the request body must be a JSON object", DRAFT_INVALID)
    return body


def check_draft_id(value: object) -> str:
    """``value`` when it is a well-formed draft id (400 otherwise)."""
    if not isinstance(value, str) or DRAFT_ID.fullmatch(value) is None:
        raise PlayError(400, DRAFT_INVALID, "not a valid draft id")
    return value


def optional_id(value: object, name: str) -> str | None:
    """``null`` or a resource id (400 otherwise)."""
    if value is None:
        return None
    if not valid_resource_id(value):
        raise bad_body(f"{name} must be null or a resource id", DRAFT_INVALID)
    assert isinstance(value, str)
    return value


def expected_revision(body: dict[str, Any]) -> int:
    """The required positive ``expectedRevision``."""
    if "expectedRevision" not in body:
        raise PlayError(400, DRAFT_REVISION_REQUIRED, "expectedRevision is required")
    value = body["expectedRevision"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_body("expectedRevision must be a positive integer", DRAFT_INVALID)
    return value


def text_sha256(text: str) -> str:
    """SHA-256 hex of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
