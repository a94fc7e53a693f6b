"""Blocking file helpers of the selection store: bounded reads and stale-temp cleanup.

Atomic replacement is the Tavern plugin's one recipe,
:func:`innkeeper_tavern.state.resources.atomic.atomic_write` (re-exported here).
Callers run these through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

from innkeeper_tavern.state.resources.atomic import atomic_write

__all__ = ["FILE_MODE", "FileTooLarge", "atomic_write", "read_limited", "remove_stale_temps"]

#: Files the store writes are private to the user running the host.
FILE_MODE: Final = 0o600


class FileTooLarge(Exception):
    """The file is larger than the caller's limit; it was not read."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes > {limit}")
        self.size = size
        self.limit = limit


def read_limited(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` (``None`` if absent); :class:`FileTooLarge` past ``limit`` bytes.

    The size is checked on the open file before reading, and the read itself stops one byte
    past the limit, so a file growing underneath is never loaded whole either.
    """
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                raise FileTooLarge(size, limit)
            data = handle.read(limit + 1)
    except FileNotFoundError:
        return None
    if len(data) > limit:
        raise FileTooLarge(len(data), limit)
    return data


def remove_stale_temps(path: Path) -> None:
    """Delete temp files a crashed writer of ``path`` left beside it."""
    prefix = f".{path.name}."
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(path.parent):
            if name.startswith(prefix) and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    (path.parent / name).unlink()
