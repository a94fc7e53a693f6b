"""SillyTavern regex scripts carried by a preset or a character card.

The resource keeps its native array where SillyTavern put it
(`docs/contract/resources.md#native-regex`): reads take the first existing path among
``regex_scripts``, ``extensions.regex_scripts`` and ``data.extensions.regex_scripts``; when none
exists, presets and V1 cards write ``extensions.regex_scripts`` and V2/V3 cards
``data.extensions.regex_scripts``. A write is a full ordered replace; scripts are kept as the
objects they are (unknown per-rule fields included).

:class:`RegexScript` is a typed *view* of one script for the runtime
(`docs/resources.md#regex-scripts`); it is never written back.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from .errors import FormatError, decode_json
from .guards import MAX_DEPTH, MAX_INT_ABS, StructureLimitError, StructureLimits, check_structure

#: The regex array of one resource: at most this many scripts (our bound; the resource's total
#: document size limit applies on top).
MAX_REGEX_SCRIPTS: Final = 1_000

#: ``PUT …/regex-scripts`` body is not ``[object, …]``.
REGEX_SCRIPTS_INVALID: Final = "REGEX_SCRIPTS_INVALID"

# Placement enum (`docs/resources.md#regex-scripts`).
MD_DISPLAY: Final = 0
USER_INPUT: Final = 1
AI_OUTPUT: Final = 2
SLASH_COMMAND: Final = 3
WORLD_INFO: Final = 5
REASONING: Final = 6

# substituteRegex enum.
SUBSTITUTE_NONE: Final = 0
SUBSTITUTE_RAW: Final = 1
SUBSTITUTE_ESCAPED: Final = 2

ResourceKind = Literal["preset", "card_v1", "card_v2"]

_READ_PATHS: Final[tuple[tuple[str, ...], ...]] = (
    ("regex_scripts",),
    ("extensions", "regex_scripts"),
    ("data", "extensions", "regex_scripts"),
)
_DEFAULT_WRITE_PATH: Final[dict[str, tuple[str, ...]]] = {
    "preset": ("extensions", "regex_scripts"),
    "card_v1": ("extensions", "regex_scripts"),
    "card_v2": ("data", "extensions", "regex_scripts"),
}
_SLASHED: Final = re.compile(r"^/(.+)/([dgimsuvy]*)$", re.DOTALL)


def _lookup(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def regex_scripts_path(doc: dict[str, Any], kind: ResourceKind) -> tuple[str, ...]:
    """The path the scripts of ``doc`` are read from and written to."""
    for path in _READ_PATHS:
        if isinstance(_lookup(doc, path), list):
            return path
    return _DEFAULT_WRITE_PATH[kind]


def read_regex_scripts(doc: dict[str, Any], kind: ResourceKind) -> list[dict[str, Any]]:
    """The native scripts of a resource original, in execution order (objects only)."""
    found = _lookup(doc, regex_scripts_path(doc, kind))
    if not isinstance(found, list):
        return []
    return [copy.deepcopy(item) for item in found if isinstance(item, dict)]


def validate_regex_scripts(value: Any) -> list[dict[str, Any]]:
    """Check a ``PUT …/regex-scripts`` array: at most :data:`MAX_REGEX_SCRIPTS` objects."""
    if not isinstance(value, list):
        raise FormatError(REGEX_SCRIPTS_INVALID, "regexScripts must be an array", 400, "$")
    if len(value) > MAX_REGEX_SCRIPTS:
        raise FormatError(
            REGEX_SCRIPTS_INVALID, f"at most {MAX_REGEX_SCRIPTS} regex scripts are allowed", 400
        )
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise FormatError(
                REGEX_SCRIPTS_INVALID, "each regex script must be an object", 400, f"$[{index}]"
            )
    return value


#: The guard of scripts a file brings (``regex/*.json`` or ``settings.json`` of a SillyTavern
#: folder): they land two levels down in a preset (``extensions.regex_scripts``, the guard of
#: :func:`replace_regex_scripts`) and travel in a JSON body whose integers are 64-bit.
SCRIPT_FILE_LIMITS: Final = StructureLimits(max_depth=MAX_DEPTH - 2, max_int_abs=MAX_INT_ABS)


def _check_script(item: Any, at: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise FormatError(REGEX_SCRIPTS_INVALID, "each regex script must be an object", 400, at)
    if not isinstance(item.get("findRegex"), str):
        raise FormatError(
            REGEX_SCRIPTS_INVALID, "findRegex must be a string", 400, f"{at}.findRegex"
        )
    return item


def _guarded(value: Any, limits: StructureLimits, at: str) -> None:
    try:
        check_structure(value, limits)
    except StructureLimitError as exc:
        error = FormatError.from_structure(exc)
        raise FormatError(error.code, error.message, error.status, at + error.path[1:]) from None


def check_script_list(value: Any, path: str) -> list[dict[str, Any]]:
    """A list of regex scripts found at ``path`` of a document (``settings.json``
    ``extension_settings.regex``): every item an object with a string ``findRegex``, within
    :data:`SCRIPT_FILE_LIMITS`. Raises ``FormatError(REGEX_SCRIPTS_INVALID)`` (or the guard's
    code) naming the item by its path in that document; nothing is dropped silently.
    """
    if not isinstance(value, list):
        raise FormatError(REGEX_SCRIPTS_INVALID, "regex scripts must be an array", 400, path)
    scripts = [_check_script(item, f"{path}[{i}]") for i, item in enumerate(value)]
    _guarded(value, SCRIPT_FILE_LIMITS, path)
    return scripts


def parse_regex_file(data: bytes) -> list[dict[str, Any]]:
    """An exported regex file: one script object (what SillyTavern writes) or an array of them.

    Raises ``FormatError`` naming the field in the file (``INVALID_JSON`` at ``$``,
    ``REGEX_SCRIPTS_INVALID`` at ``$[1]`` / ``$.findRegex``, a structure code).
    """
    doc = decode_json(data, what="regex scripts", limits=SCRIPT_FILE_LIMITS)
    if isinstance(doc, list):
        return check_script_list(doc, "$")
    script = _check_script(doc, "$")
    # Alone in the file, one level less deep than inside the preset's array.
    _guarded(doc, StructureLimits(max_depth=MAX_DEPTH - 3, max_int_abs=MAX_INT_ABS), "$")
    return [script]


def replace_regex_scripts(
    doc: dict[str, Any], scripts: Sequence[dict[str, Any]], kind: ResourceKind
) -> dict[str, Any]:
    """A copy of ``doc`` whose native array is ``scripts``; every other field is unchanged.

    Missing intermediate objects are created; an intermediate that exists but is not an object is
    replaced only on the default path (it could not have carried scripts).
    """
    checked = validate_regex_scripts(list(scripts))
    out = copy.deepcopy(doc)
    path = regex_scripts_path(out, kind)
    # The structure guard of the document the scripts land in
    # (`docs/contract/world-info.md#profile-budget`, depth 32 from the document's root): what is
    # stored here must re-import through the same guard, so the array may nest only as deep as its
    # path allows.
    try:
        check_structure(checked, StructureLimits(max_depth=MAX_DEPTH - len(path)))
    except StructureLimitError as exc:
        error = FormatError.from_structure(exc)
        raise FormatError(
            error.code,
            f"{error.message} (regex scripts sit {len(path)} levels inside the document)",
            error.status,
            error.path,
        ) from None
    node = out
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = copy.deepcopy(checked)
    return out


class RegexScript(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """A typed view of one SillyTavern regex script (for the runtime; never written back)."""

    id: str = ""
    script_name: str = ""
    find_regex: str = ""
    replace_string: str = ""
    trim_strings: tuple[str, ...] = ()
    placement: tuple[int, ...] = ()
    disabled: bool = False
    markdown_only: bool = False
    prompt_only: bool = False
    run_on_edit: bool = False
    substitute_regex: int = SUBSTITUTE_NONE
    min_depth: int | None = None
    max_depth: int | None = None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


def parse_regex_script(raw: dict[str, Any]) -> RegexScript:
    """Read one script with SillyTavern's defaults; a boolean ``substituteRegex`` is RAW/NONE."""
    substitute = raw.get("substituteRegex")
    if isinstance(substitute, bool):
        substitute_value = SUBSTITUTE_RAW if substitute else SUBSTITUTE_NONE
    else:
        substitute_value = _int_or_none(substitute) or SUBSTITUTE_NONE
    placement = raw.get("placement")
    trims = raw.get("trimStrings")
    return RegexScript(
        id=_str(raw.get("id")),
        script_name=_str(raw.get("scriptName")),
        find_regex=_str(raw.get("findRegex")),
        replace_string=_str(raw.get("replaceString")),
        trim_strings=tuple(t for t in trims if isinstance(t, str))
        if isinstance(trims, list)
        else (),
        placement=tuple(p for p in (_int_or_none(x) for x in placement) if p is not None)
        if isinstance(placement, list)
        else (),
        disabled=raw.get("disabled") is True,
        markdown_only=raw.get("markdownOnly") is True,
        prompt_only=raw.get("promptOnly") is True,
        run_on_edit=raw.get("runOnEdit") is True,
        substitute_regex=substitute_value,
        min_depth=_int_or_none(raw.get("minDepth")),
        max_depth=_int_or_none(raw.get("maxDepth")),
    )


def split_find_regex(find_regex: str) -> tuple[str, str]:
    """Split ``/body/flags`` into ``(body, flags)``; anything else is a bare pattern, no flags.

    A bare pattern is non-global: it replaces only the first match
    (`docs/resources.md#regex-scripts`).
    """
    match = _SLASHED.match(find_regex)
    if match is None:
        return find_regex, ""
    return match.group(1), match.group(2)
