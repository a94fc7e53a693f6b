"""Atomic, bounded file writes and reads shared by every resource store.

The recipe (docs/contract/conventions.md#atomic-writes): serialize and check the byte limit first,
write a temp file in the target's own folder, ``fsync`` it, ``rename`` it over the target, then
``fsync`` the folder. A failure at any step unlinks the temp file and leaves the previous target
untouched, so a crash between the temp write and the rename never corrupts a store. Reads check
the size before loading the bytes.

Everything here is blocking: stores call it through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from .errors import STORAGE_READ_FAILED, ResourceError

#: File mode of every file a store writes (private to the user running the host).
FILE_MODE = 0o600
#: Suffixes of hidden leftovers a crash may leave: half-written temps and documents being deleted.
TEMP_SUFFIX = ".tmp"
TRASH_SUFFIX = ".deleted"


def _fsync(fd: int) -> None:
    """Flush a temp file to disk; a module-level seam so tests can simulate a failed fsync."""
    os.fsync(fd)


def _replace(source: Path, target: Path) -> None:
    """The publishing rename; a module-level seam so tests can simulate a crash before it."""
    os.replace(source, target)


def _fsync_dir(folder: Path) -> None:
    # Directory fsync makes the rename itself durable; not every platform allows opening one.
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
    """Replace ``path`` with ``data`` atomically (temp file in the same folder, fsync, rename).

    Raises ``OSError`` when any step fails; the previous file is then unchanged and no temp file
    is left behind.
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
                if written <= 0:
                    raise OSError(f"write made no progress on {temp.name}")
                view = view[written:]
            _fsync(fd)
        finally:
            os.close(fd)
        _replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _fsync_dir(folder)


def move(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target`` (same folder) and make the rename durable."""
    _replace(source, target)
    _fsync_dir(target.parent)


def trash_path(path: Path) -> Path:
    """A hidden name in ``path``'s folder for a document being deleted (removed at next open)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}{TRASH_SUFFIX}")


def remove_file(path: Path) -> bool:
    """Unlink ``path``; ``False`` if it did not exist. Other errors propagate."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    _fsync_dir(path.parent)
    return True


def read_bounded(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of ``path``, ``None`` if it does not exist.

    Raises :class:`ResourceError` (``STORAGE_READ_FAILED``, 500) when the file is larger than
    ``max_bytes``: a store never loads a file it could not have written.
    """
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise ResourceError(
                    500,
                    STORAGE_READ_FAILED,
                    f"{path.name} is larger than {max_bytes} bytes; refusing to load it",
                )
            return handle.read(max_bytes + 1)
    except FileNotFoundError:
        return None


def remove_stale_temps(folder: Path) -> int:
    """Delete temp and trash files a crashed writer left in ``folder``; returns how many."""
    removed = 0
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    for name in names:
        if name.startswith(".") and name.endswith((TEMP_SUFFIX, TRASH_SUFFIX)):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
                removed += 1
    return removed
