"""Event rows stored as a deflate delta against an earlier row of the same kind.

A turn writes a dozen small events (a request header, a user and an assistant message, inbox
splices, turn markers) whose JSON differs from the previous turn's of the same type in a few
values: ids, the turn number, the text; and its chunked events (``bodies``) leave rows of
chunk ids that are mostly the previous turn's. Stored whole they are most of what a long story
adds to the log (issue 18, "durable growth per turn"). So an event row may hold, instead of
what ``bodies`` made of the event (its JSON, or the references to its chunks), a raw deflate
stream of that whose preset dictionary is an earlier row of the same kind in the same session
(its keyframe)::

    b"\\x02" <keyframe sid> b"," <keyframe seq> b"," <raw deflate stream>

A keyframe is never itself a delta, so a read inflates at most one level (no chains). The
first event of a kind in a session (per process: the keyframes are remembered in memory, not
stored) is written without a delta and becomes the keyframe; a later one that does not shrink
well against it (:data:`MAX_DELTA_RATIO`) is written without a delta and replaces it.

A keyframe is only used once the transaction that wrote it committed (the writer publishes
them after the commit; within one transaction its own earlier rows serve), so a rolled-back
row, whose seq a later event reuses, is never a dictionary. Rows are never updated or
deleted, so a committed keyframe stays readable forever, also from a fork that copied the
delta row (the row names its keyframe's own session).
"""

from __future__ import annotations

import sqlite3
import threading
import zlib
from collections.abc import Iterable
from typing import Final

from innkeeper_hostapi.sessions import EventData, ExtensionEvent, SessionError, event_type

__all__ = [
    "MARK_DELTA",
    "MAX_DELTA_RATIO",
    "DeltaCodec",
    "Keyframe",
    "KeyframeKey",
    "delta_kind",
]

#: First byte of a row whose ``data`` is a delta against a keyframe.
MARK_DELTA: Final = b"\x02"
#: A delta is kept only when it is at most this fraction of the plain JSON.
MAX_DELTA_RATIO: Final = 0.6
#: Bytes of keyframes remembered by the writer (over all sessions).
MAX_KEYFRAME_BYTES: Final = 8 * 1024 * 1024
#: Bytes of keyframes cached for reads (over all sessions).
MAX_CACHED_KEYFRAME_BYTES: Final = 8 * 1024 * 1024
#: Deflate level and memory level: a lone append pays the compression on the event loop, and
#: the deltas are almost as short at the fastest level.
_LEVEL: Final = 1
_MEM_LEVEL: Final = 8
_WBITS: Final = -15  # raw deflate: no zlib header or checksum (SQLite pages carry no CRC either)

#: Which keyframe an event is written against: its session (``sid``) and kind.
KeyframeKey = tuple[int, str]
#: A committed plain row: its seq and its bytes.
Keyframe = tuple[int, bytes]


def delta_kind(data: EventData) -> str:
    """The kind an event's keyframe must share: its type, and for a plugin event its name
    (two plugins' events have nothing in common)."""
    if isinstance(data, ExtensionEvent):
        return f"ext:{data.name}"
    return event_type(data)


class DeltaCodec:
    """Writes rows as deltas (writer side) and inflates them (readers, any thread)."""

    def __init__(self) -> None:
        #: Committed keyframes the writer compresses against.
        self._frames: dict[KeyframeKey, Keyframe] = {}
        self._frame_bytes = 0
        #: (sid, seq) -> keyframe bytes, for reads.
        self._cache: dict[tuple[int, int], bytes] = {}
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def encode(
        self,
        key: KeyframeKey,
        seq: int,
        blob: bytes,
        pending: dict[KeyframeKey, Keyframe],
    ) -> bytes:
        """The ``data`` column for the row ``blob`` of event ``seq`` (never a delta): a delta
        against the keyframe of ``key``, or ``blob`` itself, then recorded in ``pending`` (the
        transaction's own keyframes, to :meth:`publish` after its commit)."""
        frame = pending.get(key) or self._frames.get(key)
        if frame is not None:
            compressor = zlib.compressobj(
                _LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, zdict=frame[1]
            )
            delta = b"%b%d,%d,%b" % (
                MARK_DELTA,
                key[0],
                frame[0],
                compressor.compress(blob) + compressor.flush(),
            )
            if len(delta) <= len(blob) * MAX_DELTA_RATIO:
                return delta
        pending[key] = (seq, blob)
        return blob

    def publish(self, frames: Iterable[tuple[KeyframeKey, Keyframe]]) -> None:
        """Make committed keyframes available to later writes (call after the commit)."""
        for key, frame in frames:
            old = self._frames.get(key)
            added = len(frame[1]) - (len(old[1]) if old is not None else 0)
            if self._frame_bytes + added > MAX_KEYFRAME_BYTES:
                self._frames.clear()  # later events start new keyframes; keeps the bound
                self._frame_bytes = 0
                added = len(frame[1])
            self._frames[key] = frame
            self._frame_bytes += added

    def forget(self) -> None:
        """Drop every remembered keyframe (later events start new ones)."""
        self._frames.clear()
        self._frame_bytes = 0

    def expand(self, conn: sqlite3.Connection, blob: bytes) -> bytes:
        """The row a delta row ``blob`` stands for (plain JSON or a chunked row)."""
        try:
            sid_text, seq_text, stream = blob[1:].split(b",", 2)
            where = (int(sid_text), int(seq_text))
        except ValueError:
            raise SessionError("a stored event has a malformed delta header") from None
        frame = self._cache.get(where)
        if frame is None:
            row = conn.execute(
                "SELECT data FROM events WHERE sid = ? AND seq = ?", where
            ).fetchone()
            if row is None or bytes(row[0][:1]) == MARK_DELTA:
                raise SessionError("a stored event references a missing keyframe")
            frame = bytes(row[0])
            with self._lock:
                if self._cached_bytes + len(frame) > MAX_CACHED_KEYFRAME_BYTES:
                    self._cache.clear()  # cheap to refill; keeps the bound
                    self._cached_bytes = 0
                self._cache[where] = frame
                self._cached_bytes += len(frame)
        inflater = zlib.decompressobj(_WBITS, zdict=frame)
        try:
            plain = inflater.decompress(stream) + inflater.flush()
        except zlib.error as exc:
            raise SessionError(f"a stored event delta does not inflate: {exc}") from None
        if not inflater.eof:
            raise SessionError("a stored event delta is truncated")
        return plain

    def stats(self) -> dict[str, int]:
        """Keyframe bytes remembered for writes and cached for reads."""
        return {"keyframeBytes": self._frame_bytes, "cachedKeyframeBytes": self._cached_bytes}
