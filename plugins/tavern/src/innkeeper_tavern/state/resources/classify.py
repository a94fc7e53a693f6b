"""Recognize what a SillyTavern file is, for ``innkeeper import`` (pure: bytes in, verdict out).

Order: PNG → character card; JSON objects → user envelope, character card, Chat Completion preset,
world book; anything else is skipped with a reason (regex scripts, ST settings, unknown JSON).
"""

from __future__ import annotations

from typing import Final, Literal

from innkeeper_tavern.pure.formats.card import CARD_LIMITS, is_card_document
from innkeeper_tavern.pure.formats.errors import FormatError, decode_json
from innkeeper_tavern.pure.formats.png import is_png
from innkeeper_tavern.pure.formats.preset import is_legacy_preset
from innkeeper_tavern.pure.formats.worldbook import detect_world_book_format

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
