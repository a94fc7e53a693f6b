"""Request shapes, identities and digests of the opening world books
(`docs/contract/openings.md#opening-world-books`). Pure: no I/O, no host state.

``sourceIdentity`` is ``{version:1, owner:'pmp-dsh-tavern', sessionId, characterId,
greetingIndex, greetingSha256, identitySha256}``: ``greetingIndex`` is zero based (0 is
``first_mes``), ``greetingSha256`` the SHA-256 of the selected greeting's original UTF-8 text
(before regex or macros) and ``identitySha256`` the SHA-256 of the UTF-8 bytes of the
``identitySource`` snapshot's ``content`` (so it equals that snapshot's manifest ``sha256``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from innkeeper_hostapi import HttpProblem
from innkeeper_tavern.state.session_bindings.model import MAX_SAFE_INTEGER, valid_session_id

from .manifest import OPENING_ID_PATTERN

__all__ = [
    "OWNER",
    "RESOURCE_PREFIX",
    "SnapshotInput",
    "canonical_hash",
    "check_identity",
    "fail",
    "object_body",
    "parse_snapshot",
    "resource_id",
    "sha256_hex",
]

OWNER: Final = "pmp-dsh-tavern"
RESOURCE_PREFIX: Final = "world-book:session-opening-"
#: Longest snapshot ``content`` (UTF-8 bytes) a request may carry.
MAX_SNAPSHOT_BYTES: Final = 4 << 20
MAX_ID_CHARS: Final = 200

# Stable codes (docs/opening-books.md#errors).
INVALID: Final = "OPENING_WORLDBOOK_INVALID"
SESSION_NOT_FOUND: Final = "OPENING_WORLDBOOK_SESSION_NOT_FOUND"
IDENTITY_MISMATCH: Final = "OPENING_WORLDBOOK_IDENTITY_MISMATCH"
SOURCE_UNREGISTERED: Final = "OPENING_WORLDBOOK_SOURCE_UNREGISTERED"
HASH_MISMATCH: Final = "OPENING_WORLDBOOK_HASH_MISMATCH"
OPENING_UNKNOWN: Final = "OPENING_WORLDBOOK_OPENING_UNKNOWN"
PROPOSALS_FULL: Final = "OPENING_WORLDBOOK_PROPOSALS_FULL"
PROPOSAL_NOT_FOUND: Final = "OPENING_WORLDBOOK_PROPOSAL_NOT_FOUND"
PROPOSAL_EXPIRED: Final = "OPENING_WORLDBOOK_PROPOSAL_EXPIRED"
PROPOSAL_REVOKED: Final = "OPENING_WORLDBOOK_PROPOSAL_REVOKED"
CONFIRMATION_REQUIRED: Final = "OPENING_WORLDBOOK_CONFIRMATION_REQUIRED"
REVISION_CONFLICT: Final = "OPENING_WORLDBOOK_REVISION_CONFLICT"
OPERATION_CONFLICT: Final = "OPENING_WORLDBOOK_OPERATION_CONFLICT"
STORE_FULL: Final = "OPENING_WORLDBOOK_STORE_FULL"
UNAVAILABLE: Final = "OPENING_WORLDBOOK_UNAVAILABLE"
SNAPSHOT_TOO_LARGE: Final = "OPENING_WORLDBOOK_SNAPSHOT_TOO_LARGE"

_IDENTITY_KEYS: Final = frozenset(
    {
        "version",
        "owner",
        "sessionId",
        "characterId",
        "greetingIndex",
        "greetingSha256",
        "identitySha256",
    }
)
_SNAPSHOT_KEYS: Final = frozenset({"url", "sha256", "content"})
_HEX: Final = frozenset("0123456789abcdef")


def fail(status: int, code: str, message: str) -> HttpProblem:
    return HttpProblem(status, code, message)


def sha256_hex(text: str) -> str:
    """Lowercase hex SHA-256 of ``text``'s UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_hash(value: Any) -> str:
    """SHA-256 of ``value`` as compact JSON with sorted keys (entries hashes, fingerprints)."""
    return hashlib.sha256(msgspec.json.encode(value, order="sorted")).hexdigest()


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def object_body(body: object, required: frozenset[str], optional: frozenset[str]) -> dict[str, Any]:
    """``body`` when it is an object with every ``required`` and no unknown key."""
    if not isinstance(body, dict):
        raise fail(400, INVALID, "the request body must be a JSON object")
    unknown = sorted(set(body) - required - optional)
    if unknown:
        raise fail(400, INVALID, f"unknown field {unknown[0]!r}")
    missing = sorted(required - set(body))
    if missing:
        raise fail(400, INVALID, f"{missing[0]} is required")
    return body


def text_field(body: Mapping[str, Any], key: str, limit: int = MAX_ID_CHARS) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise fail(400, INVALID, f"{key} must be a non-empty string of at most {limit} chars")
    return value


def check_identity(value: object) -> dict[str, Any]:
    """A well-formed ``sourceIdentity`` (400 otherwise); checked against the host later."""
    if not isinstance(value, dict) or set(value) != _IDENTITY_KEYS:
        raise fail(400, INVALID, "sourceIdentity must carry exactly the seven identity fields")
    if value["version"] != 1 or isinstance(value["version"], bool):
        raise fail(400, INVALID, "sourceIdentity.version must be 1")
    if value["owner"] != OWNER:
        raise fail(400, INVALID, f"sourceIdentity.owner must be {OWNER!r}")
    session_id = value["sessionId"]
    if not isinstance(session_id, str) or not valid_session_id(session_id):
        raise fail(400, INVALID, "sourceIdentity.sessionId is not a session id")
    text_field(value, "characterId")
    index = value["greetingIndex"]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_SAFE_INTEGER:
        raise fail(400, INVALID, "sourceIdentity.greetingIndex must be a non-negative integer")
    for key in ("greetingSha256", "identitySha256"):
        if not _is_sha(value[key]):
            raise fail(400, INVALID, f"sourceIdentity.{key} must be 64 lowercase hex")
    return dict(value)


@dataclass(frozen=True, slots=True)
class SnapshotInput:
    """A snapshot a request carries, with its recomputed digest and size."""

    url: str
    sha256: str
    size: int


def parse_snapshot(value: object, where: str) -> SnapshotInput:
    """``{url, sha256, content}``: the digest must be that of the content's UTF-8 bytes."""
    if not isinstance(value, dict) or set(value) != _SNAPSHOT_KEYS:
        raise fail(400, INVALID, f"{where} must be exactly {{url, sha256, content}}")
    url = text_field(value, "url", 2048)
    content = value["content"]
    if not isinstance(content, str):
        raise fail(400, INVALID, f"{where}.content must be a string")
    if not _is_sha(value["sha256"]):
        raise fail(400, INVALID, f"{where}.sha256 must be 64 lowercase hex")
    data = content.encode("utf-8")
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise fail(413, SNAPSHOT_TOO_LARGE, f"{where}.content is over {MAX_SNAPSHOT_BYTES} bytes")
    digest = hashlib.sha256(data).hexdigest()
    if digest != value["sha256"]:
        raise fail(400, HASH_MISMATCH, f"{where}.sha256 is not the SHA-256 of its content")
    return SnapshotInput(url, digest, len(data))


def opening_id_field(body: Mapping[str, Any]) -> str:
    value = body.get("openingId")
    if not isinstance(value, str) or not OPENING_ID_PATTERN.fullmatch(value):
        raise fail(400, INVALID, f"openingId must match {OPENING_ID_PATTERN.pattern}")
    return value


def resource_id(identity: Mapping[str, Any], opening_id: str) -> str:
    """``world-book:session-opening-<digest>``: 32 hex of the identity and the opening."""
    return RESOURCE_PREFIX + canonical_hash([identity, opening_id])[:32]
