"""Avatar thumbnails cached on disk by source digest and size.

A thumbnail's file is named by the SHA-256 of the image it was made from and its size, so a
changed avatar can never be answered with the old picture (its digest differs), and cards that
share an avatar share its files. The digest of each card's cover is remembered with the cover
file's ``(size, mtime, inode)`` and recomputed when the file changes. The folder is bounded:
past :data:`MAX_CACHE_BYTES` the least recently written files are removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from innkeeper_tavern.pure.formats.png import placeholder_png
from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded

from .images import make_thumbnail

#: The cache folder, under the plugin's data directory.
THUMBNAILS_DIR: Final = "thumbnails"
#: Bytes of thumbnails kept on disk; a write past it removes the oldest files down to 3/4.
MAX_CACHE_BYTES: Final = 64 << 20
_SUFFIX: Final = ".webp"


@dataclass(frozen=True, slots=True)
class Thumbnail:
    """A thumbnail's bytes and its validator (``"<digest prefix>-<size>"``, quoted)."""

    data: bytes
    etag: str


def _stat_key(path: Path | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class ThumbnailCache:
    """Thumbnails of card covers under ``root / THUMBNAILS_DIR``."""

    def __init__(self, root: Path, *, max_bytes: int = MAX_CACHE_BYTES) -> None:
        self.dir = root / THUMBNAILS_DIR
        self.max_bytes = max_bytes
        #: card id -> (cover stat key, cover digest)
        self._digests: dict[str, tuple[tuple[int, int, int] | None, str]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._placeholder = hashlib.sha256(placeholder_png()).hexdigest()
        #: Bytes in the folder (counted once, then kept up to date by the writes).
        self._total: int | None = None

    def forget(self, card_id: str) -> None:
        """Drop what is remembered of a card that no longer exists."""
        self._digests.pop(card_id, None)

    def _source(self, cover: Path | None, max_bytes: int) -> tuple[str, bytes | None]:
        """The cover's digest and bytes (the placeholder's without a cover). Blocking."""
        data = read_bounded(cover, max_bytes) if cover is not None else None
        if data is None:
            return self._placeholder, None
        return hashlib.sha256(data).hexdigest(), data

    def etag(self, digest: str, size: int) -> str:
        return f'"{digest[:32]}-{size}"'

    async def digest(self, card_id: str, cover: Path | None, max_bytes: int) -> str:
        """The digest of ``card_id``'s cover, hashed again only when its file changed."""
        key = await asyncio.to_thread(_stat_key, cover)
        known = self._digests.get(card_id)
        if known is not None and known[0] == key:
            return known[1]
        if key is None:
            digest = self._placeholder
        else:
            digest, _ = await asyncio.to_thread(self._source, cover, max_bytes)
        self._digests[card_id] = (key, digest)
        return digest

    async def get(self, card_id: str, cover: Path | None, max_bytes: int, size: int) -> Thumbnail:
        """The thumbnail of ``card_id``'s cover at ``size`` (made and stored on a miss).

        Raises a 422 ``ResourceError`` for a cover that cannot be decoded."""
        digest = await self.digest(card_id, cover, max_bytes)
        name = f"{digest}-{size}{_SUFFIX}"
        lock = self._locks.setdefault(name, asyncio.Lock())
        try:
            async with lock:
                data = await asyncio.to_thread(self._read, name)
                if data is None:
                    data = await asyncio.to_thread(self._make, name, cover, max_bytes, size, digest)
        finally:
            if not lock.locked():
                self._locks.pop(name, None)
        return Thumbnail(data, self.etag(digest, size))

    def _read(self, name: str) -> bytes | None:
        try:
            return (self.dir / name).read_bytes()
        except FileNotFoundError:
            return None

    def _make(self, name: str, cover: Path | None, max_bytes: int, size: int, digest: str) -> bytes:
        found, source = self._source(cover, max_bytes)
        if found != digest:
            # The cover changed between hashing and reading: name the file by what was read.
            name = f"{found}-{size}{_SUFFIX}"
        data = make_thumbnail(source if source is not None else placeholder_png(), size)
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.dir / name, data)
        self._total = (self._scan()[0] if self._total is None else self._total) + len(data)
        if self._total > self.max_bytes:
            self._evict()
        return data

    def _scan(self) -> tuple[int, list[tuple[int, int, str]]]:
        files = []
        total = 0
        with os.scandir(self.dir) as entries:
            for entry in entries:
                if entry.is_file() and entry.name.endswith(_SUFFIX):
                    st = entry.stat()
                    files.append((st.st_mtime_ns, st.st_size, entry.name))
                    total += st.st_size
        return total, files

    def _evict(self) -> None:
        """Remove the oldest thumbnails until the folder holds at most 3/4 of ``max_bytes``."""
        total, files = self._scan()
        for _, size, name in sorted(files):
            if total <= self.max_bytes * 3 // 4:
                break
            (self.dir / name).unlink(missing_ok=True)
            total -= size
        self._total = total
