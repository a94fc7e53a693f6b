"""Recognize what a SillyTavern file is, for ``innkeeper import`` (pure: bytes in, verdict out).

Order: PNG → character card; JSON objects → user envelope, character card, Chat Completion preset,
world book; anything else is skipped with a reason (regex scripts, ST settings, unknown JSON).
"""

from __future__ import annotations

from typing import Final, Literal

from innkeeper_tavern.pure.formats.card import CARD_LIMITS, is_card_document, parse_card_bytes
from innkeeper_tavern.pure.formats.errors import FormatError, decode_json
from innkeeper_tavern.pure.formats.guards import BOOK_DOCUMENT_LIMITS, StructureLimitError
from innkeeper_tavern.pure.formats.png import is_png
from innkeeper_tavern.pure.formats.preset import PRESET_INVALID, is_legacy_preset, parse_preset_json
from innkeeper_tavern.pure.formats.user import parse_user_import
from innkeeper_tavern.pure.formats.worldbook import (
    WorldBookFormatError,
    detect_world_book_format,
    parse_any_world_book,
)

FileKind = Literal["character", "preset", "world-book", "user", "skip"]

_REGEX_KEYS: Final = frozenset({"findRegex", "replaceString", "scriptName"})


def classify(data: bytes) -> tuple[FileKind, str]:
    """``(kind, reason)``: what ``data`` is, or ``("skip", why)``."""
    if is_png(data):
        return "character", "PNG card"
    try:
        doc = decode_json(data, what="file", limits=CARD_LIMITS)
    except FormatError as exc:
        return "skip", exc.message
    if not isinstance(doc, dict):
        return "skip", "JSON root is not an object"
    if doc.get("format") == "pmp-dsh-tavern" and doc.get("resourceType") == "user":
        return "user", "Tavern user JSON"
    if is_card_document(doc):
        return "character", "JSON card"
    if isinstance(doc.get("prompts"), list) or is_legacy_preset(doc):
        return "preset", "Chat Completion preset"
    if detect_world_book_format(doc) is not None:
        return "world-book", "world book"
    if set(doc) >= _REGEX_KEYS:
        return "skip", "regex script: attach it with PUT …/regex-scripts on a preset or card"
    if "oai_settings" in doc or "power_user" in doc:
        return "skip", "SillyTavern settings file, not a preset"
    return "skip", "not a recognized SillyTavern card, preset or world book"


#: The code of a file that its kind's parser reads but :func:`classify` calls something else.
_NOT_THIS_KIND: Final = {
    "character": "CHARACTER_CARD_INVALID",
    "preset": PRESET_INVALID,
    "world-book": "WORLD_BOOK_ROOT_INVALID",
    "user": "USER_IMPORT_UNSUPPORTED",
}


def refusal(kind: FileKind, data: bytes, reason: str) -> FormatError:
    """Why ``data``, found where files of ``kind`` live (a SillyTavern folder's ``worlds/``…),
    is no ``kind``: the error of that kind's own parser, so the refusal names the field like an
    HTTP import of the same file would (code and path); ``reason`` (what :func:`classify` took it
    for) when that parser reads it after all.
    """
    try:
        if kind == "character":
            parse_card_bytes(data)
        elif kind == "preset":
            parse_preset_json(data)
        elif kind == "user":
            parse_user_import(data)
        elif kind == "world-book":
            doc = decode_json(data, what="world book", limits=BOOK_DOCUMENT_LIMITS)
            if not isinstance(doc, dict):
                return FormatError("WORLD_BOOK_ROOT_INVALID", "a world book must be an object")
            parse_any_world_book(doc)
    except FormatError as exc:
        return exc
    except StructureLimitError as exc:
        return FormatError.from_structure(exc)
    except WorldBookFormatError as exc:
        return FormatError(exc.code, str(exc), 400, exc.path)
    return FormatError(_NOT_THIS_KIND.get(kind, "INVALID_BODY"), f"not a {kind}: {reason}")
