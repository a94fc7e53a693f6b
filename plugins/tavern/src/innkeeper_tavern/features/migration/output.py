"""What the import and export commands write besides the library: result tables for the
terminal and file names safe on any disk. Shared by ``innkeeper import``/``export``
(:mod:`innkeeper_tavern.face.cli.import_export`) and the folder migration below it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

__all__ = ["render_table", "safe_file_name"]


def render_table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A plain text table (columns padded to the widest cell)."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
    return "\n".join(lines)


_UNSAFE_NAME: Final = re.compile(r'[\x00-\x1f\x7f"\\/:*?<>|]+')


def safe_file_name(name: str, used: set[str]) -> str:
    """A file name without path separators or control characters, unique within ``used``."""
    cleaned = _UNSAFE_NAME.sub("_", name).strip(" .") or "export"
    stem, dot, ext = cleaned.rpartition(".")
    if not dot:
        stem, ext = cleaned, ""
    candidate = cleaned
    counter = 2
    while candidate.lower() in used:
        candidate = f"{stem} ({counter}).{ext}" if ext else f"{stem} ({counter})"
        counter += 1
    used.add(candidate.lower())
    return candidate
