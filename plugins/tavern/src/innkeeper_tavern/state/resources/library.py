"""A folder of JSON documents of one kind with a metadata index that serves listings.

Layout: ``<root>/<folder>/<id>.json`` holds one document (``schemaVersion``, ``id``,
``createdAt``, ``updatedAt`` and the kind's body fields); ``<root>/<folder>/.index.json`` holds
one :class:`IndexEntry` per document — id, display name, timestamps, the file fingerprint
(size, mtime, SHA-256) and a small kind-specific summary. Listings read only the in-memory index
(`docs/contract/catalogs.md#scope-catalog`: a metadata index with ID, name and file
fingerprints); opening the library re-reads only documents whose fingerprint changed, so files
added, edited or removed while the host was down are picked up.

Every mutation runs under the library's ``asyncio.Lock``, builds the new state on a copy,
validates the encoded bytes by decoding them back, writes atomically (:mod:`.atomic`) and only
then publishes the new index in memory. A failed write rolls back what it already wrote, so
memory and disk keep the previous state.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

import msgspec

from .atomic import (
    atomic_write,
    move,
    read_bounded,
    remove_file,
    remove_stale_temps,
    trash_path,
)
from .codec import SCHEMA_VERSION, body_decoder, decode_builtins, decode_typed
from .errors import (
    DOCUMENT_TOO_LARGE,
    RESOURCE_LIMIT,
    REVISION_CONFLICT,
    STORAGE_READ_FAILED,
    STORAGE_WRITE_FAILED,
    ResourceError,
)

T = TypeVar("T")

#: `docs/resources.md#original-data`: resource ids match this pattern.
ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,100}")
#: Name of the index file inside a library folder (a dot name can never be an id).
INDEX_FILE: Final = ".index.json"
#: Our bound on the index file itself (4,096 entries with summaries fit easily).
MAX_INDEX_BYTES: Final = 64 << 20
#: Records a ``keep_written`` library keeps in memory: the last written, read or re-read ones
#: (least recently used dropped).
WRITTEN_RECORDS_KEPT: Final = 4

Clock = Callable[[], str]
IdFactory = Callable[[str], str]


def valid_id(value: str) -> bool:
    """Whether ``value`` can name a stored resource (no path separators, bounded)."""
    return ID_PATTERN.fullmatch(value) is not None


class IndexEntry(msgspec.Struct, rename="camel", kw_only=True):
    """One document's metadata: enough to list it without reading its body."""

    id: str
    name: str
    created_at: str
    updated_at: str
    size: int
    mtime_ns: int
    sha256: str
    summary: dict[str, Any] = msgspec.field(default_factory=dict)


class _IndexFile(msgspec.Struct, rename="camel", kw_only=True):
    schema_version: int = SCHEMA_VERSION
    entries: list[IndexEntry] = msgspec.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Record(Generic[T]):
    """A stored document: its id, timestamps and typed body."""

    id: str
    created_at: str
    updated_at: str
    body: T


class IncrementalDecoder(Protocol):
    """Decodes a kind's documents reusing what a new revision shares with an earlier one."""

    def decode(
        self, data: bytes, previous: Any = None, memo: Any = None
    ) -> tuple[str, str, str, Any, Any]:
        """``(id, createdAt, updatedAt, body, memo)``; ``previous`` and ``memo`` are an earlier
        revision's body and the memo its decode returned. ``ValueError`` when invalid."""
        ...


@dataclass(frozen=True, slots=True)
class DocumentKind(Generic[T]):
    """How one resource kind is stored: folder, body type, limits and summary."""

    name: str
    folder: str
    body_type: type[T]
    id_prefix: str
    not_found_code: str
    max_document_bytes: int
    max_count: int
    display_name: Callable[[T], str]
    summarize: Callable[[T], dict[str, Any]]
    artifact_folder: str | None = None
    artifact_suffix: str = ".bin"
    max_artifact_bytes: int = 0
    #: Keep the last few written, read and re-read records in memory and answer
    #: :meth:`DocumentLibrary.get` with them while they are current: the next read after an edit
    #: of a large document (a 10,000-entry world book) then costs no disk read and decode, and
    #: keeps the identity of what the edit left unchanged (the world-book compiler reuses
    #: unchanged entries by it).
    keep_written: bool = False
    #: Decodes a document changed on disk reusing the parts of the previous body in memory
    #: (``keep_written``) that the edit left unchanged: the world-book kind decodes only the
    #: entries whose bytes changed and keeps the other entry objects by identity.
    incremental: IncrementalDecoder | None = None


_index_decoder: Final = msgspec.json.Decoder(_IndexFile)
_encoder: Final = msgspec.json.Encoder()


_HEADER_FIELDS: Final = frozenset({"schemaVersion", "id", "createdAt", "updatedAt"})


def _spliceable(body_type: type[Any]) -> bool:
    """A Struct body none of whose encoded field names is a header field (then its own
    encoding, appended to the header's, is the merged document)."""
    try:
        if not issubclass(body_type, msgspec.Struct):
            return False
    except TypeError:  # a generic alias (e.g. dict[str, Any]) is not a class
        return False
    names = {f.encode_name for f in msgspec.structs.fields(body_type)}
    return not names & _HEADER_FIELDS


class DocumentLibrary(Generic[T]):
    """The documents of one :class:`DocumentKind` under ``root``."""

    def __init__(
        self,
        root: Path,
        kind: DocumentKind[T],
        *,
        clock: Clock,
        ids: IdFactory,
        logger: logging.Logger,
    ) -> None:
        self.kind = kind
        self.folder = root / kind.folder
        self.artifacts = root / kind.artifact_folder if kind.artifact_folder else None
        self.lock = asyncio.Lock()
        self._clock = clock
        self._ids = ids
        self._logger = logger
        self._index: dict[str, IndexEntry] = {}
        #: id → (sha256, record, memo of its decode) of the last written, read or re-read
        #: documents (``kind.keep_written``; the memo is ``kind.incremental``'s, else ``None``)
        self._written: OrderedDict[str, tuple[str, Record[T], Any]] = OrderedDict()
        self._decoder = body_decoder(kind.body_type)
        #: Whether :meth:`encode` may splice the natively encoded body after the header.
        self._splice_body = _spliceable(kind.body_type)
        self._opened = False
        #: Incremented whenever the published index changes (listing caches key on it).
        self.revision = 0

    # ------------------------------------------------------------------ paths and codecs

    def path(self, resource_id: str) -> Path:
        """The document file of ``resource_id`` (the id must be valid)."""
        return self.folder / f"{resource_id}.json"

    def artifact_path(self, resource_id: str) -> Path | None:
        """The side file (e.g. a card's cover) of ``resource_id``, if the kind has one."""
        if self.artifacts is None:
            return None
        return self.artifacts / f"{resource_id}{self.kind.artifact_suffix}"

    def encode(self, record: Record[T]) -> bytes:
        """The on-disk bytes of ``record``: the header fields, then the body's.

        A Struct body is encoded natively and spliced after the header (the bytes equal those
        of encoding the merged object, without first building a 14 MB book as Python values);
        a body whose fields could collide with the header's goes through the merged object.
        """
        header = {
            "schemaVersion": SCHEMA_VERSION,
            "id": record.id,
            "createdAt": record.created_at,
            "updatedAt": record.updated_at,
        }
        if self._splice_body:
            body_bytes = _encoder.encode(record.body)
            if body_bytes[:1] != b"{":
                raise TypeError(f"{self.kind.name} body must encode to an object")
            head = _encoder.encode(header)
            if body_bytes == b"{}":
                return head
            return head[:-1] + b"," + body_bytes[1:]
        doc: dict[str, Any] = dict(header)
        body = msgspec.to_builtins(record.body)
        if not isinstance(body, dict):
            raise TypeError(f"{self.kind.name} body must encode to an object")
        doc.update(body)
        return _encoder.encode(doc)

    def decode(self, data: bytes) -> Record[T]:
        """Parse on-disk bytes; raises ``ValueError`` when they are not a valid document."""
        if self._decoder is None:
            return self._decode_builtins(data)
        return Record(*decode_typed(data, self._decoder, self.kind.name))

    def _decode_memo(
        self, data: bytes, previous: tuple[Record[T], Any] | None = None
    ) -> tuple[Record[T], Any]:
        """:meth:`decode` plus the memo a later re-read reuses (``kind.incremental``)."""
        incremental = self.kind.incremental
        if incremental is None or not self.kind.keep_written:
            return self.decode(data), None
        body, memo = (None, None) if previous is None else (previous[0].body, previous[1])
        rid, created, updated, doc, new_memo = incremental.decode(data, body, memo)
        return Record(rid, created, updated, doc), new_memo

    def _decode_builtins(self, data: bytes) -> Record[T]:
        return Record(*decode_builtins(data, self.kind.body_type, self.kind.name))

    def _entry(self, record: Record[T], data: bytes, stat: os.stat_result) -> IndexEntry:
        return IndexEntry(
            id=record.id,
            name=self.kind.display_name(record.body),
            created_at=record.created_at,
            updated_at=record.updated_at,
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            sha256=hashlib.sha256(data).hexdigest(),
            summary=self.kind.summarize(record.body),
        )

    # ------------------------------------------------------------------ open / index

    async def open(self) -> None:
        """Load the index, re-reading only documents whose fingerprint changed."""
        if self._opened:
            return
        async with self.lock:
            if not self._opened:
                self._index, changed, fresh = await asyncio.to_thread(self._load_index, {})
                self._keep_fresh(fresh)
                self.revision += 1
                if changed:
                    await asyncio.to_thread(self._write_index, self._index)
                self._opened = True

    async def reload(self) -> None:
        """Re-scan the folder (after direct external edits): documents whose fingerprint changed
        are re-read, vanished ones dropped, and the index published and rewritten."""
        async with self.lock:
            previous = {rid: (record, memo) for rid, (_, record, memo) in self._written.items()}
            self._index, changed, fresh = await asyncio.to_thread(self._load_index, previous)
            self._keep_fresh(fresh)
            self.revision += 1
            if changed:
                await asyncio.to_thread(self._write_index, self._index)
            self._opened = True

    def _keep_fresh(self, fresh: Mapping[str, tuple[Record[T], Any]]) -> None:
        """After a (re)scan: forget kept records whose document changed or went, keep the ones
        just re-read."""
        for rid in [r for r, (sha, _, _) in self._written.items() if self._sha(r) != sha]:
            del self._written[rid]
        for rid, (record, memo) in fresh.items():
            self._remember(self._index[rid].sha256, record, memo)

    def _sha(self, resource_id: str) -> str | None:
        entry = self._index.get(resource_id)
        return None if entry is None else entry.sha256

    def _remember(self, sha256: str, record: Record[T], memo: Any = None) -> None:
        if not self.kind.keep_written:
            return
        self._written[record.id] = (sha256, record, memo)
        self._written.move_to_end(record.id)
        while len(self._written) > WRITTEN_RECORDS_KEPT:
            self._written.popitem(last=False)

    def _load_index(
        self, previous: Mapping[str, tuple[Record[T], Any]]
    ) -> tuple[dict[str, IndexEntry], bool, dict[str, tuple[Record[T], Any]]]:
        """Scan the folder: the new index, whether it differs from the stored one, and the
        records re-read with their memos (``previous``: records in memory with theirs, for
        :attr:`DocumentKind.incremental`)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.folder)
        if self.artifacts is not None:
            remove_stale_temps(self.artifacts)
        old: dict[str, IndexEntry] = {}
        try:
            raw = read_bounded(self.folder / INDEX_FILE, MAX_INDEX_BYTES)
        except ResourceError:
            raw = b"oversized"
        if raw is not None:
            try:
                old = {e.id: e for e in _index_decoder.decode(raw).entries}
            except (msgspec.DecodeError, msgspec.ValidationError):
                self._logger.warning("%s index is unreadable; rebuilding it", self.kind.name)
        index: dict[str, IndexEntry] = {}
        fresh: dict[str, tuple[Record[T], Any]] = {}
        changed = False
        with os.scandir(self.folder) as it:
            files = [e for e in it if e.name.endswith(".json") and not e.name.startswith(".")]
        for file in files:
            resource_id = file.name[: -len(".json")]
            if not valid_id(resource_id):
                continue
            try:
                stat = file.stat()
            except FileNotFoundError:
                continue
            known = old.get(resource_id)
            if known and known.size == stat.st_size and known.mtime_ns == stat.st_mtime_ns:
                index[resource_id] = known
                continue
            changed = True
            try:
                data = read_bounded(Path(file.path), self.kind.max_document_bytes)
            except ResourceError:
                self._logger.warning("skipping oversized %s %s", self.kind.name, file.name)
                continue
            if data is None:
                continue
            try:
                record, memo = self._decode_memo(data, previous.get(resource_id))
            except ValueError as exc:
                self._logger.warning(
                    "skipping unreadable %s %s: %s", self.kind.name, file.name, exc
                )
                continue
            if record.id != resource_id:
                self._logger.warning("skipping %s %s: id mismatch", self.kind.name, file.name)
                continue
            index[resource_id] = self._entry(record, data, stat)
            if self.kind.keep_written:
                fresh[resource_id] = (record, memo)
        if set(old) != set(index):
            changed = True
        self._sweep_orphan_artifacts(index)
        return index, changed, fresh

    def _sweep_orphan_artifacts(self, index: Mapping[str, IndexEntry]) -> None:
        # A crash after writing a cover but before its document leaves the cover alone.
        if self.artifacts is None or not self.artifacts.is_dir():
            return
        suffix = self.kind.artifact_suffix
        for name in os.listdir(self.artifacts):
            if name.endswith(suffix) and name[: -len(suffix)] not in index:
                with contextlib.suppress(OSError):
                    (self.artifacts / name).unlink()

    def _write_index(self, index: Mapping[str, IndexEntry]) -> None:
        atomic_write(
            self.folder / INDEX_FILE,
            _encoder.encode(_IndexFile(entries=list(index.values()))),
        )

    # ------------------------------------------------------------------ reads

    def entries(self) -> list[IndexEntry]:
        """Every document's index entry (unsorted), without reading any body."""
        return list(self._index.values())

    def entry(self, resource_id: str) -> IndexEntry | None:
        """The index entry of ``resource_id``, if stored."""
        return self._index.get(resource_id)

    def exists(self, resource_id: str) -> bool:
        """Whether ``resource_id`` is stored."""
        return resource_id in self._index

    def count(self) -> int:
        """How many documents are stored."""
        return len(self._index)

    def not_found(self, resource_id: str) -> ResourceError:
        """The 404 error of this kind."""
        return ResourceError(
            404, self.kind.not_found_code, f"{self.kind.name} {resource_id!r} does not exist"
        )

    async def get(self, resource_id: str) -> Record[T]:
        """Read and decode a document (off the event loop).

        Treat the record as read-only: with ``kind.keep_written`` it may be the object that was
        just written (the same one every reader gets until the next write).
        """
        entry = self._index.get(resource_id)
        if entry is None:
            raise self.not_found(resource_id)
        written = self._written.get(resource_id)
        if written is not None and written[0] == entry.sha256:
            self._written.move_to_end(resource_id)
            return written[1]
        record, current, memo = await asyncio.to_thread(self._read, resource_id, entry)
        if current and self._index.get(resource_id) is entry:
            self._remember(entry.sha256, record, memo)
        return record

    def _read(
        self, resource_id: str, entry: IndexEntry | None = None
    ) -> tuple[Record[T], bool, Any]:
        """The decoded document, whether its file still has the fingerprint of ``entry`` (size
        and mtime, as the index scan checks: then the record is what the index names) and the
        memo of its decode."""
        path = self.path(resource_id)
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise self.not_found(resource_id) from None
        except OSError:
            stat = None
        data = read_bounded(path, self.kind.max_document_bytes)
        if data is None:
            raise self.not_found(resource_id)
        with contextlib.suppress(OSError):
            after = path.stat()
            if stat is not None and (after.st_size, after.st_mtime_ns) != (
                stat.st_size,
                stat.st_mtime_ns,
            ):
                stat = None  # changed while it was read
        current = (
            entry is not None
            and stat is not None
            and (stat.st_size, stat.st_mtime_ns) == (entry.size, entry.mtime_ns)
        )
        try:
            record, memo = self._decode_memo(data)
            return record, current, memo
        except ValueError as exc:
            self._logger.error("stored %s %s is corrupt: %s", self.kind.name, resource_id, exc)
            raise ResourceError(
                500, STORAGE_READ_FAILED, f"stored {self.kind.name} {resource_id!r} is unreadable"
            ) from None

    async def read_artifact(self, resource_id: str) -> bytes | None:
        """The side file of ``resource_id`` (``None`` when there is none)."""
        path = self.artifact_path(resource_id)
        if path is None:
            return None
        return await asyncio.to_thread(read_bounded, path, self.kind.max_artifact_bytes)

    # ------------------------------------------------------------------ writes (hold self.lock)

    def _checked_bytes(self, record: Record[T]) -> tuple[bytes, Any]:
        """The encoded document and the memo of decoding it back (which also describes
        ``record``: the same entries in the same order).

        With ``kind.incremental``, the read-back check reuses the stored revision's decode: spans
        byte-identical to the ones it decoded are not decoded again (a one-entry edit of a large
        book checks the entry it changed, and that the document still splits and parses).
        """
        data = self.encode(record)
        if len(data) > self.kind.max_document_bytes:
            raise ResourceError(
                413,
                DOCUMENT_TOO_LARGE,
                f"{self.kind.name} document would be {len(data)} bytes; "
                f"at most {self.kind.max_document_bytes} are allowed",
            )
        stored = self._written.get(record.id)
        previous = None
        if stored is not None and stored[0] == self._sha(record.id):
            previous = (stored[1], stored[2])
        # Validate a copy before publishing it: what we write must read back.
        try:
            _, memo = self._decode_memo(data, previous)
        except ValueError as exc:
            self._logger.error("%s %s does not round-trip: %s", self.kind.name, record.id, exc)
            raise ResourceError(
                500, STORAGE_WRITE_FAILED, f"{self.kind.name} could not be stored; nothing changed"
            ) from None
        return data, memo

    def _publish(self, record: Record[T], data: bytes, artifact: bytes | None) -> IndexEntry:
        """Write document (and artifact) then the index; undo on failure. Blocking."""
        path = self.path(record.id)
        art_path = self.artifact_path(record.id)
        old_data = read_bounded(path, self.kind.max_document_bytes)
        old_art = (
            read_bounded(art_path, self.kind.max_artifact_bytes)
            if art_path is not None and artifact is not None
            else None
        )
        wrote_art = False
        try:
            if artifact is not None and art_path is not None:
                atomic_write(art_path, artifact)
                wrote_art = True
            atomic_write(path, data)
            entry = self._entry(record, data, path.stat())
            index = dict(self._index)
            index[record.id] = entry
            self._write_index(index)
        except BaseException:
            with contextlib.suppress(OSError):
                if old_data is None:
                    remove_file(path)
                else:
                    atomic_write(path, old_data)
                if wrote_art and art_path is not None:
                    if old_art is None:
                        remove_file(art_path)
                    else:
                        atomic_write(art_path, old_art)
            raise
        return entry

    async def _commit(self, record: Record[T], artifact: bytes | None = None) -> Record[T]:
        # Encoding and the read-back check of a large card take time: keep them off the loop.
        data, memo = await asyncio.to_thread(self._checked_bytes, record)
        try:
            entry = await asyncio.to_thread(self._publish, record, data, artifact)
        except OSError as exc:
            self._logger.error("writing %s %s failed: %s", self.kind.name, record.id, exc)
            raise ResourceError(
                500, STORAGE_WRITE_FAILED, f"could not write {self.kind.name}; nothing changed"
            ) from None
        self._index = {**self._index, record.id: entry}
        self.revision += 1
        self._remember(entry.sha256, record, memo)
        return record

    def now(self) -> str:
        """The injected clock's current timestamp."""
        return self._clock()

    def new_id(self) -> str:
        """A fresh id not used by any stored document."""
        for _ in range(16):
            candidate = self._ids(self.kind.id_prefix)
            if valid_id(candidate) and candidate not in self._index:
                return candidate
        raise RuntimeError("id factory keeps returning used or invalid ids")

    async def create_locked(self, body: T, *, artifact: bytes | None = None) -> Record[T]:
        """Store a new document (caller holds :attr:`lock`)."""
        if len(self._index) >= self.kind.max_count:
            raise ResourceError(
                409,
                RESOURCE_LIMIT,
                f"at most {self.kind.max_count} {self.kind.name}s can be stored",
            )
        now = self._clock()
        return await self._commit(Record(self.new_id(), now, now, body), artifact)

    async def create(self, body: T, *, artifact: bytes | None = None) -> Record[T]:
        """Store a new document under a fresh id; returns the stored record."""
        async with self.lock:
            return await self.create_locked(body, artifact=artifact)

    def revision_of(self, resource_id: str) -> str | None:
        """The document's revision: the SHA-256 of its stored bytes (``None`` if not stored)."""
        return self._sha(resource_id)

    async def get_with_revision(self, resource_id: str) -> tuple[Record[T], str]:
        """A document and the revision it was read at (under the lock, so they agree)."""
        async with self.lock:
            record = await self.get(resource_id)
            return record, self._index[resource_id].sha256

    async def update_locked(
        self,
        resource_id: str,
        edit: Callable[[T], T],
        *,
        expected_revision: str | None = None,
        artifact: bytes | None = None,
    ) -> Record[T]:
        """Apply ``edit`` to the stored body and save it (caller holds :attr:`lock`).

        ``edit`` may raise (e.g. a ``FormatError``): nothing is written then. With
        ``expected_revision`` (a :meth:`revision_of` read earlier) a document changed since is
        refused with 409 ``RESOURCE_REVISION_CONFLICT``; ``artifact`` replaces the side file.
        """
        current = await self.get(resource_id)
        if expected_revision is not None and expected_revision != self._sha(resource_id):
            raise ResourceError(
                409,
                REVISION_CONFLICT,
                f"{self.kind.name} {resource_id!r} changed since revision "
                f"{expected_revision[:12]}; read it again",
            )
        # Edits are pure but may deep-copy a large original: run them off the loop.
        body = await asyncio.to_thread(edit, current.body)
        record = Record(resource_id, current.created_at, self._clock(), body)
        return await self._commit(record, artifact)

    async def update(
        self,
        resource_id: str,
        edit: Callable[[T], T],
        *,
        expected_revision: str | None = None,
        artifact: bytes | None = None,
    ) -> Record[T]:
        """Read, edit and save one document under the lock; returns the new record."""
        async with self.lock:
            return await self.update_locked(
                resource_id, edit, expected_revision=expected_revision, artifact=artifact
            )

    async def delete_locked(self, resource_id: str) -> IndexEntry:
        """Remove a document and its artifact (caller holds :attr:`lock`)."""
        entry = self._index.get(resource_id)
        if entry is None:
            raise self.not_found(resource_id)
        index = dict(self._index)
        del index[resource_id]
        try:
            await asyncio.to_thread(self._unpublish, resource_id, index)
        except OSError as exc:
            self._logger.error("deleting %s %s failed: %s", self.kind.name, resource_id, exc)
            raise ResourceError(
                500, STORAGE_WRITE_FAILED, f"could not delete {self.kind.name}; nothing changed"
            ) from None
        self._index = index
        self._written.pop(resource_id, None)
        self.revision += 1
        return entry

    def _unpublish(self, resource_id: str, index: Mapping[str, IndexEntry]) -> None:
        # Move the document aside first: a crash before the index is rewritten then drops the
        # stale entry at the next open (the hidden trash file is swept) instead of resurrecting
        # the deleted document; a failed index write moves it back.
        path = self.path(resource_id)
        trash = trash_path(path)
        move(path, trash)
        try:
            self._write_index(index)
        except OSError:
            with contextlib.suppress(OSError):
                move(trash, path)
            raise
        with contextlib.suppress(OSError):
            remove_file(trash)
        art = self.artifact_path(resource_id)
        if art is not None:
            # The document is gone; a cover left behind is only wasted bytes, never state.
            with contextlib.suppress(OSError):
                remove_file(art)
