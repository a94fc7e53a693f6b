"""The rendering cache's files: ``<plugin data>/rendering-cache/index.json`` plus one UTF-8
file per stored source under ``sources/`` (named by the SHA-256 of the exact URL and the
content's SHA-256).

Every mutation builds the next state in memory, checks every budget against it, writes the new
source files atomically, then writes ``index.json`` atomically, then serves it, then deletes the
files nothing references any more. A process killed between the source writes and the index
write leaves extra files (collected at the next open), never an index entry without bytes.
Reads check each file's size and SHA-256 against the index.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded
from innkeeper_tavern.state.resources.errors import ResourceError

from .model import (
    MAX_INDEX_BYTES,
    MAX_OWNERS,
    MAX_SOURCES,
    MAX_TOTAL_BYTES,
    CacheError,
    Graph,
    SourceInput,
    SourceRef,
    canonical_json,
)

__all__ = ["CACHE_DIR", "INDEX_FILE", "Opening", "OwnerRecord", "RenderingCacheStore"]

CACHE_DIR: Final = "rendering-cache"
INDEX_FILE: Final = "index.json"
SOURCES_DIR: Final = "sources"
INDEX_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """One owner's generation, pending flag and published graph (``metadata is None``: none)."""

    generation: int = 0
    pending: bool = False
    tombstone: bool = False
    metadata: dict[str, Any] | None = None
    sources: tuple[SourceRef, ...] = ()

    def to_json(self) -> dict[str, Any]:
        graph = None
        if self.metadata is not None:
            graph = {"metadata": self.metadata, "sources": [s.to_json() for s in self.sources]}
        return {
            "generation": self.generation,
            "pending": self.pending,
            "tombstone": self.tombstone,
            "graph": graph,
        }

    @staticmethod
    def from_json(raw: Any) -> OwnerRecord:
        graph = raw.get("graph")
        return OwnerRecord(
            generation=int(raw["generation"]),
            pending=bool(raw["pending"]),
            tombstone=bool(raw["tombstone"]),
            metadata=dict(graph["metadata"]) if graph is not None else None,
            sources=tuple(SourceRef.from_json(s) for s in graph["sources"]) if graph else (),
        )


@dataclass(frozen=True, slots=True)
class Opening:
    """The fixed opening snapshot: its generation and stored content (``None``: absent)."""

    generation: int = 0
    tombstone: bool = False
    content: SourceRef | None = None


@dataclass(frozen=True, slots=True)
class _State:
    owners: dict[str, OwnerRecord]
    opening: Opening

    def refs(self) -> dict[tuple[str, str], SourceRef]:
        out: dict[tuple[str, str], SourceRef] = {}
        for record in self.owners.values():
            for ref in record.sources:
                out.setdefault(ref.key, ref)
        if self.opening.content is not None:
            out.setdefault(self.opening.content.key, self.opening.content)
        return out

    def encode(self) -> bytes:
        content = self.opening.content
        doc = {
            "version": INDEX_VERSION,
            "owners": {owner: rec.to_json() for owner, rec in self.owners.items()},
            "opening": {
                "generation": self.opening.generation,
                "tombstone": self.opening.tombstone,
                "content": content.to_json() if content is not None else None,
            },
        }
        return canonical_json(doc) + b"\n"


def _decode_state(data: bytes) -> _State:
    doc = json.loads(data)
    if doc.get("version") != INDEX_VERSION:
        raise ValueError("unknown index version")
    opening = doc["opening"]
    content = opening.get("content")
    return _State(
        owners={str(k): OwnerRecord.from_json(v) for k, v in doc["owners"].items()},
        opening=Opening(
            generation=int(opening["generation"]),
            tombstone=bool(opening["tombstone"]),
            content=SourceRef.from_json(content) if content is not None else None,
        ),
    )


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` already holds exactly ``data``."""
    try:
        if path.stat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def source_file_name(ref: SourceRef) -> str:
    """``<sha256(url)>-<sha256(content)>.txt``: exact URL and digest, filesystem-safe."""
    return f"{hashlib.sha256(ref.url.encode()).hexdigest()}-{ref.digest}.txt"


class RenderingCacheStore:
    """The index in memory and the files behind it; mutations are serialized by one lock."""

    def __init__(self, data_dir: Path, *, logger: logging.Logger) -> None:
        self.root = data_dir / CACHE_DIR
        self.index_path = self.root / INDEX_FILE
        self.sources_dir = self.root / SOURCES_DIR
        self._log = logger
        self._state = _State({}, Opening())
        self._lock = asyncio.Lock()

    # -- opening and reading --------------------------------------------------------------

    async def open(self) -> None:
        """Load ``index.json`` (a missing one is an empty cache) and collect stray files."""
        await asyncio.to_thread(self._open_sync)

    def _open_sync(self) -> None:
        try:
            data = read_bounded(self.index_path, MAX_INDEX_BYTES)
        except (ResourceError, OSError) as exc:  # an unreadable cache index starts empty
            self._log.error("rendering cache index unreadable (%s)", type(exc).__name__)
            data = None
            self._set_aside()
        if data:
            try:
                self._state = _decode_state(data)
            except (ValueError, KeyError, TypeError, AttributeError):
                self._log.error("rendering cache index invalid; starting empty")
                self._set_aside()
        self._collect(self._state)

    def _set_aside(self) -> None:
        with contextlib.suppress(OSError):
            self.index_path.rename(self.root / f"{INDEX_FILE}.invalid-{int(time.time())}")

    def owner(self, owner: str) -> OwnerRecord:
        """An owner's record (a fresh generation-0 record when none exists)."""
        return self._state.owners.get(owner, OwnerRecord())

    def owners(self) -> dict[str, OwnerRecord]:
        """Every owner record (tombstones included)."""
        return dict(self._state.owners)

    @property
    def opening(self) -> Opening:
        return self._state.opening

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """Hold off mutations (and their collection of obsolete files) while a response reads
        the state and the files it names: a read sees one state, never a half-collected one."""
        async with self._lock:
            yield

    async def read(self, ref: SourceRef) -> str:
        """The text of a stored source, verified against its size and SHA-256 (500 otherwise).

        Call it inside :meth:`reading` so a concurrent publication cannot collect the file."""
        path = self.sources_dir / source_file_name(ref)
        try:
            data = await asyncio.to_thread(read_bounded, path, ref.size)
        except (ResourceError, OSError):  # oversized or unreadable: fails verification
            data = None
        if data is None or len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.digest:
            raise CacheError(
                500, "RENDERING_CACHE_SOURCE_CORRUPT", "a stored source failed verification"
            )
        return data.decode("utf-8")

    def newest(self, url: str) -> SourceRef | None:
        """The referenced version of exactly ``url`` with the latest ``downloadedAt``."""
        found = [ref for key, ref in self._state.refs().items() if key[0] == url]
        return max(found, key=lambda r: r.downloaded_at, default=None)

    # -- mutations ------------------------------------------------------------------------

    async def begin(self, owner: str) -> int:
        """Advance the owner's generation and mark it pending (references stay)."""
        async with self._lock:
            record = self._existing_or_new(owner)
            nxt = replace(record, generation=record.generation + 1, pending=True, tombstone=False)
            await self._commit(self._with_owner(owner, nxt), ())
            return nxt.generation

    async def publish(self, owner: str, generation: int, graph: Graph) -> bool:
        """Store ``graph`` if ``generation`` is current and pending; ``False`` otherwise."""
        async with self._lock:
            record = self._state.owners.get(owner)
            if record is None or not record.pending or record.generation != generation:
                return False
            nxt = OwnerRecord(
                generation=generation,
                metadata=graph.metadata,
                sources=tuple(s.ref for s in graph.sources),
            )
            await self._commit(self._with_owner(owner, nxt), graph.sources)
            return True

    async def delete(self, owner: str) -> int:
        """Release the owner's references; keep a newer, source-free tombstone generation."""
        async with self._lock:
            record = self._existing_or_new(owner)
            nxt = OwnerRecord(generation=record.generation + 1, tombstone=True)
            await self._commit(self._with_owner(owner, nxt), ())
            return nxt.generation

    async def import_legacy(
        self, owner: str, generation: int, pending: bool, graph: Graph | None
    ) -> bool:
        """Import a browser record, only when the Host has no record (nor tombstone) for it."""
        async with self._lock:
            if owner in self._state.owners:
                return False
            self._check_owner_room(owner)
            nxt = OwnerRecord(
                generation=generation,
                pending=pending,
                metadata=graph.metadata if graph is not None else None,
                sources=tuple(s.ref for s in graph.sources) if graph is not None else (),
            )
            sources = graph.sources if graph is not None else ()
            await self._commit(self._with_owner(owner, nxt), sources)
            return True

    async def put_opening(self, source: SourceInput, *, only_missing: bool) -> bool:
        """Store the opening snapshot (already checked against the manifest)."""
        async with self._lock:
            current = self._state.opening
            if only_missing and (current.content is not None or current.tombstone):
                return False
            nxt = Opening(generation=current.generation + 1, content=source.ref)
            await self._commit(_State(self._state.owners, nxt), (source,))
            return True

    async def delete_opening(self) -> int:
        """Release the opening snapshot; keep its generation as a tombstone."""
        async with self._lock:
            nxt = Opening(generation=self._state.opening.generation + 1, tombstone=True)
            await self._commit(_State(self._state.owners, nxt), ())
            return nxt.generation

    # -- internals ------------------------------------------------------------------------

    def _existing_or_new(self, owner: str) -> OwnerRecord:
        record = self._state.owners.get(owner)
        if record is None:
            self._check_owner_room(owner)
            return OwnerRecord()
        return record

    def _check_owner_room(self, owner: str) -> None:
        if owner not in self._state.owners and len(self._state.owners) >= MAX_OWNERS:
            raise CacheError(
                409, "RENDERING_CACHE_TOO_MANY_OWNERS", f"the cache holds {MAX_OWNERS} owners"
            )

    def _with_owner(self, owner: str, record: OwnerRecord) -> _State:
        owners = dict(self._state.owners)
        owners[owner] = record
        return _State(owners, self._state.opening)

    async def _commit(self, state: _State, new_sources: tuple[SourceInput, ...]) -> None:
        refs = state.refs()
        if len(refs) > MAX_SOURCES:
            raise CacheError(
                409, "RENDERING_CACHE_TOO_MANY_SOURCES", f"the cache would hold over {MAX_SOURCES}"
            )
        if sum(ref.size for ref in refs.values()) > MAX_TOTAL_BYTES:
            raise CacheError(
                409,
                "RENDERING_CACHE_TOTAL_TOO_LARGE",
                f"the cache would hold over {MAX_TOTAL_BYTES} bytes of sources",
            )
        data = state.encode()
        if len(data) > MAX_INDEX_BYTES:
            raise CacheError(
                409, "RENDERING_CACHE_INDEX_TOO_LARGE", f"the index would be over {MAX_INDEX_BYTES}"
            )
        try:
            await asyncio.to_thread(self._write, data, new_sources)
        except OSError:
            self._log.error("rendering cache write failed; the index is unchanged")
            raise CacheError(
                500, "RENDERING_CACHE_WRITE_FAILED", "the rendering cache could not be written"
            ) from None
        self._state = state
        await asyncio.to_thread(self._collect, state)

    def _write(self, index: bytes, new_sources: tuple[SourceInput, ...]) -> None:
        """Every source file first (an existing one is kept only if its bytes verify), then
        the index."""
        self.sources_dir.mkdir(parents=True, exist_ok=True)
        for source in new_sources:
            path = self.sources_dir / source_file_name(source.ref)
            if not _holds(path, source.data):
                atomic_write(path, source.data)
        atomic_write(self.index_path, index)

    def _collect(self, state: _State) -> None:
        """Delete every file under ``sources/`` that ``state`` does not reference."""
        keep = {source_file_name(ref) for ref in state.refs().values()}
        try:
            names = [p for p in self.sources_dir.iterdir() if p.name not in keep]
        except FileNotFoundError:
            return
        for path in names:
            with contextlib.suppress(OSError):
                path.unlink()
