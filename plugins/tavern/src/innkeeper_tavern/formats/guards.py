"""Structure guards applied to decoded JSON before any normalization.

`spec/LOADER_CONTRACT.md` "Profile safety budget": the world-book parser and store share a
structure guard before normalize — at most 10,000 entries per resource, depth 32, 100,000 nodes,
1 MiB per string, 1,024 characters per object key. The same walk bounds card and user imports.

The walk itself is the host's (:mod:`innkeeper_hostapi.structure`, a pure module), so an imported
file and a JSON request body are bounded by one implementation; this module adds the world-book
entry cap. Unlike a request body, a file's integers are not range-checked here: the normalizers
read numbers as ST's loose JSON does and diagnose one no double can hold.
"""

from __future__ import annotations

from typing import Any, Final

from innkeeper_hostapi.structure import (
    MAX_DEPTH,
    MAX_INT_ABS,
    MAX_KEY_CHARS,
    MAX_NODES,
    MAX_STRING_BYTES,
    InvalidJson,
    StructureLimitError,
    StructureLimits,
)
from innkeeper_hostapi.structure import check_structure as _check_structure
from innkeeper_hostapi.structure import decode_document as _decode_document

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_BOOK_ENTRIES",
    "MAX_DEPTH",
    "MAX_INT_ABS",
    "MAX_KEY_CHARS",
    "MAX_NODES",
    "MAX_STRING_BYTES",
    "InvalidJson",
    "StructureLimitError",
    "StructureLimits",
    "check_book_entry_count",
    "check_structure",
    "decode_document",
]

#: The format layer's guard: the spec's bounds, integers of any size (see the module docstring).
DEFAULT_LIMITS: Final = StructureLimits(max_int_abs=None)

#: Entries in one world book (standalone ``entries`` or embedded ``character_book.entries``).
MAX_BOOK_ENTRIES: Final = 10_000


def check_book_entry_count(count: int, path: str = "$.entries") -> None:
    """Reject a world book with more than :data:`MAX_BOOK_ENTRIES` entries."""
    if count > MAX_BOOK_ENTRIES:
        raise StructureLimitError(
            "WORLD_BOOK_TOO_MANY_ENTRIES",
            f"world book has {count} entries; at most {MAX_BOOK_ENTRIES} are allowed",
            path,
        )


def check_structure(value: Any, limits: StructureLimits = DEFAULT_LIMITS) -> int:
    """The host's structure walk with the format layer's default limits; returns the node count."""
    return _check_structure(value, limits)


def decode_document(
    data: bytes | str, limits: StructureLimits = DEFAULT_LIMITS, *, what: str = "document"
) -> Any:
    """The host's guarded JSON decoder with the format layer's default limits."""
    return _decode_document(data, limits, what=what)
