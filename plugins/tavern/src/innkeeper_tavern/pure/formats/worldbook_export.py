"""World-book export over the original: the docs' rule "keep the original, overlay the edits".

A normalized :class:`~innkeeper_tavern.pure.formats.worldbook.WorldBook` cannot say how its original
spelled a value (``role: null`` and ``role: 0`` read the same, absent fields read as defaults),
so exporting the model alone rewrites an untouched book (issue 10, item 9).
:func:`export_over_original` starts from the imported document instead and writes only what
differs between the model's export and the export of a fresh parse of that original:

- an unedited book exports as the original, field for field;
- an edited entry keeps every field of its original that the edit did not change; a changed field
  is written in the model's ST representation (what :func:`export_world_book` writes), a field the
  edit removed is dropped;
- an added entry is written whole, a deleted entry is dropped;
- top-level fields follow the same rule (an edited ``name`` is written, unknown fields stay).

Entries are matched by their key in a standalone ``entries`` map, and by ``id`` (else position)
in a ``character_book`` array.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from .worldbook import (
    WorldBook,
    export_character_book,
    export_world_book,
    parse_any_world_book,
)

__all__ = ["export_model", "export_over_original"]

_MISSING: Final = object()


def export_model(book: WorldBook) -> dict[str, Any]:
    """The book written from the model alone, in its own shape."""
    if book.source_format == "character_book":
        return export_character_book(book)
    return export_world_book(book)


def _overlay(original: Any, before: Any, after: Any) -> Any:
    """``original`` with every change from ``before`` to ``after`` applied (recursively for
    objects present in all three; other values are replaced whole)."""
    if before == after:
        return copy.deepcopy(original)
    if not (isinstance(original, dict) and isinstance(before, dict) and isinstance(after, dict)):
        return copy.deepcopy(after)
    out = copy.deepcopy(original)
    for key, value in after.items():
        old = before.get(key, _MISSING)
        if old == value:
            continue
        base = original.get(key, _MISSING)
        out[key] = value if base is _MISSING or old is _MISSING else _overlay(base, old, value)
    for key in before:
        if key not in after:
            out.pop(key, None)
    return out


def _entries_by_key(entries: Any) -> dict[str, Any]:
    if isinstance(entries, dict):
        return {str(k): v for k, v in entries.items()}
    if isinstance(entries, list):
        keyed: dict[str, Any] = {}
        for index, entry in enumerate(entries):
            ident = entry.get("id") if isinstance(entry, dict) else None
            key = f"id:{ident}" if isinstance(ident, int) and f"id:{ident}" not in keyed else None
            keyed[key or f"at:{index}"] = entry
        return keyed
    return {}


def _overlay_entries(original: Any, before: Any, after: Any) -> Any:
    base, old = _entries_by_key(original), _entries_by_key(before)
    new = _entries_by_key(after)
    merged = {
        key: (
            _overlay(base[key], old[key], value)
            if key in base and key in old
            else copy.deepcopy(value)
        )
        for key, value in new.items()
    }
    if isinstance(after, dict):
        return merged
    return list(merged.values())


def export_over_original(original: dict[str, Any], book: WorldBook) -> dict[str, Any]:
    """``book`` exported as its imported ``original`` with only the edits overlaid."""
    fresh = parse_any_world_book(copy.deepcopy(original))
    if fresh == book:
        return copy.deepcopy(original)
    before, after = export_model(fresh), export_model(book)
    top = _overlay(
        {k: v for k, v in original.items() if k != "entries"},
        {k: v for k, v in before.items() if k != "entries"},
        {k: v for k, v in after.items() if k != "entries"},
    )
    top["entries"] = _overlay_entries(
        original.get("entries"), before.get("entries"), after.get("entries")
    )
    # The original's key order first (where the key survives), then keys the edit added.
    ordered = {k: top[k] for k in original if k in top}
    ordered.update((k, v) for k, v in top.items() if k not in ordered)
    return ordered
