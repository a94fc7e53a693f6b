"""Users (personas): ``{id, name, description}`` plus an optional raster data-URI avatar.

Portable user JSON (`docs/contract/resources.md#portable-json`) is a versioned Tavern
envelope, sent directly as the body::

    {"format": "pmp-dsh-tavern", "version": 1, "resourceType": "user",
     "data": {"name": "Reader", "description": "A curious traveler.", "avatar": "data:image/…"}}

Import rejects unsupported versions, types, unknown fields (``id`` included: each import gets a
new id) and invalid values with 400, and bodies over 1 MiB with 413. Names are at most 200
characters, descriptions 100,000, the avatar a raster ``data:image/…;base64,`` URI of at most
128 KiB (`docs/contract/resources.md#conversation-settings`). It is not SillyTavern's persona backup
(``personas``/``persona_descriptions``), which is refused.

Characters are counted as JavaScript does (UTF-16 code units), so a value the bundled UI accepts
is accepted here.
"""

from __future__ import annotations

import binascii
import re
from typing import Any, Final

import msgspec

from .errors import FormatError, decode_json

#: `docs/contract/resources.md#portable-json`: user import body ≤ 1 MiB.
MAX_USER_IMPORT_BYTES: Final = 1 << 20
#: Same section: other user JSON writes keep a 256 KiB body limit (enforced by the routes).
MAX_USER_BODY_BYTES: Final = 256 << 10
#: Same section: names ≤ 200 characters.
MAX_USER_NAME_CHARS: Final = 200
#: Same section: descriptions ≤ 100,000 characters.
MAX_USER_DESCRIPTION_CHARS: Final = 100_000
#: `docs/contract/resources.md#conversation-settings`: raster data-URI avatar up to 128 KiB, counted
#: on the decoded image bytes (issue 15: PNG, JPEG, WebP or GIF, 128 KiB decoded at most).
MAX_AVATAR_BYTES: Final = 128 << 10
#: The longest URI such an image can take (the longest prefix plus its base64 text): longer
#: text is refused before anything is decoded.
MAX_AVATAR_CHARS: Final = len("data:image/jpeg;base64,") + 4 * -(-MAX_AVATAR_BYTES // 3)

USER_FORMAT: Final = "pmp-dsh-tavern"
USER_FORMAT_VERSION: Final = 1
USER_RESOURCE_TYPE: Final = "user"

#: Body over :data:`MAX_USER_IMPORT_BYTES` (413).
USER_IMPORT_TOO_LARGE: Final = "USER_IMPORT_TOO_LARGE"
#: Not a version-1 Tavern user envelope (400).
USER_IMPORT_UNSUPPORTED: Final = "USER_IMPORT_UNSUPPORTED"
#: Unknown field, wrong type, empty or too long name, too long description (400).
USER_INVALID: Final = "USER_INVALID"
#: Avatar is not a raster image data URI of at most 128 KiB (400).
USER_AVATAR_INVALID: Final = "USER_AVATAR_INVALID"

_ENVELOPE_KEYS: Final = frozenset({"format", "version", "resourceType", "data"})
#: Where the description goes in the prompt (SillyTavern's persona description positions that
#: this host renders): the preset's persona marker / ``{{persona}}`` (the default), in the chat
#: at ``descriptionDepth`` as ``descriptionRole``, or nowhere.
DESCRIPTION_POSITIONS: Final = ("inPrompt", "atDepth", "none")
#: The roles an at-depth description may take.
DESCRIPTION_ROLES: Final = ("system", "user", "assistant")
#: Deepest depth a description may be placed at (as the card's depth prompt).
MAX_DESCRIPTION_DEPTH: Final = 9999
_PLACEMENT_KEYS: Final = ("descriptionPosition", "descriptionDepth", "descriptionRole")
_DATA_KEYS: Final = frozenset({"name", "description", "avatar", *_PLACEMENT_KEYS})
_DATA_URI: Final = re.compile(
    r"data:image/(png|jpeg|gif|webp);base64,([A-Za-z0-9+/]+={0,2})", re.ASCII
)


class UserData(msgspec.Struct, rename="camel", kw_only=True):
    """The portable part of a user: what import creates and export writes."""

    name: str
    description: str = ""
    avatar: str | None = None
    description_position: str = "inPrompt"
    description_depth: int = 2
    description_role: str = "system"


class User(msgspec.Struct, rename="camel", kw_only=True):
    """A stored user: strictly ``{id, name, description}`` plus the optional avatar
    (`docs/contract/world-info.md#relations`: relations live elsewhere)."""

    id: str
    name: str
    description: str = ""
    avatar: str | None = None

    @classmethod
    def from_data(cls, user_id: str, data: UserData) -> User:
        """The stored user for ``data`` under the store-allocated ``user_id``."""
        return cls(id=user_id, name=data.name, description=data.description, avatar=data.avatar)

    def data(self) -> UserData:
        """The portable part (what export writes and edits apply to)."""
        return UserData(name=self.name, description=self.description, avatar=self.avatar)


def js_length(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's ``String.length``."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def validate_user_name(value: Any, path: str = "$.data.name") -> str:
    """A trimmed, non-empty name of at most :data:`MAX_USER_NAME_CHARS` characters."""
    if not isinstance(value, str):
        raise FormatError(USER_INVALID, "name must be a string", 400, path)
    name = value.strip()
    if not name:
        raise FormatError(USER_INVALID, "name must not be empty", 400, path)
    if js_length(name) > MAX_USER_NAME_CHARS:
        raise FormatError(
            USER_INVALID, f"name is longer than {MAX_USER_NAME_CHARS} characters", 400, path
        )
    return name


def validate_user_description(value: Any, path: str = "$.data.description") -> str:
    """A description string of at most :data:`MAX_USER_DESCRIPTION_CHARS` characters."""
    if not isinstance(value, str):
        raise FormatError(USER_INVALID, "description must be a string", 400, path)
    if len(value) > MAX_USER_DESCRIPTION_CHARS and js_length(value) > MAX_USER_DESCRIPTION_CHARS:
        raise FormatError(
            USER_INVALID,
            f"description is longer than {MAX_USER_DESCRIPTION_CHARS} characters",
            400,
            path,
        )
    return value


def _raster_signature_ok(kind: str, head: bytes) -> bool:
    if kind == "png":
        return head.startswith(b"\x89PNG\r\n\x1a\n")
    if kind == "jpeg":
        return head.startswith(b"\xff\xd8\xff")
    if kind == "gif":
        return head.startswith((b"GIF87a", b"GIF89a"))
    return head.startswith(b"RIFF") and head[8:12] == b"WEBP"  # webp


def validate_avatar(value: Any, path: str = "$.data.avatar") -> str | None:
    """``None`` (no avatar) or a raster ``data:image/<png|jpeg|gif|webp>;base64,`` URI of at
    most :data:`MAX_AVATAR_BYTES` decoded bytes whose bytes start like that image type."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise FormatError(USER_AVATAR_INVALID, "avatar must be a data URI or null", 400, path)
    too_large = FormatError(
        USER_AVATAR_INVALID, f"avatar is larger than {MAX_AVATAR_BYTES} bytes", 400, path
    )
    if len(value) > MAX_AVATAR_CHARS:
        raise too_large
    match = _DATA_URI.fullmatch(value)
    if match is None:
        raise FormatError(
            USER_AVATAR_INVALID, "avatar must be a base64 raster image data URI", 400, path
        )
    encoded = match.group(2)
    if len(encoded) % 4:
        raise FormatError(USER_AVATAR_INVALID, "avatar is not valid base64", 400, path)
    if len(encoded) // 4 * 3 - encoded.count("=", len(encoded) - 2) > MAX_AVATAR_BYTES:
        raise too_large
    # The alphabet is checked by the pattern: decoding the first 64 characters shows the type.
    head = binascii.a2b_base64(encoded[:64].encode("ascii"))
    if not _raster_signature_ok(match.group(1), head):
        raise FormatError(USER_AVATAR_INVALID, f"avatar is not a {match.group(1)} image", 400, path)
    return value


def _placement(patch: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The description placement fields of ``patch`` that are present, checked."""
    changes: dict[str, Any] = {}
    if "descriptionPosition" in patch:
        value = patch["descriptionPosition"]
        if value not in DESCRIPTION_POSITIONS:
            raise FormatError(
                USER_INVALID,
                "descriptionPosition must be inPrompt, atDepth or none",
                400,
                f"{prefix}.descriptionPosition",
            )
        changes["description_position"] = value
    if "descriptionDepth" in patch:
        value = patch["descriptionDepth"]
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or not 0 <= value <= MAX_DESCRIPTION_DEPTH
        ):
            raise FormatError(
                USER_INVALID,
                f"descriptionDepth must be an integer from 0 to {MAX_DESCRIPTION_DEPTH}",
                400,
                f"{prefix}.descriptionDepth",
            )
        changes["description_depth"] = value
    if "descriptionRole" in patch:
        value = patch["descriptionRole"]
        if value not in DESCRIPTION_ROLES:
            raise FormatError(
                USER_INVALID,
                "descriptionRole must be system, user or assistant",
                400,
                f"{prefix}.descriptionRole",
            )
        changes["description_role"] = value
    return changes


def parse_user_import(body: bytes | str) -> UserData:
    """Validate a ``POST /users/import`` body and return the user to create (with a new id).

    Raises ``FormatError``: ``USER_IMPORT_TOO_LARGE`` (413), ``INVALID_JSON``,
    ``USER_IMPORT_UNSUPPORTED``, ``USER_INVALID``, ``USER_AVATAR_INVALID`` (400).
    """
    size = len(body.encode("utf-8")) if isinstance(body, str) else len(body)
    if size > MAX_USER_IMPORT_BYTES:
        raise FormatError(
            USER_IMPORT_TOO_LARGE,
            f"user import body is larger than {MAX_USER_IMPORT_BYTES} bytes",
            413,
        )
    doc = decode_json(body, what="user import")
    if not isinstance(doc, dict):
        raise FormatError(USER_IMPORT_UNSUPPORTED, "user import must be a JSON object", 400, "$")
    if "personas" in doc or "persona_descriptions" in doc:
        raise FormatError(
            USER_IMPORT_UNSUPPORTED,
            "SillyTavern persona backups are not Tavern user JSON",
            400,
            "$",
        )
    if doc.get("format") != USER_FORMAT:
        raise FormatError(USER_IMPORT_UNSUPPORTED, "unsupported format", 400, "$.format")
    version = doc.get("version")
    if isinstance(version, bool) or version != USER_FORMAT_VERSION:
        raise FormatError(USER_IMPORT_UNSUPPORTED, "unsupported version", 400, "$.version")
    if doc.get("resourceType") != USER_RESOURCE_TYPE:
        raise FormatError(
            USER_IMPORT_UNSUPPORTED, "unsupported resourceType", 400, "$.resourceType"
        )
    unknown = sorted(set(doc) - _ENVELOPE_KEYS)
    if unknown:
        raise FormatError(USER_INVALID, f"unknown field {unknown[0]!r}", 400, f"$.{unknown[0]}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise FormatError(USER_INVALID, "data must be an object", 400, "$.data")
    unknown = sorted(set(data) - _DATA_KEYS)
    if unknown:
        raise FormatError(
            USER_INVALID, f"unknown field {unknown[0]!r}", 400, f"$.data.{unknown[0]}"
        )
    return UserData(
        name=validate_user_name(data.get("name")),
        description=validate_user_description(data.get("description", "")),
        avatar=validate_avatar(data.get("avatar")),
        **_placement(data, "$.data"),
    )


def export_user(user: UserData) -> dict[str, Any]:
    """The portable envelope of ``user``: name, description and the avatar when there is one."""
    data: dict[str, Any] = {"name": user.name, "description": user.description}
    if user.avatar is not None:
        data["avatar"] = user.avatar
    # Placement only when it is not the default, so a default user exports as before.
    if user.description_position != "inPrompt":
        data["descriptionPosition"] = user.description_position
        data["descriptionDepth"] = user.description_depth
        data["descriptionRole"] = user.description_role
    return {
        "format": USER_FORMAT,
        "version": USER_FORMAT_VERSION,
        "resourceType": USER_RESOURCE_TYPE,
        "data": data,
    }


def export_user_json(user: UserData) -> bytes:
    """:func:`export_user` as pretty UTF-8 JSON (2-space indent, trailing newline)."""
    return msgspec.json.format(msgspec.json.encode(export_user(user)), indent=2) + b"\n"


def edit_user(user: UserData, patch: Any) -> UserData:
    """Apply a ``POST /users`` or ``PATCH /users/:id`` body (``name``, ``description``,
    ``avatar``, ``descriptionPosition``, ``descriptionDepth``, ``descriptionRole``) to ``user``:
    omitted fields are kept, ``avatar: null`` clears the avatar, other keys are rejected
    (``USER_INVALID``) and ``user`` is unchanged."""
    if not isinstance(patch, dict):
        raise FormatError(USER_INVALID, "user must be a JSON object", 400, "$")
    unknown = sorted(set(patch) - _DATA_KEYS)
    if unknown:
        raise FormatError(USER_INVALID, f"unknown field {unknown[0]!r}", 400, f"$.{unknown[0]}")
    changes: dict[str, Any] = {}
    if "name" in patch:
        changes["name"] = validate_user_name(patch["name"], "$.name")
    if "description" in patch:
        changes["description"] = validate_user_description(patch["description"], "$.description")
    if "avatar" in patch:
        changes["avatar"] = validate_avatar(patch["avatar"], "$.avatar")
    changes.update(_placement(patch, "$"))
    return msgspec.structs.replace(user, **changes)


def new_user(body: Any) -> UserData:
    """Validate a ``POST /users`` body: ``name`` is required, the rest as :func:`edit_user`."""
    if not isinstance(body, dict) or "name" not in body:
        raise FormatError(USER_INVALID, "name is required", 400, "$.name")
    return edit_user(UserData(name=""), body)
