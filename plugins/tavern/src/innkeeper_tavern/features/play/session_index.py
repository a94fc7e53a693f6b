"""Which sessions each timeline names, kept in memory so a card binding's conflict check does not
reread every timeline of the catalog (`docs/contract/resources.md#missing-cards`: the v1
``POST /character-selection`` guard).

An entry is valid while the document's lease token (bumped by every write through the
workspace) and the file's stat signature (size, mtime, inode; an edit made outside Innkeeper)
are what they were when it was read. The signature is taken *before* the read, so a write racing
the read leaves an entry that fails the next check and is read again, never a stale one that
passes. One thread hop stats every timeline; only changed ones are read.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PlayError
from .leases import WORKSPACE_KEY, Leases, file_key
from .paths import posix, split_relative
from .tree import session_ids

Stamp = tuple[int, int, int] | None
ReadTimeline = Callable[[str], Awaitable[dict[str, Any] | None]]


def _stamp(path: Path) -> Stamp:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass(frozen=True, slots=True)
class _Entry:
    token: tuple[int, int]
    stamp: Stamp
    sessions: frozenset[str]


class TimelineSessionIndex:
    """``timeline path -> session ids`` for one workspace (process-local, rebuilt lazily)."""

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._entries: dict[tuple[str, str], _Entry] = {}

    def _token(self, path: str) -> tuple[int, int]:
        return (self._leases.token(WORKSPACE_KEY), self._leases.token(file_key(path)))

    async def sessions(
        self, root: str, paths: list[str], read: ReadTimeline
    ) -> dict[str, frozenset[str]]:
        """The session ids each timeline of ``paths`` names (empty for a missing or unreadable
        one); ``read`` is the workspace's validated read, called only for changed files."""
        keys: dict[str, str] = {}
        for path in paths:
            try:
                keys[path] = posix(split_relative(path))
            except PlayError:
                continue  # never readable: names no session
        tokens = {p: self._token(k) for p, k in keys.items()}
        base = Path(root)
        stamps = await asyncio.to_thread(lambda: {p: _stamp(base / k) for p, k in keys.items()})
        found: dict[str, frozenset[str]] = dict.fromkeys(paths, frozenset())
        for path in keys:
            key = (root, path)
            entry = self._entries.get(key)
            if entry is None or entry.token != tokens[path] or entry.stamp != stamps[path]:
                doc = await read(path)
                names = frozenset(session_ids(doc)) if doc is not None else frozenset()
                entry = _Entry(tokens[path], stamps[path], names)
                self._entries[key] = entry
            found[path] = entry.sessions
        live = {(root, p) for p in keys}
        for key in [k for k in self._entries if k not in live]:
            del self._entries[key]  # rows gone from the catalog (or another workspace)
        return found


__all__ = ["TimelineSessionIndex"]
