"""An advisory writer lock on the Tavern data directory.

A running server holds the stores in memory; a second writer (``innkeeper import`` working
offline) would be overwritten or would corrupt its view. The server takes this lock at setup and
releases it on unload; the offline CLI takes it too and refuses to run while the server holds it.
POSIX ``flock`` is released by the OS when the process dies, so a crash never leaves it stale.

Beside the lock the server records where it listens (:data:`SERVER_FILE`, ``{baseUrl, pid}``),
so ``innkeeper import`` finds the server of the data directory it would write even when that
server runs on another port. The record only counts while the lock is held: a crashed server
leaves a stale file, but no lock.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

from .atomic import atomic_write, remove_file

#: The lock file inside the plugin's data directory.
LOCK_FILE: Final = ".writer.lock"
#: Where the lock holder listens (written by the server, read by the CLI).
SERVER_FILE: Final = ".writer.server.json"
_MAX_SERVER_FILE_BYTES: Final = 4096


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

    def held_elsewhere(self) -> bool:
        """Whether another holder (another process, or another handle in this one) has the
        lock now. Never takes it for longer than the check."""
        if self._fd is not None:
            return False
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory lock
            return False
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing the descriptor releases a lock taken by the check
        return False

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def record_server(root: Path, base_url: str, pid: int) -> None:
    """Record (atomically) that the server ``pid`` holding the lock listens at ``base_url``."""
    data = json.dumps({"baseUrl": base_url, "pid": pid}).encode()
    atomic_write(root / SERVER_FILE, data)


def forget_server(root: Path) -> None:
    """Remove the record (the server stops holding the lock)."""
    remove_file(root / SERVER_FILE)


def recorded_server(root: Path) -> tuple[str, int] | None:
    """``(base_url, pid)`` from the record, or ``None`` when there is none or it is unreadable.
    Callers check the lock is held before trusting it."""
    try:
        with (root / SERVER_FILE).open("rb") as handle:
            raw = handle.read(_MAX_SERVER_FILE_BYTES + 1)
        doc = json.loads(raw) if len(raw) <= _MAX_SERVER_FILE_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    url, pid = doc.get("baseUrl"), doc.get("pid")
    if not isinstance(url, str) or not url.startswith("http") or not isinstance(pid, int):
        return None
    return url, pid
