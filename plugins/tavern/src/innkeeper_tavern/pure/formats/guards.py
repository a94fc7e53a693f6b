"""Structure guards applied to decoded JSON before any normalization.

`docs/contract/world-info.md#structure-guard`: the world-book parser and store share a
structure guard before normalize — at most 10,000 entries per resource, depth 32, 100,000 nodes,
1 MiB per string, 1,024 characters per object key. The same walk bounds card and user imports.
A world book's node budget grows with its entries (:func:`book_limits`; the spec's 100,000 would
stop a real 10,000-entry export at ~2,000 entries).

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
    "BOOK_DOCUMENT_LIMITS",
    "BOOK_NODES_PER_ENTRY",
    "DEFAULT_LIMITS",
    "MAX_BOOK_ENTRIES",
    "MAX_BOOK_NODES",
    "MAX_DEPTH",
    "MAX_INT_ABS",
    "MAX_KEY_CHARS",
    "MAX_NODES",
    "MAX_STRING_BYTES",
    "InvalidJson",
    "StructureLimitError",
    "StructureLimits",
    "book_limits",
    "check_book_entry_count",
    "check_structure",
    "decode_document",
]

#: The format layer's guard: the spec's bounds, integers of any size (see the module docstring).
DEFAULT_LIMITS: Final = StructureLimits(max_int_abs=None)

#: Entries in one world book (standalone ``entries`` or embedded ``character_book.entries``).
MAX_BOOK_ENTRIES: Final = 10_000
#: Nodes a world book may hold per entry on top of the spec's 100,000. The spec's two bounds
#: disagree: SillyTavern writes 45–51 JSON values per entry (every field, each key a value), so
#: 100,000 nodes stop a real export at ~2,000 of the 10,000 entries it allows. A book's budget
#: therefore grows with its entry count (100 per entry leaves room for long key lists).
BOOK_NODES_PER_ENTRY: Final = 100
#: The node budget of the largest book: 100,000 + 100 × 10,000 = 1,100,000.
MAX_BOOK_NODES: Final = MAX_NODES + BOOK_NODES_PER_ENTRY * MAX_BOOK_ENTRIES
#: The guard of a JSON document that holds one world book, before its entries are counted.
BOOK_DOCUMENT_LIMITS: Final = StructureLimits(max_nodes=MAX_BOOK_NODES, max_int_abs=None)


def book_limits(entries: int) -> StructureLimits:
    """The guard of a world book with ``entries`` entries (see :data:`BOOK_NODES_PER_ENTRY`).

    Integers are bounded to 64 bits: a book's numeric fields are ST numbers (doubles) and
    10**309 has no double, so such a book is refused (``NUMBER_OUT_OF_RANGE``: a standalone
    import or edit) or reported invalid (a card's embedded book; the card imports with a warning).
    """
    counted = max(0, min(entries, MAX_BOOK_ENTRIES))
    return StructureLimits(
        max_nodes=MAX_NODES + BOOK_NODES_PER_ENTRY * counted, max_int_abs=MAX_INT_ABS
    )


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
