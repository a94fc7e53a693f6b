"""Blocking file helpers of the selection store: bounded reads and atomic replacement.

DESIGN.md "Conventions": a durable write goes to a temp file in the target's own folder, is
``fsync``-ed, then renamed over the target (and the folder is ``fsync``-ed so the rename itself
is durable). A failure at any step removes the temp file and leaves the target as it was.
``_fsync`` and ``_replace`` are module-level seams so tests can make either step fail.
Callers run these through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Final

#: Files the store writes are private to the user running the host.
FILE_MODE: Final = 0o600


class FileTooLarge(Exception):
    """The file is larger than the caller's limit; it was not read."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes > {limit}")
        self.size = size
        self.limit = limit


def _fsync(fd: int) -> None:
    os.fsync(fd)


def _replace(source: Path, target: Path) -> None:
    os.replace(source, target)


def _fsync_folder(folder: Path) -> None:
    # Not every platform lets a folder be opened or fsync-ed; the rename already happened.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file in the same folder, fsync, rename.

    Raises ``OSError`` if any step fails; ``path`` is then unchanged and no temp file remains.
    """
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            _fsync(fd)
        finally:
            os.close(fd)
        _replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _fsync_folder(folder)


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
