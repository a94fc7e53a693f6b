"""``TraceStore``: the bounded, durable home of the canonical assembly records.

One file per session, ``assembly-audit/<sha256(sessionId)[:32]>.json`` in the Tavern plugin's
data directory (hashed names: session ids may hold ``:`` and are never trusted as paths). Every
write builds the new file, encodes it, decodes a copy of those exact bytes, writes a temp file in
the same folder, fsyncs and renames (DESIGN.md "Conventions"); a failed write changes nothing on
disk or in memory. Bounds (:mod:`.limits`): records per session and bytes per session (oldest
records evicted first), sessions and total bytes (least recently written sessions evicted first),
bytes per record (compacted, never refused). Blocking file work runs in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from innkeeper_tavern.resources import atomic

from .limits import (
    MAX_FILE_READ_BYTES,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_SESSION,
    MAX_SESSION_BYTES,
    MAX_SESSIONS,
    MAX_TOTAL_BYTES,
    TRACE_DIR,
)
from .model import AssemblyRecord, SessionTraceFile

__all__ = ["TraceLimits", "TraceStore", "compact", "session_file_name"]

_encoder = msgspec.json.Encoder()
_file_decoder = msgspec.json.Decoder(SessionTraceFile)
_record_decoder = msgspec.json.Decoder(AssemblyRecord)


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """The store's caps (defaults from :mod:`.limits`; tests lower them)."""

    max_records_per_session: int = MAX_RECORDS_PER_SESSION
    max_sessions: int = MAX_SESSIONS
    max_record_bytes: int = MAX_RECORD_BYTES
    max_session_bytes: int = MAX_SESSION_BYTES
    max_total_bytes: int = MAX_TOTAL_BYTES

    def wire(self) -> dict[str, int]:
        """camelCase JSON for ``/capabilities`` and ``storage``."""
        return {
            "maxRecordsPerSession": self.max_records_per_session,
            "maxSessions": self.max_sessions,
            "maxRecordBytes": self.max_record_bytes,
            "maxSessionBytes": self.max_session_bytes,
            "maxTotalBytes": self.max_total_bytes,
        }


def session_file_name(session_id: str) -> str:
    """The file of ``session_id``'s records."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32] + ".json"


def _strip_decision_details(record: AssemblyRecord) -> bool:
    lore = record.lore
    if not lore:
        return False
    changed = False
    for book in lore.get("books") or ():
        for decision in book.get("decisions") or ():
            for key in ("primaryKeys", "secondaryKeys", "detail"):
                if key in decision:
                    del decision[key]
                    changed = True
    return changed


def _drop_decisions(record: AssemblyRecord) -> bool:
    lore = record.lore
    if not lore:
        return False
    changed = False
    for book in lore.get("books") or ():
        decisions = book.get("decisions") or []
        kept = [d for d in decisions if d.get("decision") == "included"]
        if len(kept) != len(decisions):
            book["decisions"] = kept
            book["decisionsOmitted"] = len(decisions) - len(kept)
            changed = True
    return changed


def compact(record: AssemblyRecord, max_bytes: int) -> tuple[AssemblyRecord, bytes]:
    """Fit ``record`` into ``max_bytes`` of JSON: drop decision details, then rejected
    decisions, then section sources, then sections and lore; as a last resort keep only its
    identity, status, references, hashes and counts. ``compacted`` names what went."""
    data = _encoder.encode(record)
    if len(data) <= max_bytes:
        return record, data
    record = _record_decoder.decode(data)  # a private copy we may edit
    steps: list[tuple[str, Any]] = [
        ("lore.decisionDetails", _strip_decision_details),
        ("lore.rejectedDecisions", _drop_decisions),
    ]
    for name, step in steps:
        if step(record):
            record.compacted.append(name)
            data = _encoder.encode(record)
            if len(data) <= max_bytes:
                return record, data
    if any(s.sources for s in record.sections):
        record.sections = tuple(msgspec.structs.replace(s, sources=()) for s in record.sections)
        record.compacted.append("sections.sources")
        data = _encoder.encode(record)
        if len(data) <= max_bytes:
            return record, data
    for name in ("sections", "lore", "resources", "composition", "diagnostics", "parameters"):
        if name == "sections":
            record.sections = ()
        elif name == "diagnostics":
            record.diagnostics = []
        else:
            setattr(record, name, None)
        record.compacted.append(name)
        data = _encoder.encode(record)
        if len(data) <= max_bytes:
            return record, data
    minimal = AssemblyRecord(
        record_id=record.record_id,
        audit_id=record.audit_id,
        session_id=record.session_id,
        session_format_version=record.session_format_version,
        turn=record.turn,
        step=record.step,
        created_at=record.created_at,
        captured_at=record.captured_at,
        status=record.status,
        system=record.system,
        references=record.references,
        hashes=record.hashes,
        counts=record.counts,
        authority=record.authority,
        compacted=[*record.compacted, "all-but-references"],
    )
    return minimal, _encoder.encode(minimal)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TraceStore:
    """Per-session files of :class:`AssemblyRecord`, bounded and atomically written."""

    def __init__(
        self,
        data_dir: Path,
        *,
        limits: TraceLimits | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.folder = Path(data_dir) / TRACE_DIR
        self.limits = limits or TraceLimits()
        self.log = logger or logging.getLogger(__name__)
        #: file name → (bytes, last write order); rebuilt from ``stat`` at open.
        self._index: dict[str, tuple[int, float]] = {}
        self._lock = asyncio.Lock()
        self._clock = 0.0

    # ------------------------------------------------------------------ open / stats

    async def open(self) -> None:
        """Index the folder (sizes and mtimes only; no file is parsed) and drop stale temps."""
        self._index = await asyncio.to_thread(self._scan)
        self._clock = max((t for _, t in self._index.values()), default=0.0)

    def _scan(self) -> dict[str, tuple[int, float]]:
        index: dict[str, tuple[int, float]] = {}
        if not self.folder.is_dir():
            return index
        for entry in os.scandir(self.folder):
            if entry.name.endswith(atomic.TEMP_SUFFIX):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                continue
            if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                stat = entry.stat(follow_symlinks=False)
                index[entry.name] = (stat.st_size, stat.st_mtime)
        return index

    @property
    def total_bytes(self) -> int:
        """Bytes of every session file."""
        return sum(size for size, _ in self._index.values())

    @property
    def session_count(self) -> int:
        """Sessions that have records."""
        return len(self._index)

    def storage(self, session_id: str | None = None) -> dict[str, Any]:
        """``storage`` block of the routes: usage and limits."""
        out: dict[str, Any] = {
            "schemaVersion": 4,
            "sessions": self.session_count,
            "bytes": self.total_bytes,
            **self.limits.wire(),
        }
        if session_id is not None:
            entry = self._index.get(session_file_name(session_id))
            out["sessionBytes"] = entry[0] if entry else 0
        return out

    # ------------------------------------------------------------------ reads

    async def records(self, session_id: str) -> list[AssemblyRecord]:
        """The session's records, oldest first (empty when it has none or its file is bad)."""
        name = session_file_name(session_id)
        if name not in self._index:
            return []
        loaded = await asyncio.to_thread(self._read, name)
        if loaded is None or loaded.session_id != session_id:
            return []
        return loaded.records

    async def get(self, session_id: str, record_id: str) -> AssemblyRecord | None:
        """One record by id."""
        for record in await self.records(session_id):
            if record.record_id == record_id:
                return record
        return None

    def _read(self, name: str) -> SessionTraceFile | None:
        path = self.folder / name
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > MAX_FILE_READ_BYTES:
                    self.log.warning("assembly audit file %s is too large; not read", name)
                    return None
                data = handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.log.warning("assembly audit file %s unreadable (%s)", name, type(exc).__name__)
            return None
        try:
            return _file_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.log.error("assembly audit file %s is invalid; it will be replaced", name)
            return None

    # ------------------------------------------------------------------ writes

    async def add(self, session_id: str, records: list[AssemblyRecord]) -> list[AssemblyRecord]:
        """Append ``records`` (replacing any with the same ``recordId``) atomically.

        Returns what was stored (compacted records included). Raises ``OSError`` if the disk
        refuses the write; nothing changed then.
        """
        if not records:
            return []
        async with self._lock:
            return await asyncio.to_thread(self._add, session_id, records)

    def _add(self, session_id: str, records: list[AssemblyRecord]) -> list[AssemblyRecord]:
        limits = self.limits
        name = session_file_name(session_id)
        current = self._read(name) if name in self._index else None
        kept = (
            list(current.records)
            if current is not None and current.session_id == session_id
            else []
        )
        stored: list[AssemblyRecord] = []
        sizes: dict[str, int] = {}
        new_ids = {r.record_id for r in records}
        kept = [r for r in kept if r.record_id not in new_ids]
        for record in kept:
            sizes[record.record_id] = len(_encoder.encode(record))
        for record in records:
            fitted, data = compact(record, limits.max_record_bytes)
            stored.append(fitted)
            sizes[fitted.record_id] = len(data)
        merged = [*kept, *stored]
        merged = merged[-limits.max_records_per_session :]
        while len(merged) > 1 and sum(sizes[r.record_id] for r in merged) + 512 > (
            limits.max_session_bytes
        ):
            merged.pop(0)
        document = SessionTraceFile(session_id=session_id, updated_at=_now(), records=merged)
        data = _encoder.encode(document)
        if _file_decoder.decode(data).session_id != session_id:  # validate a decoded copy
            raise ValueError("assembly audit file did not round-trip")
        atomic.atomic_write(self.folder / name, data)
        self._clock = max(self._clock + 1e-6, _mtime(self.folder / name))
        self._index[name] = (len(data), self._clock)
        self._evict(keep=name)
        stored_ids = {r.record_id for r in merged}
        return [r for r in stored if r.record_id in stored_ids]

    def _evict(self, *, keep: str) -> None:
        limits = self.limits
        order = sorted((t, n) for n, (_, t) in self._index.items() if n != keep)
        while order and (
            len(self._index) > limits.max_sessions or self.total_bytes > limits.max_total_bytes
        ):
            _, victim = order.pop(0)
            try:
                os.unlink(self.folder / victim)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self.log.warning("assembly audit eviction of %s failed (%s)", victim, exc)
                continue
            del self._index[victim]

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session's records (``True`` if it had any)."""
        name = session_file_name(session_id)
        async with self._lock:
            if name not in self._index:
                return False
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(os.unlink, self.folder / name)
            del self._index[name]
            return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
