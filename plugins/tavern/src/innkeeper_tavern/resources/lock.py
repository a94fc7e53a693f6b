"""An advisory writer lock on the Tavern data directory.

A running server holds the stores in memory; a second writer (``innkeeper import`` working
offline) would be overwritten or would corrupt its view. The server takes this lock at setup and
releases it on unload; the offline CLI takes it too and refuses to run while the server holds it.
POSIX ``flock`` is released by the OS when the process dies, so a crash never leaves it stale.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

#: The lock file inside the plugin's data directory.
LOCK_FILE: Final = ".writer.lock"


class DataDirLockedError(RuntimeError):
    """Another process (normally the server) holds the data directory."""


class DataDirLock:
    """``flock``-based exclusive lock on ``<root>/.writer.lock`` (no-op where unsupported)."""

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`DataDirLockedError` at once (never blocks)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory lock
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLockedError(f"{self.path.parent} is in use by another process") from None
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
