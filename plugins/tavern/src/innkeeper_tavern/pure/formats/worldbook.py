"""The one normalized world-book (lorebook) model, its parsers and its exporters.

Two SillyTavern shapes exist (`docs/worldbook.md#wi-formats`):

* a standalone world-info file: ``{"entries": {"<uid>": {...camelCase ST fields...}}, ...}``;
* a card-embedded ``character_book``: ``{"entries": [{keys, content, enabled, insertion_order, ...,
  "extensions": {...snake_case ST fields...}}], "name"?, "scan_depth"?, ...}`` (V2 and V3).

Both normalize into :class:`WorldBook` / :class:`WorldBookEntry`. Every field of current ST is a
typed attribute with ST's default for old files (legacy files with only a handful of fields are
filled, never rejected). Fields this model does not know are kept losslessly: per entry in
``extra`` (unknown top-level keys) and ``extensions`` (unknown extension keys), per book in
``extra`` and ``extensions``. Export writes either shape back.

Bad field values never reject a book: the field takes its default and a
:class:`WorldBookDiagnostic` records what happened. Structure limits
                             (`docs/contract/world-info.md#structure-guard`) are enforced by
                             :mod:`innkeeper_tavern.pure.formats.guards` before anything is
                             normalized.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any, Final, Literal

import msgspec

from innkeeper_tavern.pure.formats.guards import (
    book_limits,
    check_book_entry_count,
    check_structure,
)

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_GROUP_WEIGHT",
    "DEFAULT_ORDER",
    "DEFAULT_PROBABILITY",
    "CharacterFilter",
    "Position",
    "Role",
    "SelectiveLogic",
    "SourceFormat",
    "WorldBook",
    "WorldBookDiagnostic",
    "WorldBookEntry",
    "WorldBookFormatError",
    "detect_world_book_format",
    "export_character_book",
    "export_world_book",
    "parse_any_world_book",
    "parse_character_book",
    "parse_world_book",
]

#: ST ``DEFAULT_DEPTH`` for @depth entries (`docs/worldbook.md#wi-entry-fields`).
DEFAULT_DEPTH: Final = 4
#: ST default insertion ``order`` (docs/worldbook.md#wi-entry-fields).
DEFAULT_ORDER: Final = 100
#: ST ``DEFAULT_WEIGHT`` for inclusion groups (docs/worldbook.md#wi-entry-fields).
DEFAULT_GROUP_WEIGHT: Final = 100
#: ST default activation probability in percent (docs/worldbook.md#wi-entry-fields).
DEFAULT_PROBABILITY: Final = 100
#: ST caps scan depth at ``MAX_SCAN_DEPTH`` messages (docs/worldbook.md#wi-scan-buffer).
MAX_SCAN_DEPTH: Final = 1_000
#: Integers outside JavaScript's safe range are not numbers ST could have written; they fall back
#: to the default (and stay encodable as 64-bit JSON integers).
MAX_SAFE_INTEGER: Final = 2**53 - 1

SourceFormat = Literal["st", "character_book"]


class Position(IntEnum):
    """``world_info_position``: where an entry is inserted (docs/worldbook.md#wi-entry-fields)."""

    BEFORE_CHAR = 0
    AFTER_CHAR = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    EM_TOP = 5
    EM_BOTTOM = 6
    OUTLET = 7


class Role(IntEnum):
    """``extension_prompt_roles``: an @depth entry's role (docs/worldbook.md#wi-entry-fields)."""

    SYSTEM = 0
    USER = 1
    ASSISTANT = 2


class SelectiveLogic(IntEnum):
    """``selectiveLogic`` (docs/worldbook.md#wi-entry-fields): how secondary keys combine."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class WorldBookFormatError(ValueError):
    """The document is not a world book at all (wrong root or ``entries`` container).

    ``path`` is the JSON path of the offending value (``$`` for the root).
    """

    def __init__(self, code: str, message: str, path: str = "$") -> None:
        super().__init__(message)
        self.code = code
        self.path = path


class WorldBookDiagnostic(msgspec.Struct, frozen=True, kw_only=True):
    """A field that could not be taken as written; the default was used instead."""

    code: str
    path: str
    message: str
    severity: Literal["info", "warning"] = "warning"


class CharacterFilter(msgspec.Struct, frozen=True, kw_only=True):
    """``characterFilter`` (docs/worldbook.md#wi-entry-fields).

    Names are avatar file names without extension, tags are ids.
    """

    is_exclude: bool = False
    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


class WorldBookEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One lorebook entry with every field of current ST, named in snake_case.

    Fields and defaults: docs/worldbook.md#wi-entry-fields.

    ``None`` in the nullable fields means "use the global setting", exactly as in ST.
    ``delay_until_recursion`` is a recursion level (0 = off; legacy ``true`` = 1).
    ``sticky``/``cooldown``/``delay`` are message counts (0 or ``None`` = off; ``None`` is kept
    apart from 0 only so export writes back what was read).
    """

    uid: int | str
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    comment: str = ""
    content: str = ""
    constant: bool = False
    vectorized: bool = False
    selective: bool = True
    selective_logic: SelectiveLogic = SelectiveLogic.AND_ANY
    add_memo: bool = False
    order: int = DEFAULT_ORDER
    position: Position = Position.BEFORE_CHAR
    disable: bool = False
    ignore_budget: bool = False
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: int = 0
    match_persona_description: bool = False
    match_character_description: bool = False
    match_character_personality: bool = False
    match_character_depth_prompt: bool = False
    match_scenario: bool = False
    match_creator_notes: bool = False
    probability: float = DEFAULT_PROBABILITY
    use_probability: bool = True
    depth: int = DEFAULT_DEPTH
    outlet_name: str = ""
    group: str = ""
    group_override: bool = False
    group_weight: float = DEFAULT_GROUP_WEIGHT
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    use_group_scoring: bool | None = None
    automation_id: str = ""
    role: Role = Role.SYSTEM
    sticky: int | None = None
    cooldown: int | None = None
    delay: int | None = None
    triggers: tuple[str, ...] = ()
    character_filter: CharacterFilter | None = None
    display_index: int | None = None
    #: The map key of a standalone file (ST writes ``str(uid)``); ``None`` for array books.
    source_key: str | None = None
    #: Unknown keys of the entry's ``extensions`` object (known ST keys are lifted out).
    extensions: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Unknown top-level keys of the entry, kept verbatim for export.
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class WorldBook(msgspec.Struct, frozen=True, kw_only=True):
    """A normalized world book; ``entries`` keep the file's enumeration order.

    For a standalone file the order is JavaScript ``Object.entries`` order (integer-like keys
    ascending, then the rest in insertion order), because ST's stable sorts break ties with it.
    """

    entries: tuple[WorldBookEntry, ...] = ()
    name: str | None = None
    description: str | None = None
    #: ``character_book.scan_depth`` (ST ignores it; the activation engine may honour it).
    scan_depth: int | None = None
    #: ``character_book.token_budget``.
    token_budget: int | None = None
    #: ``character_book.recursive_scanning``.
    recursive_scanning: bool | None = None
    source_format: SourceFormat = "st"
    extensions: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Unknown top-level keys (``originalData``, ``_meta``, V3 extras, ...), kept verbatim.
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    diagnostics: tuple[WorldBookDiagnostic, ...] = ()


# --------------------------------------------------------------------------- coercion helpers


class _Diag:
    """Collects diagnostics while one document is normalized."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[WorldBookDiagnostic] = []

    def warn(self, code: str, path: str, message: str) -> None:
        self.items.append(WorldBookDiagnostic(code=code, path=path, message=message))


_JS_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_MISSING: Final = object()


def _js_number(value: Any) -> float | None:
    """Numeric value of ``value`` as ST's loose JSON sees it (numbers and numeric strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return float(value)  # finite whenever it converts at all
        except OverflowError:  # JSON allows 10**309; no double holds it
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and _JS_NUMBER.match(value.strip()):
        number = float(value.strip())
        return number if math.isfinite(number) else None
    return None


def _bool(raw: Any, default: bool, path: str, diag: _Diag) -> bool:
    if raw is None or raw is _MISSING:
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int | float) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    diag.warn("invalid-boolean", path, "expected a boolean; using the default")
    return default


def _opt_bool(raw: Any, path: str, diag: _Diag) -> bool | None:
    if raw is None or raw is _MISSING:
        return None
    return _bool(raw, False, path, diag)


def _int(raw: Any, default: int, path: str, diag: _Diag, *, minimum: int | None = None) -> int:
    if raw is None or raw is _MISSING:
        return default
    number = _js_number(raw)
    if number is None or abs(number) > MAX_SAFE_INTEGER:
        diag.warn("invalid-number", path, "expected a number; using the default")
        return default
    value = round(number)
    if minimum is not None and value < minimum:
        diag.warn("number-out-of-range", path, f"below {minimum}; using the default")
        return default
    return value


def _opt_int(raw: Any, path: str, diag: _Diag, *, minimum: int = 0) -> int | None:
    if raw is None or raw is _MISSING:
        return None
    number = _js_number(raw)
    if number is None or round(number) < minimum or number > MAX_SAFE_INTEGER:
        diag.warn("invalid-number", path, "expected a non-negative number; treating as unset")
        return None
    return round(number)


def _float(raw: Any, default: float, path: str, diag: _Diag) -> float:
    if raw is None or raw is _MISSING:
        return default
    number = _js_number(raw)
    if number is None:
        diag.warn("invalid-number", path, "expected a number; using the default")
        return default
    return number


def _str(raw: Any, default: str, path: str, diag: _Diag) -> str:
    if raw is None or raw is _MISSING:
        return default
    if isinstance(raw, str):
        return raw
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return str(raw)
    diag.warn("invalid-string", path, "expected a string; using the default")
    return default


def _str_list(raw: Any, path: str, diag: _Diag) -> tuple[str, ...]:
    if raw is None or raw is _MISSING:
        return ()
    if isinstance(raw, str):
        # Some exporters write a comma-joined string (RisuAI-style); ST itself writes arrays.
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if not isinstance(raw, list):
        diag.warn("invalid-string-array", path, "expected an array of strings")
        return ()
    out: list[str] = []
    for index, item in enumerate(raw):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out.append(str(item))
        else:
            diag.warn("invalid-string-array-item", f"{path}[{index}]", "dropped a non-string")
    return tuple(out)


def _enum_int(
    raw: Any,
    enum: type[IntEnum],
    default: IntEnum,
    path: str,
    diag: _Diag,
    aliases: Mapping[str, int] | None = None,
) -> int:
    if raw is None or raw is _MISSING:
        return int(default)
    if isinstance(raw, str) and aliases is not None:
        alias = aliases.get(raw.strip().lower())
        if alias is not None:
            return alias
    number = _js_number(raw)
    if number is not None and number.is_integer() and int(number) in enum._value2member_map_:
        return int(number)
    diag.warn(f"unknown-{enum.__name__.lower()}", path, f"unknown value {raw!r}; using default")
    return int(default)


_POSITION_ALIASES: Final[Mapping[str, int]] = {
    "before_char": 0,
    "after_char": 1,
    "before_character_definition": 0,
    "after_character_definition": 1,
    "before_author_note": 2,
    "after_author_note": 3,
    "an_top": 2,
    "an_bottom": 3,
    "at_depth": 4,
    "before_example_messages": 5,
    "after_example_messages": 6,
    "outlet": 7,
}
_ROLE_ALIASES: Final[Mapping[str, int]] = {"system": 0, "user": 1, "assistant": 2}
_LOGIC_ALIASES: Final[Mapping[str, int]] = {"and_any": 0, "not_all": 1, "not_any": 2, "and_all": 3}


def _delay_level(raw: Any, path: str, diag: _Diag) -> int:
    if raw is None or raw is _MISSING or raw is False:
        return 0
    if raw is True:
        return 1
    return _int(raw, 0, path, diag, minimum=0)


def _character_filter(raw: Any, path: str, diag: _Diag) -> CharacterFilter | None:
    if raw is None or raw is _MISSING:
        return None
    if not isinstance(raw, dict):
        diag.warn("invalid-character-filter", path, "expected an object")
        return None
    return CharacterFilter(
        is_exclude=_bool(raw.get("isExclude", _MISSING), False, f"{path}.isExclude", diag),
        names=_str_list(raw.get("names", _MISSING), f"{path}.names", diag),
        tags=_str_list(raw.get("tags", _MISSING), f"{path}.tags", diag),
    )


# --------------------------------------------------------------------------- the field table

# (model attribute, ST camelCase name, character_book extension snake_case name, kind)
# Kinds: bool, obool, int, oint, float, str, strs, pos, role, logic, delay.
_FIELDS: Final[tuple[tuple[str, str, str, str], ...]] = (
    ("vectorized", "vectorized", "vectorized", "bool"),
    ("selective_logic", "selectiveLogic", "selectiveLogic", "logic"),
    ("add_memo", "addMemo", "add_memo", "bool"),
    ("ignore_budget", "ignoreBudget", "ignore_budget", "bool"),
    ("exclude_recursion", "excludeRecursion", "exclude_recursion", "bool"),
    ("prevent_recursion", "preventRecursion", "prevent_recursion", "bool"),
    ("delay_until_recursion", "delayUntilRecursion", "delay_until_recursion", "delay"),
    ("match_persona_description", "matchPersonaDescription", "match_persona_description", "bool"),
    (
        "match_character_description",
        "matchCharacterDescription",
        "match_character_description",
        "bool",
    ),
    (
        "match_character_personality",
        "matchCharacterPersonality",
        "match_character_personality",
        "bool",
    ),
    (
        "match_character_depth_prompt",
        "matchCharacterDepthPrompt",
        "match_character_depth_prompt",
        "bool",
    ),
    ("match_scenario", "matchScenario", "match_scenario", "bool"),
    ("match_creator_notes", "matchCreatorNotes", "match_creator_notes", "bool"),
    ("probability", "probability", "probability", "float"),
    ("use_probability", "useProbability", "useProbability", "bool"),
    ("depth", "depth", "depth", "int"),
    ("outlet_name", "outletName", "outlet_name", "str"),
    ("group", "group", "group", "str"),
    ("group_override", "groupOverride", "group_override", "bool"),
    ("group_weight", "groupWeight", "group_weight", "float"),
    ("scan_depth", "scanDepth", "scan_depth", "oint"),
    ("match_whole_words", "matchWholeWords", "match_whole_words", "obool"),
    ("use_group_scoring", "useGroupScoring", "use_group_scoring", "obool"),
    ("automation_id", "automationId", "automation_id", "str"),
    ("role", "role", "role", "role"),
    ("sticky", "sticky", "sticky", "oint"),
    ("cooldown", "cooldown", "cooldown", "oint"),
    ("delay", "delay", "delay", "oint"),
    ("triggers", "triggers", "triggers", "strs"),
    ("display_index", "displayIndex", "display_index", "oint"),
)

_DEFAULT_ENTRY: Final = WorldBookEntry(uid=0)


def _convert(kind: str, attr: str, raw: Any, path: str, diag: _Diag) -> Any:
    default = getattr(_DEFAULT_ENTRY, attr)
    if kind == "bool":
        return _bool(raw, default, path, diag)
    if kind == "obool":
        return _opt_bool(raw, path, diag)
    if kind == "int":
        return _int(raw, default, path, diag)
    if kind == "oint":
        return _opt_int(raw, path, diag)
    if kind == "float":
        return _float(raw, default, path, diag)
    if kind == "str":
        return _str(raw, default, path, diag)
    if kind == "strs":
        return _str_list(raw, path, diag)
    if kind == "pos":
        return Position(_enum_int(raw, Position, default, path, diag, _POSITION_ALIASES))
    if kind == "role":
        return Role(_enum_int(raw, Role, default, path, diag, _ROLE_ALIASES))
    if kind == "logic":
        return SelectiveLogic(_enum_int(raw, SelectiveLogic, default, path, diag, _LOGIC_ALIASES))
    if kind == "delay":
        return _delay_level(raw, path, diag)
    raise AssertionError(kind)  # pragma: no cover - table is static


def _js_key_order(keys: Iterable[str]) -> list[str]:
    """JavaScript ``Object.keys`` order: canonical array indices ascending, then the rest."""
    numeric: list[tuple[int, str]] = []
    other: list[str] = []
    for key in keys:
        if key.isascii() and key.isdigit() and (key == "0" or not key.startswith("0")):
            value = int(key)
            if value < 2**32 - 1:
                numeric.append((value, key))
                continue
        other.append(key)
    numeric.sort()
    return [key for _, key in numeric] + other


def _uid(raw: Any, fallback: int | str) -> int | str:
    if isinstance(raw, bool):
        return fallback
    if isinstance(raw, int):
        return raw if abs(raw) <= MAX_SAFE_INTEGER else str(raw)
    if isinstance(raw, float) and raw.is_integer() and abs(raw) <= MAX_SAFE_INTEGER:
        return int(raw)
    if isinstance(raw, str) and raw.strip():
        text = raw.strip()
        if text.isascii() and text.isdigit() and int(text) <= MAX_SAFE_INTEGER:
            return int(text)
        return text
    return fallback


# --------------------------------------------------------------------------- standalone (ST)

_ST_KNOWN: Final = frozenset(
    {
        "uid",
        "key",
        "keysecondary",
        "comment",
        "content",
        "constant",
        "selective",
        "order",
        "position",
        "disable",
        "characterFilter",
        "extensions",
    }
    | {st for _, st, _, _ in _FIELDS}
)


def _parse_st_entry(raw: dict[str, Any], key: str, path: str, diag: _Diag) -> WorldBookEntry:
    values: dict[str, Any] = {}
    for attr, st_name, _, kind in _FIELDS:
        values[attr] = _convert(kind, attr, raw.get(st_name, _MISSING), f"{path}.{st_name}", diag)
    extensions = raw.get("extensions")
    return WorldBookEntry(
        uid=_uid(raw.get("uid"), _uid(key, key)),
        keys=_str_list(raw.get("key", _MISSING), f"{path}.key", diag),
        secondary_keys=_str_list(raw.get("keysecondary", _MISSING), f"{path}.keysecondary", diag),
        comment=_str(raw.get("comment", _MISSING), "", f"{path}.comment", diag),
        content=_str(raw.get("content", _MISSING), "", f"{path}.content", diag),
        constant=_bool(raw.get("constant", _MISSING), False, f"{path}.constant", diag),
        selective=_bool(raw.get("selective", _MISSING), True, f"{path}.selective", diag),
        order=_int(raw.get("order", _MISSING), DEFAULT_ORDER, f"{path}.order", diag),
        position=_convert(
            "pos", "position", raw.get("position", _MISSING), f"{path}.position", diag
        ),
        disable=_bool(raw.get("disable", _MISSING), False, f"{path}.disable", diag),
        case_sensitive=_opt_bool(raw.get("caseSensitive", _MISSING), f"{path}.caseSensitive", diag),
        character_filter=_character_filter(
            raw.get("characterFilter", _MISSING), f"{path}.characterFilter", diag
        ),
        source_key=key,
        extensions=dict(extensions) if isinstance(extensions, dict) else {},
        extra={k: v for k, v in raw.items() if k not in _ST_KNOWN and k != "caseSensitive"},
        **values,
    )


def _check(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise WorldBookFormatError("WORLD_BOOK_ROOT_INVALID", "a world book must be a JSON object")
    count = _entry_count(raw)
    check_book_entry_count(count)  # before the walk: a huge book gets the entry-cap error
    check_structure(raw, book_limits(count))
    return raw


def _entry_count(raw: dict[str, Any]) -> int:
    """Entries of a book document (also inside a ``lorebook_v3`` wrapper), before any walk."""
    data = raw.get("data")
    container = raw.get("entries", data.get("entries") if isinstance(data, dict) else None)
    return len(container) if isinstance(container, (dict, list)) else 0


def parse_world_book(raw: dict[str, Any]) -> WorldBook:
    """Normalize a standalone ST world-info document (``entries`` keyed by uid strings).

    Runs the shared structure guard first (raises
    :class:`~innkeeper_tavern.pure.formats.guards.StructureLimitError`). An ``entries`` *array* is
    accepted too (some tools write one) and read with the same camelCase field names. Raises
    :class:`WorldBookFormatError` when the root or ``entries`` has the wrong type.
    """
    doc = _check(raw)
    container = doc.get("entries")
    diag = _Diag()
    entries: list[WorldBookEntry] = []
    items: list[tuple[str, Any]]
    if isinstance(container, dict):
        check_book_entry_count(len(container))
        items = [(k, container[k]) for k in _js_key_order(container.keys())]
    elif isinstance(container, list):
        check_book_entry_count(len(container))
        items = [(str(i), v) for i, v in enumerate(container)]
    else:
        raise WorldBookFormatError(
            "WORLD_BOOK_ENTRIES_INVALID", "a world book needs an 'entries' object", "$.entries"
        )
    for key, value in items:
        path = f"$.entries.{key}"
        if not isinstance(value, dict):
            diag.warn("invalid-entry", path, "entry is not an object; skipped")
            continue
        entries.append(_parse_st_entry(value, key, path, diag))
    _warn_duplicate_uids(entries, diag)
    extensions = doc.get("extensions")
    return WorldBook(
        entries=tuple(entries),
        name=doc["name"] if isinstance(doc.get("name"), str) else None,
        description=doc["description"] if isinstance(doc.get("description"), str) else None,
        source_format="st",
        extensions=dict(extensions) if isinstance(extensions, dict) else {},
        extra={
            k: v
            for k, v in doc.items()
            if k not in ("entries", "name", "description", "extensions")
        },
        diagnostics=tuple(diag.items),
    )


# --------------------------------------------------------------------------- character_book

_CB_TOP: Final = frozenset(
    {
        "id",
        "keys",
        "secondary_keys",
        "comment",
        "content",
        "constant",
        "selective",
        "insertion_order",
        "enabled",
        "position",
        "case_sensitive",
        "extensions",
    }
)
_CB_EXT_KNOWN: Final = frozenset(
    {ext for _, _, ext, _ in _FIELDS}
    | {"position", "case_sensitive", "character_filter", "characterFilter"}
)


def _parse_cb_entry(raw: dict[str, Any], index: int, path: str, diag: _Diag) -> WorldBookEntry:
    ext_raw = raw.get("extensions")
    ext: dict[str, Any] = ext_raw if isinstance(ext_raw, dict) else {}
    values: dict[str, Any] = {}
    for attr, _, ext_name, kind in _FIELDS:
        # ST writes its own fields under `extensions`; a few exporters flatten them.
        source = ext.get(ext_name, raw.get(ext_name, _MISSING))
        values[attr] = _convert(kind, attr, source, f"{path}.extensions.{ext_name}", diag)
    if "position" in ext and ext["position"] is not None:
        position = _convert("pos", "position", ext["position"], f"{path}.extensions.position", diag)
    else:
        # docs/worldbook.md#wi-formats: `before_char` → 0, anything else → 1 (after_char).
        top = raw.get("position")
        position = Position.BEFORE_CHAR if top == "before_char" else Position.AFTER_CHAR
    case_raw = ext.get("case_sensitive", _MISSING)
    if case_raw is _MISSING or case_raw is None:
        # ST ignores the spec's top-level flag; we honour it when ST's own field is absent.
        case_raw = raw.get("case_sensitive", _MISSING)
    if "enabled" not in raw:
        diag.warn("missing-enabled", f"{path}.enabled", "no 'enabled' field: disabled, as in ST")
    filt = ext.get("character_filter", ext.get("characterFilter", _MISSING))
    return WorldBookEntry(
        uid=_uid(raw.get("id"), index),
        keys=_str_list(raw.get("keys", _MISSING), f"{path}.keys", diag),
        secondary_keys=_str_list(
            raw.get("secondary_keys", _MISSING), f"{path}.secondary_keys", diag
        ),
        comment=_str(raw.get("comment", raw.get("name", _MISSING)), "", f"{path}.comment", diag),
        content=_str(raw.get("content", _MISSING), "", f"{path}.content", diag),
        constant=_bool(raw.get("constant", _MISSING), False, f"{path}.constant", diag),
        # docs/worldbook.md#wi-formats: a book entry without `selective` ignores its secondary keys.
        selective=_bool(raw.get("selective", _MISSING), False, f"{path}.selective", diag),
        order=_int(
            raw.get("insertion_order", _MISSING), DEFAULT_ORDER, f"{path}.insertion_order", diag
        ),
        position=position,
        disable=not _bool(raw.get("enabled", _MISSING), False, f"{path}.enabled", diag),
        case_sensitive=_opt_bool(case_raw, f"{path}.extensions.case_sensitive", diag),
        character_filter=_character_filter(filt, f"{path}.extensions.character_filter", diag),
        source_key=None,
        extensions={k: v for k, v in ext.items() if k not in _CB_EXT_KNOWN},
        extra={
            k: v
            for k, v in raw.items()
            if k not in _CB_TOP
            and not (k in _CB_EXT_KNOWN and k not in ext)
            and not (k == "use_regex" and v is True)
        },
        **values,
    )


def parse_character_book(raw: dict[str, Any]) -> WorldBook:
    """Normalize a card-embedded ``character_book`` (V2 or V3; entries array, snake_case).

    Accepts a V3 ``{"spec": "lorebook_v3", "data": {...}}`` wrapper too. Runs the shared structure
    guard first. Raises :class:`WorldBookFormatError` if the root or ``entries`` is malformed.
    """
    doc = _check(raw)
    entries_path = "$.entries"
    if doc.get("spec") == "lorebook_v3" and isinstance(doc.get("data"), dict):
        doc = doc["data"]
        entries_path = "$.data.entries"
    container = doc.get("entries")
    if isinstance(container, dict):
        # An object map here is an ST file handed to the wrong parser: read it as one.
        items = [(k, container[k]) for k in _js_key_order(container.keys())]
    elif isinstance(container, list):
        items = [(str(i), v) for i, v in enumerate(container)]
    else:
        raise WorldBookFormatError(
            "WORLD_BOOK_ENTRIES_INVALID", "a character_book needs an 'entries' array", entries_path
        )
    check_book_entry_count(len(items))
    diag = _Diag()
    entries: list[WorldBookEntry] = []
    for index, (key, value) in enumerate(items):
        path = f"$.entries[{key}]"
        if not isinstance(value, dict):
            diag.warn("invalid-entry", path, "entry is not an object; skipped")
            continue
        entries.append(_parse_cb_entry(value, index, path, diag))
    _warn_duplicate_uids(entries, diag)
    extensions = doc.get("extensions")
    known = {"entries", "name", "description", "scan_depth", "token_budget", "recursive_scanning"}
    return WorldBook(
        entries=tuple(entries),
        name=doc["name"] if isinstance(doc.get("name"), str) else None,
        description=doc["description"] if isinstance(doc.get("description"), str) else None,
        scan_depth=_opt_int(doc.get("scan_depth"), "$.scan_depth", diag),
        token_budget=_opt_int(doc.get("token_budget"), "$.token_budget", diag),
        recursive_scanning=_opt_bool(doc.get("recursive_scanning"), "$.recursive_scanning", diag),
        source_format="character_book",
        extensions=dict(extensions) if isinstance(extensions, dict) else {},
        extra={k: v for k, v in doc.items() if k not in known and k != "extensions"},
        diagnostics=tuple(diag.items),
    )


def _warn_duplicate_uids(entries: list[WorldBookEntry], diag: _Diag) -> None:
    seen: set[str] = set()
    for entry in entries:
        key = str(entry.uid)
        if key in seen:
            diag.warn("duplicate-uid", f"$.entries.{key}", f"uid {key} appears more than once")
        seen.add(key)


def detect_world_book_format(raw: Any) -> SourceFormat | None:
    """``"st"`` for an ``entries`` object, ``"character_book"`` for an array; else ``None``."""
    if not isinstance(raw, dict):
        return None
    if raw.get("spec") == "lorebook_v3" and isinstance(raw.get("data"), dict):
        return "character_book"
    entries = raw.get("entries")
    if isinstance(entries, dict):
        return "st"
    if isinstance(entries, list):
        return "character_book"
    return None


def parse_any_world_book(raw: dict[str, Any]) -> WorldBook:
    """Detect the shape (`docs/worldbook.md#wi-formats`: both are read) and normalize it."""
    if detect_world_book_format(raw) == "character_book":
        return parse_character_book(raw)
    return parse_world_book(raw)


# --------------------------------------------------------------------------- export


def _num(value: float) -> int | float:
    # An integral double is written as an integer, as JavaScript would print it — but only
    # within JS's safe range: a larger one stays a float so the export re-imports under the
    # 64-bit integer guard (1e19 would otherwise come back as NUMBER_OUT_OF_RANGE).
    number = float(value)
    return int(number) if number.is_integer() and abs(number) <= MAX_SAFE_INTEGER else value


def _export_value(kind: str, value: Any) -> Any:
    if kind in ("pos", "role", "logic"):
        return int(value)
    if kind == "float":
        return _num(value)
    if kind == "strs":
        return list(value)
    return value


def _filter_out(filt: CharacterFilter) -> dict[str, Any]:
    return {"isExclude": filt.is_exclude, "names": list(filt.names), "tags": list(filt.tags)}


def _st_entry(entry: WorldBookEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "uid": entry.uid,
        "key": list(entry.keys),
        "keysecondary": list(entry.secondary_keys),
        "comment": entry.comment,
        "content": entry.content,
        "constant": entry.constant,
        "selective": entry.selective,
        "order": entry.order,
        "position": int(entry.position),
        "disable": entry.disable,
        "caseSensitive": entry.case_sensitive,
    }
    for attr, st_name, _, kind in _FIELDS:
        out[st_name] = _export_value(kind, getattr(entry, attr))
    if entry.character_filter is not None:
        out["characterFilter"] = _filter_out(entry.character_filter)
    if entry.extensions:
        out["extensions"] = dict(entry.extensions)
    for key, value in entry.extra.items():
        if key != "use_regex":
            out.setdefault(key, value)
    return out


def export_world_book(book: WorldBook) -> dict[str, Any]:
    """Write ``book`` as a standalone ST world-info document (``entries`` keyed by uid).

    Map keys are the original keys where they are still unique, else ``str(uid)`` (then
    ``"<uid>-<n>"`` on a collision).
    """
    entries: dict[str, Any] = {}
    for index, entry in enumerate(book.entries):
        key = entry.source_key if entry.source_key else str(entry.uid)
        if key in entries:
            key = f"{entry.uid}-{index}"
        entries[key] = _st_entry(entry)
    out: dict[str, Any] = {"entries": entries}
    if book.name is not None:
        out["name"] = book.name
    if book.description is not None:
        out["description"] = book.description
    if book.extensions:
        out["extensions"] = dict(book.extensions)
    if book.source_format == "character_book":
        for attr, key in (
            ("scan_depth", "scan_depth"),
            ("token_budget", "token_budget"),
            ("recursive_scanning", "recursive_scanning"),
        ):
            if getattr(book, attr) is not None:
                out[key] = getattr(book, attr)
    for key, value in book.extra.items():
        out.setdefault(key, value)
    return out


def _cb_entry(entry: WorldBookEntry) -> dict[str, Any]:
    ext: dict[str, Any] = dict(entry.extensions)
    ext["position"] = int(entry.position)
    ext["case_sensitive"] = entry.case_sensitive
    for attr, _, ext_name, kind in _FIELDS:
        ext[ext_name] = _export_value(kind, getattr(entry, attr))
    if entry.character_filter is not None:
        ext["character_filter"] = _filter_out(entry.character_filter)
    out: dict[str, Any] = {
        "id": entry.uid,
        "keys": list(entry.keys),
        "secondary_keys": list(entry.secondary_keys),
        "comment": entry.comment,
        "content": entry.content,
        "constant": entry.constant,
        "selective": entry.selective,
        "insertion_order": entry.order,
        "enabled": not entry.disable,
        "position": "before_char" if entry.position == Position.BEFORE_CHAR else "after_char",
        # docs/worldbook.md#wi-formats: ST always writes use_regex true (keys decide by their
        # /.../ syntax).
        "use_regex": entry.extra.get("use_regex", True),
        "extensions": ext,
    }
    for key, value in entry.extra.items():
        out.setdefault(key, value)
    return out


def export_character_book(book: WorldBook) -> dict[str, Any]:
    """Write ``book`` as a V2/V3 ``character_book`` object (entries array, snake_case)."""
    out: dict[str, Any] = {}
    if book.name is not None:
        out["name"] = book.name
    if book.description is not None:
        out["description"] = book.description
    if book.scan_depth is not None:
        out["scan_depth"] = book.scan_depth
    if book.token_budget is not None:
        out["token_budget"] = book.token_budget
    if book.recursive_scanning is not None:
        out["recursive_scanning"] = book.recursive_scanning
    out["extensions"] = dict(book.extensions)
    out["entries"] = [_cb_entry(entry) for entry in book.entries]
    if book.source_format == "character_book":
        for key, value in book.extra.items():
            out.setdefault(key, value)
    return out
