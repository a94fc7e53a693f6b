"""Session templates: a name plus a selection projection, and their portable Tavern JSON.

A template holds exactly what a session selection holds (`docs/contract/loader.md#templates`: only
the binding is copied, RP included) — never history, traces, inbox items, runtime state or
resource bodies. The projection *is*
:class:`~innkeeper_tavern.state.session_bindings.model.Selection`, so applying a template writes
the same struct the session-selection store keeps.

Two ways a selection comes in (`docs/contract/resources.md#template-editing`):

- :func:`parse_explicit_selection` is *strict*: explicit edits and imports reject unknown fields
  and invalid values instead of dropping them; omitted fields take blank defaults (an explicit
  selection replaces the whole configuration, it is never merged);
- stored templates are read *leniently* with
  :func:`~innkeeper_tavern.state.session_bindings.model.normalize_selection` (what the selection
  store's
  migration uses), so an old or hand-edited file never stops the plugin.

Portable JSON (`docs/contract/resources.md#portable-json`)::

    {"format": "pmp-dsh-tavern", "version": 1, "resourceType": "session-template",
     "data": {"name": "Example", "selection": {...}}}

Everything here is pure (no I/O, no host).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Final

import msgspec

from innkeeper_tavern.state.session_bindings.model import (
    MAX_SAFE_INTEGER,
    MAX_WORLD_BOOKS_PER_SESSION,
    CharacterOptions,
    RpState,
    Selection,
    valid_resource_id,
)

from .errors import INVALID_SESSION_TEMPLATE_REQUEST, TemplateError

#: `docs/contract/resources.md#template-editing`: names are at most 120 characters ...
MAX_TEMPLATE_NAME_CHARS: Final = 120
#: ... and 480 UTF-8 bytes.
MAX_TEMPLATE_NAME_BYTES: Final = 480
#: Template ids: the original store's pattern (also the session-id pattern), at most 200 chars.
TEMPLATE_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")

#: `docs/contract/resources.md#portable-json`: the envelope's fixed values.
TEMPLATE_FORMAT: Final = "pmp-dsh-tavern"
TEMPLATE_FORMAT_VERSION: Final = 1
TEMPLATE_RESOURCE_TYPE: Final = "session-template"

_ENVELOPE_KEYS: Final = frozenset({"format", "version", "resourceType", "data"})
_DATA_KEYS: Final = frozenset({"name", "selection"})
_SELECTION_KEYS: Final = frozenset(
    {"presetId", "characterCardId", "userId", "worldBookIds", "character", "rp"}
)
_CHARACTER_KEYS: Final = frozenset(
    {"greetingIndex", "preferCharacterSystemPrompt", "preferCharacterPostHistory"}
)
_RP_KEYS: Final = frozenset({"active", "source", "followSuppressed", "sandboxBefore"})
_RP_SOURCES: Final = ("command", "character-follow")
_SANDBOX_MODES: Final = ("read-only", "workspace-write", "danger-full-access")


class Template(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One stored template (``templates[]`` of ``session-templates.json``)."""

    id: str
    name: str
    selection: Selection
    created_at: str
    updated_at: str


class TemplateFile(msgspec.Struct, kw_only=True, rename="camel"):
    """The whole ``session-templates.json`` document (schema 1, the original's shape)."""

    schema_version: int
    selected_id: str | None
    templates: list[Template]


def _invalid(message: str) -> TemplateError:
    return TemplateError(400, INVALID_SESSION_TEMPLATE_REQUEST, message)


def js_length(text: str) -> int:
    """Length in UTF-16 code units, as the bundled UI (JavaScript) counts characters."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def valid_template_id(value: object) -> bool:
    """Whether ``value`` can name a stored template."""
    return isinstance(value, str) and TEMPLATE_ID_PATTERN.fullmatch(value) is not None


def check_template_name(value: object) -> str:
    """A trimmed, non-empty name within 120 characters and 480 UTF-8 bytes (else 400)."""
    if not isinstance(value, str):
        raise _invalid("name must be a string")
    name = value.strip()
    if not name:
        raise _invalid("name must not be empty")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise _invalid("name must not contain control characters")
    if (
        js_length(name) > MAX_TEMPLATE_NAME_CHARS
        or len(name.encode("utf-8", "surrogatepass")) > MAX_TEMPLATE_NAME_BYTES
    ):
        raise _invalid(
            f"name exceeds {MAX_TEMPLATE_NAME_CHARS} characters or "
            f"{MAX_TEMPLATE_NAME_BYTES} UTF-8 bytes"
        )
    return name


def _object(value: Any, allowed: frozenset[str], label: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{label} must be an object")
    extra = sorted(k for k in value if k not in allowed)
    if extra:
        raise _invalid(f"unsupported {label} field {extra[0][:60]!r}")
    return value


def _optional_id(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not valid_resource_id(value):
        raise _invalid(f"selection.{field} must be null or 1-200 printable characters")
    assert isinstance(value, str)
    return value


def _strict_bool(raw: dict[str, Any], key: str, label: str) -> bool | None:
    if key not in raw:
        return None
    value = raw[key]
    if not isinstance(value, bool):
        raise _invalid(f"{label}.{key} must be a boolean")
    return value


def _character(value: Any) -> CharacterOptions:
    raw = _object(value, _CHARACTER_KEYS, "selection.character")
    index: int | None = None
    if "greetingIndex" in raw:
        candidate = raw["greetingIndex"]
        # `docs/resources.md#original-decisions`: bool is an int in Python; JSON true is
        # not an index. An integral float (1.0) is the same JSON number as 1 in JavaScript.
        if isinstance(candidate, float) and candidate.is_integer():
            candidate = int(candidate)
        if (
            isinstance(candidate, bool)
            or not isinstance(candidate, int)
            or not 0 <= candidate <= MAX_SAFE_INTEGER
        ):
            raise _invalid("selection.character.greetingIndex must be a non-negative safe integer")
        index = candidate
    return CharacterOptions(
        greeting_index=index,
        prefer_character_system_prompt=_strict_bool(
            raw, "preferCharacterSystemPrompt", "selection.character"
        ),
        prefer_character_post_history=_strict_bool(
            raw, "preferCharacterPostHistory", "selection.character"
        ),
    )


def _rp(value: Any) -> RpState:
    raw = _object(value, _RP_KEYS, "selection.rp")
    active = _strict_bool(raw, "active", "selection.rp")
    suppressed = _strict_bool(raw, "followSuppressed", "selection.rp")
    source = raw.get("source")
    if source is not None and source not in _RP_SOURCES:
        raise _invalid("selection.rp.source must be null, 'command' or 'character-follow'")
    sandbox = raw.get("sandboxBefore")
    if sandbox is not None and sandbox not in _SANDBOX_MODES:
        raise _invalid(
            "selection.rp.sandboxBefore must be null, 'read-only', 'workspace-write' or "
            "'danger-full-access'"
        )
    return RpState(
        active=bool(active),
        source=source,
        follow_suppressed=bool(suppressed),
        sandbox_before=sandbox,
    )


def _world_books(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _invalid("selection.worldBookIds must be an array")
    if len(value) > MAX_WORLD_BOOKS_PER_SESSION:
        raise _invalid(
            f"selection.worldBookIds holds at most {MAX_WORLD_BOOKS_PER_SESSION} world books"
        )
    if not all(valid_resource_id(v) for v in value):
        raise _invalid("every selection.worldBookIds item must be 1-200 printable characters")
    if len(set(value)) != len(value):
        raise _invalid("selection.worldBookIds must be unique")
    return tuple(value)


def parse_explicit_selection(value: Any) -> Selection:
    """A selection from an explicit edit or import: strict, omitted fields blank.

    Raises :class:`TemplateError` (400 ``INVALID_SESSION_TEMPLATE_REQUEST``) for anything that
    is not an object of the known fields with valid values. Resource *availability* is not
    checked here: templates may reference missing resources (diagnostics report them).
    """
    raw = _object(value, _SELECTION_KEYS, "selection")
    return Selection(
        preset_id=_optional_id(raw.get("presetId"), "presetId"),
        character_card_id=_optional_id(raw.get("characterCardId"), "characterCardId"),
        user_id=_optional_id(raw.get("userId"), "userId"),
        world_book_ids=_world_books(raw["worldBookIds"]) if "worldBookIds" in raw else (),
        character=_character(raw["character"]) if "character" in raw else CharacterOptions(),
        rp=_rp(raw["rp"]) if "rp" in raw else RpState(),
    )


def parse_envelope(document: Any) -> tuple[str, Selection]:
    """``(name, selection)`` of a version-1 Tavern session-template document.

    Unknown envelope or ``data`` fields (``id`` included: each import gets a new id),
    other formats, versions or resource types and invalid values are all 400. An omitted
    ``selection`` is blank, exactly as in ``POST /session-templates``.
    """
    if not isinstance(document, dict):
        raise _invalid("a session-template document must be a JSON object")
    version = document.get("version")
    if (
        document.get("format") != TEMPLATE_FORMAT
        or isinstance(version, bool)
        or version != TEMPLATE_FORMAT_VERSION
        or document.get("resourceType") != TEMPLATE_RESOURCE_TYPE
    ):
        raise _invalid(
            f"expected a {TEMPLATE_FORMAT} version {TEMPLATE_FORMAT_VERSION} "
            f"{TEMPLATE_RESOURCE_TYPE} document"
        )
    _object(document, _ENVELOPE_KEYS, "document")
    data = _object(document.get("data"), _DATA_KEYS, "data")
    if "name" not in data:
        raise _invalid("data.name is required")
    name = check_template_name(data["name"])
    selection = parse_explicit_selection(data["selection"]) if "selection" in data else Selection()
    return name, selection


def export_document(template: Template) -> dict[str, Any]:
    """The portable document of ``template``: name and selection only (no id, no times)."""
    return {
        "format": TEMPLATE_FORMAT,
        "version": TEMPLATE_FORMAT_VERSION,
        "resourceType": TEMPLATE_RESOURCE_TYPE,
        "data": {"name": template.name, "selection": selection_to_wire(template.selection)},
    }


def selection_to_wire(selection: Selection) -> dict[str, Any]:
    """The selection as JSON builtins: camelCase, ``character`` without absent options."""
    wire: dict[str, Any] = msgspec.to_builtins(selection)
    wire["worldBookIds"] = list(selection.world_book_ids)
    return wire


def template_to_wire(template: Template) -> dict[str, Any]:
    """A template as the routes answer it: ``{id, name, selection, createdAt, updatedAt}``."""
    return {
        "id": template.id,
        "name": template.name,
        "selection": selection_to_wire(template.selection),
        "createdAt": template.created_at,
        "updatedAt": template.updated_at,
    }


__all__ = [
    "MAX_TEMPLATE_NAME_BYTES",
    "MAX_TEMPLATE_NAME_CHARS",
    "TEMPLATE_FORMAT",
    "TEMPLATE_FORMAT_VERSION",
    "TEMPLATE_ID_PATTERN",
    "TEMPLATE_RESOURCE_TYPE",
    "Template",
    "TemplateFile",
    "check_template_name",
    "export_document",
    "js_length",
    "parse_envelope",
    "parse_explicit_selection",
    "selection_to_wire",
    "template_to_wire",
    "valid_template_id",
]
