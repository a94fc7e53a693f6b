"""Structure guards for decoded JSON: depth, node count, string size, key length, integer range.

`docs/contract/world-info.md#structure-guard`: the world-book parser and store share a
structure guard before normalize — depth 32, 100,000 nodes, 1 MiB per string, 1,024 characters per
object key. The host applies the same walk to every JSON request body before a handler runs (see
:mod:`innkeeper_hostapi.bodies`), and the Tavern's format layer applies it to imported files, so
a document is bounded the same way whichever door it comes through.

This module is pure (no I/O, no aiohttp): the Tavern's pure format layer may import it.

The walk is iterative (no recursion limit to hit) and stops at the first violation, so a hostile
document costs at most ``max_nodes`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import msgspec

#: Depth of nested containers (the root container is depth 1).
MAX_DEPTH: Final = 32
#: Containers plus scalars visited in one document.
MAX_NODES: Final = 100_000
#: UTF-8 bytes of one string value.
MAX_STRING_BYTES: Final = 1 << 20
#: Characters of one object key.
MAX_KEY_CHARS: Final = 1_024
#: Largest integer magnitude accepted: a signed 64-bit value (what SQLite and every consumer
#: downstream can hold). JSON allows any length of digits; ``float()`` of 10**309 overflows.
MAX_INT_ABS: Final = (1 << 63) - 1

#: Codes that mean "too big" (413); the other structure codes mean "malformed" (400).
TOO_LARGE_CODES: Final = frozenset({"STRUCTURE_TOO_MANY_NODES", "STRUCTURE_STRING_TOO_LARGE"})


class StructureLimitError(ValueError):
    """A decoded document exceeds a structure limit; nothing derived from it may be written.

    ``code`` is one of ``STRUCTURE_TOO_DEEP``, ``STRUCTURE_TOO_MANY_NODES``,
    ``STRUCTURE_STRING_TOO_LARGE``, ``STRUCTURE_KEY_TOO_LONG`` or ``NUMBER_OUT_OF_RANGE``;
    ``path`` is a JSON path (``$.a[3]``) of the offending value.
    """

    def __init__(self, code: str, message: str, path: str) -> None:
        super().__init__(f"{message} at {path}")
        self.code = code
        self.message = message
        self.path = path

    @property
    def status(self) -> int:
        """HTTP status of this failure: 413 for size, 400 for shape."""
        return 413 if self.code in TOO_LARGE_CODES else 400


@dataclass(frozen=True, slots=True)
class StructureLimits:
    """Bounds for :func:`check_structure`; defaults are the spec's values.

    ``max_int_abs=None`` lets integers of any size through (a caller that reports them itself,
    e.g. as a warning).
    """

    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES
    max_string_bytes: int = MAX_STRING_BYTES
    max_key_chars: int = MAX_KEY_CHARS
    max_int_abs: int | None = MAX_INT_ABS


DEFAULT_LIMITS: Final = StructureLimits()

_json_decoder: Final = msgspec.json.Decoder()


class InvalidJson(ValueError):
    """The text is not UTF-8 JSON (or holds a float no double can represent)."""


def decode_document(
    data: bytes | str, limits: StructureLimits = DEFAULT_LIMITS, *, what: str = "document"
) -> Any:
    """Decode JSON text into plain Python values and enforce ``limits``.

    Raises :class:`InvalidJson` for bad UTF-8 or syntax and :class:`StructureLimitError`
    otherwise (``STRUCTURE_TOO_DEEP`` also for nesting the decoder itself cannot follow, instead
    of a ``RecursionError``). A leading UTF-8 byte-order mark is skipped; duplicate object keys
    keep the last value (as ``JSON.parse`` does).
    """
    if isinstance(data, str):
        data = data.removeprefix("\ufeff")
    else:
        data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        value = _json_decoder.decode(data)
    except UnicodeDecodeError:
        raise InvalidJson(f"{what} is not valid UTF-8") from None
    except RecursionError:
        raise StructureLimitError(
            "STRUCTURE_TOO_DEEP", f"{what} nests deeper than {limits.max_depth}", "$"
        ) from None
    except msgspec.DecodeError as exc:  # includes ValidationError: "Number out of range"
        raise InvalidJson(f"{what} is not valid JSON: {exc}") from None
    check_structure(value, limits)
    return value


def _string_too_long(text: str, max_bytes: int) -> bool:
    # A str of n code points encodes to between n and 4n UTF-8 bytes: only encode when unsure.
    if len(text) * 4 <= max_bytes:
        return False
    if len(text) > max_bytes:
        return True
    return len(text.encode("utf-8", "surrogatepass")) > max_bytes


def _too_many(limits: StructureLimits, path: str) -> StructureLimitError:
    return StructureLimitError(
        "STRUCTURE_TOO_MANY_NODES", f"more than {limits.max_nodes} nodes", path
    )


def check_structure(value: Any, limits: StructureLimits = DEFAULT_LIMITS) -> int:
    """Walk ``value`` (the output of a JSON decoder) and enforce ``limits``.

    Returns the number of nodes visited; raises :class:`StructureLimitError` at the first
    violation.
    """
    nodes = 0
    max_int = limits.max_int_abs
    stack: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while stack:
        node, depth, path = stack.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise _too_many(limits, path)
        if isinstance(node, str):
            if _string_too_long(node, limits.max_string_bytes):
                raise StructureLimitError(
                    "STRUCTURE_STRING_TOO_LARGE",
                    f"string longer than {limits.max_string_bytes} bytes",
                    path,
                )
            continue
        if isinstance(node, int) and not isinstance(node, bool):
            if max_int is not None and not -max_int <= node <= max_int:
                raise StructureLimitError(
                    "NUMBER_OUT_OF_RANGE", f"integer outside ±{max_int}", path
                )
            continue
        if not isinstance(node, dict | list):
            continue
        # Pending children count too, so a huge flat container fails before it is queued.
        if nodes + len(stack) + len(node) > limits.max_nodes:
            raise _too_many(limits, path)
        if depth > limits.max_depth:
            raise StructureLimitError(
                "STRUCTURE_TOO_DEEP", f"nesting deeper than {limits.max_depth}", path
            )
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and len(key) > limits.max_key_chars:
                    raise StructureLimitError(
                        "STRUCTURE_KEY_TOO_LONG",
                        f"object key longer than {limits.max_key_chars} characters",
                        path,
                    )
                stack.append((child, depth + 1, f"{path}.{key}"))
        else:
            stack.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(node))
    return nodes
