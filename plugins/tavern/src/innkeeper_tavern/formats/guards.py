"""Structure guards applied to decoded JSON before any normalization.

`spec/LOADER_CONTRACT.md` "Profile safety budget": the world-book parser and store share a
structure guard before normalize — at most 10,000 entries per resource, depth 32, 100,000 nodes,
1 MiB per string, 1,024 characters per object key. The same walk bounds card and user imports.

The walk is iterative (no recursion limit to hit) and stops at the first violation, so a hostile
document costs at most ``max_nodes`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

#: Depth of nested containers (the root container is depth 1).
MAX_DEPTH: Final = 32
#: Containers plus scalars visited in one document.
MAX_NODES: Final = 100_000
#: UTF-8 bytes of one string value.
MAX_STRING_BYTES: Final = 1 << 20
#: Characters of one object key.
MAX_KEY_CHARS: Final = 1_024
#: Entries in one world book (standalone ``entries`` or embedded ``character_book.entries``).
MAX_BOOK_ENTRIES: Final = 10_000


class StructureLimitError(ValueError):
    """A decoded document exceeds a structure limit; nothing derived from it may be written."""

    def __init__(self, code: str, message: str, path: str) -> None:
        super().__init__(f"{message} at {path}")
        self.code = code
        self.message = message
        self.path = path


@dataclass(frozen=True, slots=True)
class StructureLimits:
    """Bounds for :func:`check_structure`; defaults are the spec's values."""

    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES
    max_string_bytes: int = MAX_STRING_BYTES
    max_key_chars: int = MAX_KEY_CHARS


DEFAULT_LIMITS: Final = StructureLimits()


def _string_too_long(text: str, max_bytes: int) -> bool:
    # A str of n code points encodes to between n and 4n UTF-8 bytes: only encode when unsure.
    if len(text) * 4 <= max_bytes:
        return False
    if len(text) > max_bytes:
        return True
    return len(text.encode("utf-8", "surrogatepass")) > max_bytes


def check_structure(value: Any, limits: StructureLimits = DEFAULT_LIMITS) -> int:
    """Walk ``value`` (the output of a JSON decoder) and enforce ``limits``.

    Returns the number of nodes visited. Raises :class:`StructureLimitError` with one of the codes
    ``STRUCTURE_TOO_DEEP``, ``STRUCTURE_TOO_MANY_NODES``, ``STRUCTURE_STRING_TOO_LARGE`` or
    ``STRUCTURE_KEY_TOO_LONG``.
    """
    nodes = 0
    stack: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while stack:
        node, depth, path = stack.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise StructureLimitError(
                "STRUCTURE_TOO_MANY_NODES", f"more than {limits.max_nodes} nodes", path
            )
        if isinstance(node, str):
            if _string_too_long(node, limits.max_string_bytes):
                raise StructureLimitError(
                    "STRUCTURE_STRING_TOO_LARGE",
                    f"string longer than {limits.max_string_bytes} bytes",
                    path,
                )
            continue
        # Pending children count too, so a huge flat container fails before it is queued.
        if isinstance(node, dict | list) and nodes + len(stack) + len(node) > limits.max_nodes:
            raise StructureLimitError(
                "STRUCTURE_TOO_MANY_NODES", f"more than {limits.max_nodes} nodes", path
            )
        if isinstance(node, dict):
            if depth > limits.max_depth:
                raise StructureLimitError(
                    "STRUCTURE_TOO_DEEP", f"nesting deeper than {limits.max_depth}", path
                )
            for key, child in node.items():
                if isinstance(key, str) and len(key) > limits.max_key_chars:
                    raise StructureLimitError(
                        "STRUCTURE_KEY_TOO_LONG",
                        f"object key longer than {limits.max_key_chars} characters",
                        path,
                    )
                stack.append((child, depth + 1, f"{path}.{key}"))
        elif isinstance(node, list):
            if depth > limits.max_depth:
                raise StructureLimitError(
                    "STRUCTURE_TOO_DEEP", f"nesting deeper than {limits.max_depth}", path
                )
            stack.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(node))
    return nodes


def check_book_entry_count(count: int, path: str = "$.entries") -> None:
    """Reject a world book with more than :data:`MAX_BOOK_ENTRIES` entries."""
    if count > MAX_BOOK_ENTRIES:
        raise StructureLimitError(
            "WORLD_BOOK_TOO_MANY_ENTRIES",
            f"world book has {count} entries; at most {MAX_BOOK_ENTRIES} are allowed",
            path,
        )
