"""``conversation-settings.json``: the bundled client's conversation display preferences.

`docs/contract/resources.md#conversation-settings`: ``{schemaVersion: 1, textScale, actionScale,
bubbleStyle?, interactiveCards?, scriptEnablement?, renderingAdapters?}``; both scales
0.75–1.5 in steps of 0.05; PUT is a full replace that rejects unknown fields; omission or DELETE
restores a field's default (optional fields are then absent); the body is at most 384 KiB.

The presentation protocol the spec cites for ``bubbleStyle`` is not available, so it is stored
as a bounded flat object (see :func:`_bubble_style`); docs/webui.md documents every shape.
"""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import urlsplit

from innkeeper_tavern.state.resources.library import ID_PATTERN

from .rules import check_keys, check_scale, require_object
from .store import SettingsInvalid

__all__ = [
    "CONVERSATION_SETTINGS_FILE",
    "CONVERSATION_SETTINGS_INVALID",
    "CONVERSATION_SETTINGS_MAX_BYTES",
    "MAX_BUBBLE_STYLE_KEYS",
    "MAX_OVERRIDE_ENTRIES",
    "default_conversation_settings",
    "validate_appearance",
    "validate_conversation_settings",
]

CONVERSATION_SETTINGS_FILE: Final = "conversation-settings.json"
CONVERSATION_SETTINGS_INVALID: Final = "CONVERSATION_SETTINGS_INVALID"
#: The body limit is 384 KiB, and the file holds the same document
#: (`docs/contract/resources.md#conversation-settings`).
CONVERSATION_SETTINGS_MAX_BYTES: Final = 384 * 1024
#: ``scriptEnablement`` and ``renderingAdapters`` hold up to 128 entries each.
MAX_OVERRIDE_ENTRIES: Final = 128
#: ``bubbleStyle`` bounds (ours: the presentation protocol is not available).
MAX_BUBBLE_STYLE_KEYS: Final = 64
MAX_BUBBLE_STYLE_STRING: Final = 512
_STYLE_KEY: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
#: Script identity keys: an original script id, a source SHA-256, or a source-plus-name digest.
_SCRIPT_KEY: Final = re.compile(r"id:[^\x00-\x1f\x7f]{1,200}|(sha256|sha256-name):[0-9a-f]{64}")
MAX_SOURCE_URL: Final = 2048
RENDERING_MODES: Final = ("builtin", "original")
_SCHEMA: Final = 1
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_OPTIONAL: Final = ("bubbleStyle", "interactiveCards", "scriptEnablement", "renderingAdapters")
#: The fields a timeline's ``appearance`` may carry (all optional).
_APPEARANCE: Final = (
    "schemaVersion",
    "textScale",
    "actionScale",
    "bubbleStyle",
    "interactiveCards",
)

_CODE: Final = CONVERSATION_SETTINGS_INVALID


def default_conversation_settings() -> dict[str, Any]:
    """The document served until one is saved (and after DELETE)."""
    return {"schemaVersion": _SCHEMA, "textScale": 1.0, "actionScale": 1.0}


def validate_conversation_settings(value: Any) -> dict[str, Any]:
    """A PUT body (or the saved file) as the normalized document (full replace)."""
    body = require_object(value, _CODE, "conversation-settings")
    check_keys(
        body,
        _CODE,
        "conversation-settings",
        required=("textScale", "actionScale"),
        optional=(*_OPTIONAL, "schemaVersion"),
    )
    _schema(body, "conversation-settings")
    doc: dict[str, Any] = {
        "schemaVersion": _SCHEMA,
        "textScale": check_scale(body["textScale"], _CODE, "textScale"),
        "actionScale": check_scale(body["actionScale"], _CODE, "actionScale"),
    }
    if "bubbleStyle" in body:
        doc["bubbleStyle"] = _bubble_style(body["bubbleStyle"])
    if "interactiveCards" in body:
        doc["interactiveCards"] = _interactive_cards(body["interactiveCards"])
    if "scriptEnablement" in body:
        doc["scriptEnablement"] = _script_enablement(body["scriptEnablement"])
    if "renderingAdapters" in body:
        doc["renderingAdapters"] = _rendering_adapters(body["renderingAdapters"])
    return doc


def validate_appearance(value: Any) -> None:
    """Check a timeline's ``ext.pmpDshTavern.appearance``: the presentation part of this
    document, ``{schemaVersion?: 1, textScale?, actionScale?, bubbleStyle?, interactiveCards?}``,
    every field optional and under the same rules; unknown fields are refused. Nothing is
    normalized (the caller stores the client's bytes); raises :class:`SettingsInvalid`."""
    body = require_object(value, _CODE, "appearance")
    check_keys(body, _CODE, "appearance", required=(), optional=_APPEARANCE)
    _schema(body, "appearance")
    for scale in ("textScale", "actionScale"):
        if scale in body:
            check_scale(body[scale], _CODE, scale)
    if "bubbleStyle" in body:
        _bubble_style(body["bubbleStyle"])
    if "interactiveCards" in body:
        _interactive_cards(body["interactiveCards"])


def _interactive_cards(value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingsInvalid(_CODE, "interactiveCards must be a boolean")
    return value


def _schema(body: dict[str, Any], what: str) -> None:
    if "schemaVersion" in body and (
        isinstance(body["schemaVersion"], bool) or body["schemaVersion"] != _SCHEMA
    ):
        raise SettingsInvalid(_CODE, f"{what}.schemaVersion must be {_SCHEMA}")


def _bubble_style(value: Any) -> dict[str, Any]:
    """A flat object: up to 64 names (a letter, then letters, digits, ``_`` or ``-``; ≤ 64
    characters) whose values are booleans, finite numbers or strings of ≤ 512 characters
    without control characters."""
    style = require_object(value, _CODE, "bubbleStyle")
    if len(style) > MAX_BUBBLE_STYLE_KEYS:
        raise SettingsInvalid(_CODE, f"bubbleStyle has more than {MAX_BUBBLE_STYLE_KEYS} fields")
    for key, item in style.items():
        if not _STYLE_KEY.fullmatch(key):
            raise SettingsInvalid(_CODE, f"bubbleStyle field name must match {_STYLE_KEY.pattern}")
        if isinstance(item, bool):
            continue
        if isinstance(item, (int, float)):
            if item != item or item in (float("inf"), float("-inf")):
                raise SettingsInvalid(_CODE, f"bubbleStyle.{key} must be finite")
            continue
        if isinstance(item, str):
            if len(item) > MAX_BUBBLE_STYLE_STRING or _CONTROL.search(item):
                raise SettingsInvalid(
                    _CODE,
                    f"bubbleStyle.{key} must be at most {MAX_BUBBLE_STYLE_STRING} characters "
                    "without control characters",
                )
            continue
        raise SettingsInvalid(_CODE, f"bubbleStyle.{key} must be a boolean, number or string")
    return dict(style)


def _entries(value: Any, what: str, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    block = require_object(value, _CODE, what)
    check_keys(block, _CODE, what, required=("entries",), optional=("schemaVersion",))
    _schema(block, what)
    entries = block["entries"]
    if not isinstance(entries, list):
        raise SettingsInvalid(_CODE, f"{what}.entries must be an array")
    if len(entries) > MAX_OVERRIDE_ENTRIES:
        raise SettingsInvalid(_CODE, f"{what} holds at most {MAX_OVERRIDE_ENTRIES} entries")
    out: list[dict[str, Any]] = []
    for index, entry in enumerate(entries):
        where = f"{what}.entries[{index}]"
        item = require_object(entry, _CODE, where)
        check_keys(item, _CODE, where, required=fields, optional=())
        if not isinstance(item["owner"], str) or not ID_PATTERN.fullmatch(item["owner"]):
            raise SettingsInvalid(
                _CODE,
                f"{where}.owner must be a character/preset id or a workspace SHA-256 "
                f"({ID_PATTERN.pattern})",
            )
        out.append(dict(item))
    return out


def _script_enablement(value: Any) -> dict[str, Any]:
    """``{schemaVersion: 1, entries: [{owner, key, enabled}]}``; one choice per identity."""
    what = "scriptEnablement"
    entries = _entries(value, what, ("owner", "key", "enabled"))
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        where = f"{what}.entries[{index}]"
        key = entry["key"]
        if not isinstance(key, str) or not _SCRIPT_KEY.fullmatch(key):
            raise SettingsInvalid(
                _CODE,
                f"{where}.key must be id:<original id>, sha256:<source digest> or "
                "sha256-name:<source-plus-name digest>",
            )
        if not isinstance(entry["enabled"], bool):
            raise SettingsInvalid(_CODE, f"{where}.enabled must be a boolean")
        identity = (entry["owner"], key)
        if identity in seen:
            # Order never participates in identity: two choices for one script are ambiguous.
            raise SettingsInvalid(_CODE, f"{where} repeats the identity of an earlier entry")
        seen.add(identity)
    return {"schemaVersion": _SCHEMA, "entries": entries}


def _rendering_adapters(value: Any) -> dict[str, Any]:
    """``{schemaVersion: 1, entries: [{owner, source, mode}]}``; ``source`` an HTTPS URL."""
    what = "renderingAdapters"
    entries = _entries(value, what, ("owner", "source", "mode"))
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        where = f"{what}.entries[{index}]"
        _check_https(entry["source"], f"{where}.source")
        if entry["mode"] not in RENDERING_MODES:
            raise SettingsInvalid(_CODE, f"{where}.mode must be builtin or original")
        identity = (entry["owner"], entry["source"])
        if identity in seen:
            raise SettingsInvalid(_CODE, f"{where} repeats the owner and source of an entry")
        seen.add(identity)
    return {"schemaVersion": _SCHEMA, "entries": entries}


def _check_https(value: Any, where: str) -> None:
    if (
        not isinstance(value, str)
        or len(value) > MAX_SOURCE_URL
        or _CONTROL.search(value)
        or " " in value
    ):
        raise SettingsInvalid(_CODE, f"{where} must be an HTTPS URL of ≤ {MAX_SOURCE_URL} chars")
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is None or parts.scheme != "https" or not host or "@" in parts.netloc:
        raise SettingsInvalid(_CODE, f"{where} must be an https:// URL with a host and no userinfo")
