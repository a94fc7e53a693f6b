"""Paths: MVU's ``pathFix``, lodash path splitting, JSON Pointer, and the safety rules.

docs/mvu.md#command-paths describes the pipeline for function commands: trim quotes/backslashes,
``pathFix`` the bracket and quoted segments, then split like lodash ``toPath``. JSON Patch paths
are RFC 6901 pointers here (``~1`` and ``~0`` are decoded; MVU does not decode them).

docs/contract/mvu-dsl.md#isolation: no array ``length`` writes, no numeric object keys, no
prototype paths. :func:`unsafe_segment` names the keys no command may
address, and :func:`array_index` accepts only canonical array indices.
"""

from __future__ import annotations

import re
from typing import Final

from .jsvalue import Json

#: Keys that address a JavaScript prototype or constructor; never readable or writable.
PROTOTYPE_KEYS: Final = frozenset(["__proto__", "prototype", "constructor"])
#: Largest array index a JS array accepts (2**32 - 2); larger indices are plain properties.
MAX_ARRAY_INDEX: Final = 2**32 - 2

_LODASH_PROP: Final = re.compile(
    r"""[^.[\]]+|\[(?:(-?\d+(?:\.\d+)?)|(["'])((?:(?!\2)[^\\]|\\.)*?)\2)\]|(?=(?:\.|\[\])(?:\.|\[\]|$))"""
)
_LODASH_ESCAPE: Final = re.compile(r"\\(\\)?")
_LODASH_PLAIN: Final = re.compile(r"^\w*$")
_LODASH_DEEP: Final = re.compile(r"""\.|\[(?:[^[\]]*|(["'])(?:(?!\1)[^\\]|\\.)*?\1)\]""")
_WHITESPACE: Final = re.compile(r"\s")
_NEEDS_BRACKET: Final = re.compile(r"[\s.\[\]]")


def _fix_bracket(content: str) -> str:
    inner = content.strip()
    if not inner:
        return "[]"
    if inner.isascii() and inner.isdigit():
        return f"[{inner}]"
    quoted = len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "\"'"
    if quoted:
        inner = inner[1:-1]
        if inner.isascii() and inner.isdigit():
            return f'["{inner}"]'
    if _WHITESPACE.search(inner):
        return '["' + inner.replace('"', '\\"') + '"]'
    return f"[{inner}]"


def path_fix(path: str) -> str:
    """MVU ``pathFix``: normalise bracket contents and quoted dot segments.

    docs/mvu.md#command-paths.
    """
    out: list[str] = []
    i = 0
    n = len(path)
    segment_start = True
    while i < n:
        ch = path[i]
        if ch == "[":
            j = path.find("]", i + 1)
            if j < 0:
                out.append(path[i:])
                break
            out.append(_fix_bracket(path[i + 1 : j]))
            i = j + 1
            segment_start = False
            continue
        if ch in "\"'" and segment_start:
            j = path.find(ch, i + 1)
            if j > 0 and (j + 1 == n or path[j + 1] in ".["):
                inner = path[i + 1 : j]
                if _NEEDS_BRACKET.search(inner):
                    if out and out[-1] == ".":
                        out.pop()
                    out.append('["' + inner.replace('"', '\\"') + '"]')
                else:
                    out.append(inner)
                i = j + 1
                segment_start = False
                continue
        if ch == ".":
            out.append(".")
            segment_start = True
        else:
            out.append(ch)
            segment_start = False
        i += 1
    return "".join(out)


def to_path(path: str) -> list[str]:
    """lodash ``toPath`` (``stringToPath``) for a path string."""
    result: list[str] = []
    if path.startswith("."):
        result.append("")
    for match in _LODASH_PROP.finditer(path):
        number, quote, quoted = match.group(1), match.group(2), match.group(3)
        if quote:
            result.append(_LODASH_ESCAPE.sub(lambda m: m.group(1) or "", quoted))
        elif number:
            result.append(number)
        else:
            result.append(match.group(0))
    return result


def cast_path(path: str, root: Json) -> list[str]:
    """lodash ``castPath``: a path that is itself a key of ``root`` is one segment."""
    if path == "":
        return []
    if _LODASH_PLAIN.match(path) or not _LODASH_DEEP.search(path):
        return [path]
    if isinstance(root, dict) and path in root:
        return [path]
    return to_path(path)


def parse_json_pointer(pointer: str) -> list[str]:
    """RFC 6901 pointer to segments; a missing leading ``/`` is tolerated as MVU does."""
    if pointer == "":
        return []
    body = pointer[1:] if pointer.startswith("/") else pointer
    return [part.replace("~1", "/").replace("~0", "~") for part in body.split("/")]


def to_json_pointer(segments: list[str] | tuple[str, ...]) -> str:
    """Segments to an RFC 6901 pointer (``""`` is the root)."""
    return "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in segments)


def array_index(segment: str) -> int | None:
    """The index a canonical array-index key names (``"0"``, ``"12"``), else ``None``.

    ``"01"``, ``"-1"``, ``"1.0"`` and ``"length"`` are not indices: on an array they would be
    plain JS properties, which state never holds.
    """
    if not segment or not segment.isascii() or not segment.isdigit():
        return None
    if len(segment) > 1 and segment[0] == "0":
        return None
    index = int(segment)
    return index if index <= MAX_ARRAY_INDEX else None


def unsafe_segment(segments: list[str] | tuple[str, ...]) -> str | None:
    """The first segment no command may address (prototype keys), else ``None``."""
    for segment in segments:
        if segment in PROTOTYPE_KEYS:
            return segment
    return None


def display_path(segments: list[str] | tuple[str, ...]) -> str:
    """A dot path for diagnostics (segments joined with ``.``)."""
    return ".".join(segments)
