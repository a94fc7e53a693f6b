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

The same text often crosses kinds within a turn: the user's words are in the inbox splice
that queued them and again in the ``user/message`` the turn made of them. So a row may also
name a *base*, a recent row of the same session of any kind, whose content follows the
keyframe in the preset dictionary::

    b"\\x03" <sid> b"," <keyframe seq> b"," <base seq> b"," <raw deflate stream>

Two bases are tried: the newest row of the same kind (a row that grows turn by turn, such as
the history references of an untrimmed story, is closest to its predecessor, not to an old
keyframe) and the row of another kind in which most of a few probes of the row's bytes occur;
the shorter delta is kept when it is shorter than the plain one. A base is never itself a
based row (at most a one-level delta), so a read inflates at most two levels.

Keyframes and bases are only used once the transaction that wrote them committed (the writer
publishes them after the commit; within one transaction its own earlier rows serve), so a
rolled-back row, whose seq a later event reuses, is never a dictionary. Rows are never updated
or deleted, so a committed keyframe or base stays readable forever, also from a fork that
copied the delta row (the row names its dictionaries' own session).
"""

from __future__ import annotations

import sqlite3
import threading
import zlib
from dataclasses import dataclass, field
from typing import Final

from innkeeper_hostapi.sessions import (
    EventData,
    ExtensionEvent,
    InboxSpliced,
    SessionError,
    event_type,
)

__all__ = [
    "MARK_BASED_DELTA",
    "MARK_DELTA",
    "MAX_DELTA_RATIO",
    "DeltaCodec",
    "Keyframe",
    "KeyframeKey",
    "PendingDeltas",
    "delta_kind",
    "is_delta",
    "raw_deflate",
]

#: First byte of a row whose ``data`` is a delta against a keyframe.
MARK_DELTA: Final = b"\x02"
#: First byte of a row whose ``data`` is a delta against a keyframe followed by a base row.
MARK_BASED_DELTA: Final = b"\x03"
#: A delta is kept only when it is at most this fraction of the plain JSON.
MAX_DELTA_RATIO: Final = 0.6
#: Bytes of keyframes remembered by the writer (over all sessions).
MAX_KEYFRAME_BYTES: Final = 8 * 1024 * 1024
#: Bytes of keyframes and bases cached for reads (over all sessions).
MAX_CACHED_KEYFRAME_BYTES: Final = 8 * 1024 * 1024
#: Recent rows of a session the writer remembers as possible bases.
RECENT_BASES: Final = 8
#: A row whose delta against its keyframe is shorter than this is not tried against a base
#: (there is little to gain, and a try costs a compression of the row): most rows of a turn.
MIN_DELTA_FOR_BASES: Final = 64
#: Rows shorter or longer than this are not tried against a base, nor kept as one.
MIN_BASE_BYTES: Final = 128
MAX_BASE_BYTES: Final = 16 * 1024
#: Bytes of possible bases remembered by the writer (over all sessions).
MAX_RECENT_BYTES: Final = 4 * 1024 * 1024
#: Probes of a row looked for in possible bases: this many, of this many bytes each, spread
#: evenly over the row.
_PROBES: Final = 8
_PROBE_BYTES: Final = 16
#: A based delta is kept only when it is at least this many bytes shorter than the plain one.
_MIN_BASE_SAVING: Final = 8
#: Deflate level and largest memory level: a lone append pays the compression on the event
#: loop (:func:`raw_deflate` sizes the window and hash table to the row).
_LEVEL: Final = 6
_MEM_LEVEL: Final = 8
_WBITS: Final = -15  # raw deflate: no zlib header or checksum (SQLite pages carry no CRC either)
#: Deflate refers at most this far back: the end of a dictionary is all it uses.
_WINDOW: Final = 32 * 1024

#: Which keyframe an event is written against: its session (``sid``) and kind.
KeyframeKey = tuple[int, str]
#: A committed plain row: its seq and its bytes.
Keyframe = tuple[int, bytes]


@dataclass
class PendingDeltas:
    """What one transaction's rows add to the writer's dictionaries, published after it
    commits (:meth:`DeltaCodec.publish`); until then only that transaction uses them."""

    #: New keyframes by kind.
    frames: dict[KeyframeKey, Keyframe] = field(default_factory=dict)
    #: Rows that may serve as bases: (sid, seq, kind, row bytes), in order.
    bases: list[tuple[int, int, str, bytes]] = field(default_factory=list)


def delta_kind(data: EventData) -> str:
    """The kind an event's keyframe must share: its type, for a plugin event its name (two
    plugins' events have nothing in common), for an inbox splice its operation (a claim
    lists seqs, an insert carries the player's words)."""
    if isinstance(data, ExtensionEvent):
        return f"ext:{data.name}"
    if isinstance(data, InboxSpliced):
        return f"agent/inbox/spliced:{data.op}"
    return event_type(data)


def is_delta(blob: bytes) -> bool:
    """Whether a stored row is a delta (either form), to :meth:`DeltaCodec.expand`."""
    return blob[:1] in (MARK_DELTA, MARK_BASED_DELTA)


def _dictionary(frame: bytes, base: bytes | None) -> bytes:
    """The preset dictionary of a delta: the keyframe, then the base (both sides build it
    here, so writer and reader agree byte for byte)."""
    if base is None:
        return frame
    return frame[-_WINDOW:] + base


def raw_deflate(data: bytes, zdict: bytes | None, level: int) -> bytes:
    """``data`` as a raw deflate stream (against the preset dictionary ``zdict``), with a
    window and hash table no larger than what it can refer back to. Setting up zlib's full
    32 KiB window and 128 KiB hash table costs more than compressing a row of a few hundred
    bytes; a stream made with a smaller window inflates with the full one."""
    reach = len(data) + (len(zdict) if zdict is not None else 0)
    bits = min(15, max(9, reach.bit_length()))
    memory = max(1, min(_MEM_LEVEL, bits - 7))
    if zdict is None:
        compressor = zlib.compressobj(level, zlib.DEFLATED, -bits, memory)
    else:
        compressor = zlib.compressobj(
            level, zlib.DEFLATED, -bits, memory, zlib.Z_DEFAULT_STRATEGY, zdict=zdict
        )
    return compressor.compress(data) + compressor.flush()


def _deflate(blob: bytes, zdict: bytes) -> bytes:
    return raw_deflate(blob, zdict, _LEVEL)


def _probes(blob: bytes) -> tuple[bytes, ...]:
    step = max(1, len(blob) // (_PROBES + 1))
    return tuple(blob[at : at + _PROBE_BYTES] for at in range(step, step * (_PROBES + 1), step))


class DeltaCodec:
    """Writes rows as deltas (writer side) and inflates them (readers, any thread)."""

    def __init__(self) -> None:
        #: Committed keyframes the writer compresses against.
        self._frames: dict[KeyframeKey, Keyframe] = {}
        self._frame_bytes = 0
        #: sid -> committed recent rows that may be bases: (seq, kind, bytes), oldest first.
        self._recent: dict[int, list[tuple[int, str, bytes]]] = {}
        self._recent_bytes = 0
        #: (sid, seq) -> a keyframe's or base's row as ``bodies`` made it, for reads.
        self._cache: dict[tuple[int, int], bytes] = {}
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def encode(self, key: KeyframeKey, seq: int, blob: bytes, pending: PendingDeltas) -> bytes:
        """The ``data`` column for the row ``blob`` of event ``seq`` (never a delta): a delta
        against the keyframe of ``key`` (and perhaps a base), or ``blob`` itself, then
        recorded in ``pending`` (the transaction's own keyframes and bases, to
        :meth:`publish` after its commit)."""
        sid = key[0]
        frame = pending.frames.get(key) or self._frames.get(key)
        if frame is not None:
            best = b"%b%d,%d,%b" % (MARK_DELTA, sid, frame[0], _deflate(blob, frame[1]))
            based = None
            if len(best) >= MIN_DELTA_FOR_BASES:
                based = self._based(key, frame, blob, pending)
            if (
                based is not None
                and len(based) + _MIN_BASE_SAVING <= len(best)
                and len(based) <= len(blob) * MAX_DELTA_RATIO
            ):
                return based  # never a base itself: reads stay at two levels
            if len(best) <= len(blob) * MAX_DELTA_RATIO:
                self._offer(key, seq, blob, pending)
                return best
        pending.frames[key] = (seq, blob)
        self._offer(key, seq, blob, pending)
        return blob

    def _based(
        self, key: KeyframeKey, frame: Keyframe, blob: bytes, pending: PendingDeltas
    ) -> bytes | None:
        """``blob`` as a delta against ``frame`` and a recent row, the shorter of two tries,
        or ``None`` when there is nothing to try: the newest row of the same kind that is not
        the keyframe (a row that grows turn by turn, such as the references of an untrimmed
        history, is closest to its predecessor) and the row of another kind most of
        :data:`_PROBES` probes of ``blob`` occur in (the newest on a tie; the same words in
        another kind of event, such as the player's in the splice that queued them)."""
        if len(blob) < MIN_BASE_BYTES:
            return None
        sid, kind = key
        probes = _probes(blob)
        # The transaction's own newest rows (a batch of a thousand events must not make each
        # look through the rest), after the committed ones.
        candidates = [(s, k, b) for owner, s, k, b in pending.bases[-RECENT_BASES:] if owner == sid]
        candidates[:0] = self._recent.get(sid, ())
        same: tuple[int, bytes] | None = None
        other: tuple[int, bytes] | None = None
        most = 0
        for base_seq, base_kind, base in reversed(candidates):
            if base_kind == kind:
                if same is None and base_seq != frame[0]:
                    same = (base_seq, base)
                continue
            hits = sum(probe in base for probe in probes)
            if hits > most:
                other, most = (base_seq, base), hits
        shortest: bytes | None = None
        for base_seq, base in (c for c in (same, other) if c is not None):
            stream = _deflate(blob, _dictionary(frame[1], base))
            delta = b"%b%d,%d,%d,%b" % (MARK_BASED_DELTA, sid, frame[0], base_seq, stream)
            if shortest is None or len(delta) < len(shortest):
                shortest = delta
        return shortest

    @staticmethod
    def _offer(key: KeyframeKey, seq: int, blob: bytes, pending: PendingDeltas) -> None:
        if MIN_BASE_BYTES <= len(blob) <= MAX_BASE_BYTES:
            pending.bases.append((key[0], seq, key[1], blob))

    def publish(self, pending: PendingDeltas) -> None:
        """Make a committed transaction's keyframes and bases available to later writes."""
        for key, frame in pending.frames.items():
            old = self._frames.get(key)
            added = len(frame[1]) - (len(old[1]) if old is not None else 0)
            if self._frame_bytes + added > MAX_KEYFRAME_BYTES:
                self._frames.clear()  # later events start new keyframes; keeps the bound
                self._frame_bytes = 0
                added = len(frame[1])
            self._frames[key] = frame
            self._frame_bytes += added
        for sid, seq, kind, blob in pending.bases:
            if self._recent_bytes + len(blob) > MAX_RECENT_BYTES:
                self._recent.clear()  # later rows find bases again; keeps the bound
                self._recent_bytes = 0
            recent = self._recent.setdefault(sid, [])
            recent.append((seq, kind, blob))
            self._recent_bytes += len(blob)
            if len(recent) > RECENT_BASES:
                self._recent_bytes -= len(recent.pop(0)[2])

    def forget(self) -> None:
        """Drop every remembered keyframe and base (later events start new ones)."""
        self._frames.clear()
        self._frame_bytes = 0
        self._recent.clear()
        self._recent_bytes = 0

    def expand(self, conn: sqlite3.Connection, blob: bytes) -> bytes:
        """The row a delta row ``blob`` stands for (plain JSON or a chunked row)."""
        based = blob[:1] == MARK_BASED_DELTA
        base_seq = 0
        try:
            if based:
                sid_text, frame_text, base_text, stream = blob[1:].split(b",", 3)
                base_seq = int(base_text)
            else:
                sid_text, frame_text, stream = blob[1:].split(b",", 2)
            sid, frame_seq = int(sid_text), int(frame_text)
        except ValueError:
            raise SessionError("a stored event has a malformed delta header") from None
        frame = self._row(conn, sid, frame_seq, plain=True)
        base = self._row(conn, sid, base_seq, plain=False) if based else None
        inflater = zlib.decompressobj(_WBITS, zdict=_dictionary(frame, base))
        try:
            plain = inflater.decompress(stream) + inflater.flush()
        except zlib.error as exc:
            raise SessionError(f"a stored event delta does not inflate: {exc}") from None
        if not inflater.eof:
            raise SessionError("a stored event delta is truncated")
        return plain

    def _row(self, conn: sqlite3.Connection, sid: int, seq: int, *, plain: bool) -> bytes:
        """A keyframe (``plain``: never a delta) or a base (at most a one-level delta), as
        ``bodies`` made it, from the cache or the database."""
        where = (sid, seq)
        found = self._cache.get(where)
        if found is not None:
            return found
        row = conn.execute("SELECT data FROM events WHERE sid = ? AND seq = ?", where).fetchone()
        what = "keyframe" if plain else "delta base"
        if row is None:
            raise SessionError(f"a stored event references a missing {what}")
        found = bytes(row[0])
        mark = found[:1]
        if mark == MARK_BASED_DELTA or (plain and mark == MARK_DELTA):
            raise SessionError(f"a stored event references a {what} that is itself a delta")
        if mark == MARK_DELTA:
            found = self.expand(conn, found)
        with self._lock:
            if self._cached_bytes + len(found) > MAX_CACHED_KEYFRAME_BYTES:
                self._cache.clear()  # cheap to refill; keeps the bound
                self._cached_bytes = 0
            self._cache[where] = found
            self._cached_bytes += len(found)
        return found

    def stats(self) -> dict[str, int]:
        """Keyframe bytes remembered for writes and cached for reads."""
        return {
            "keyframeBytes": self._frame_bytes,
            "baseBytes": self._recent_bytes,
            "cachedKeyframeBytes": self._cached_bytes,
        }
