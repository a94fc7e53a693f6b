"""Content-addressed message bodies: a long text is stored once per distinct section.

A turn's assembled system prompt (``system/message``) is tens to hundreds of KB and differs from
the previous turn's in a few paragraphs. Storing it whole every turn makes the log grow with the
prompt, not with the story (issue 18 "Durable prompts without copies"). So, inside the writer's
transaction, every text block of at least :data:`CHUNKED_TEXT_MIN_CHARS` characters is cut into
content-defined chunks (runs of ``"\\n\\n"``-separated paragraphs, cut where a paragraph's
CRC says so, which makes the cuts follow the content, not offsets); each distinct chunk is one
``text_chunks`` row keyed by its SHA-256, and the event row keeps the event with those texts
emptied plus the chunk ids. Reading joins the chunks back: the event read equals the event
written, byte for byte once encoded, and the public event shapes do not change.

A chunk is stored as a raw deflate stream when that is shorter (JSON chunks against a fixed
preset dictionary); it is keyed by the SHA-256 of what it holds, not of what is stored, so a
chunk written plain by an older version and the same chunk written now are one row.

Chunks are never deleted (the log is append-only and forks share rows), so nothing a row
references can disappear.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import zlib
from collections.abc import Sequence
from typing import Final

import msgspec

from innkeeper_core.sessions.deltas import DeltaCodec, is_delta, raw_deflate
from innkeeper_hostapi.sessions import EventData, SessionError, TextBlock

__all__ = [
    "CHUNKED_JSON_MIN_BYTES",
    "CHUNKED_TEXT_MIN_CHARS",
    "CHUNK_SCHEMA",
    "JSON_CHUNK_DICTIONARY",
    "MARK_DEFLATED_JSON",
    "MARK_DEFLATED_TEXT",
    "MAX_CACHED_CHUNK_CHARS",
    "MAX_CHUNK_CHARS",
    "BodyCodec",
    "split_chunks",
    "split_json",
    "unpack_chunk",
]

#: Text blocks at least this long are stored as chunks. Low enough that a roleplay-length reply
#: leaves the event row: ``events`` is a ``WITHOUT ROWID`` table, and with 4 KiB pages a row over
#: about 1,000 bytes spills its remainder into a 4 KiB overflow page of its own (a 1,500-character
#: reply cost about 4 KB on disk that way; as a ``text_chunks`` row it costs its size).
CHUNKED_TEXT_MIN_CHARS: Final = 1024
#: Fewest characters in a chunk before a content-defined cut may end it.
MIN_CHUNK_CHARS: Final = 256
#: Most characters in a chunk (a longer paragraph is cut at this length).
MAX_CHUNK_CHARS: Final = 16 * 1024
#: A paragraph whose CRC-32 has these low bits clear ends a chunk (one in four on average).
_CUT_MASK: Final = 0x3
#: Chunk bodies cached for reads, in characters (over all sessions).
MAX_CACHED_CHUNK_CHARS: Final = 16 * 1024 * 1024
#: First byte of a row whose ``data`` is a :class:`_Stored` envelope (JSON starts with ``{``).
MARK: Final = b"\x00"
#: First byte of a row whose ``data`` is the JSON array of the chunk ids of its encoded event
#: (a string in it is a short chunk itself, :data:`INLINE_JSON_CHUNK_BYTES`).
MARK_JSON: Final = b"\x01"
#: Encoded events at least this long (and without a chunked text block) are stored as chunks
#: of their JSON: a ``request/assembly`` lists every history message and the request-only
#: sections, mostly the same from one turn to the next.
CHUNKED_JSON_MIN_BYTES: Final = 8192
#: Fewest bytes in a JSON chunk before a content-defined cut may end it.
MIN_JSON_CHUNK_BYTES: Final = 512
#: A JSON array element at least this long is a chunk (or chunks) of its own: a request-only
#: section between history references (about 60 bytes each) must not change with them, and a
#: trimmed story's window of references slides every turn.
LARGE_JSON_ELEMENT_BYTES: Final = 128
#: A JSON chunk shorter than this (never a section: those are at least
#: :data:`LARGE_JSON_ELEMENT_BYTES`) stays in the event row, a JSON string in its list of chunk
#: ids, instead of being a ``text_chunks`` row: the fields before an array (the turn), the
#: references a turn adds and the digest are new every turn and smaller than a row's key and
#: index entry, and inside the row they shrink with it against its keyframe (``deltas``).
INLINE_JSON_CHUNK_BYTES: Final = LARGE_JSON_ELEMENT_BYTES
#: The fields before an array (a chunk ending ``":[``) stay in the row up to this size: a
#: plugin event's header carries per-turn values (its turn, sizes) next to fixed ones, new
#: every turn as a chunk, a few bytes as part of a delta.
INLINE_JSON_HEAD_BYTES: Final = 1024
_ARRAY_START: Final = b'":['
#: A JSON element whose CRC-32 has these low bits clear ends a chunk (one in sixteen).
_JSON_CUT_MASK: Final = 0xF
#: Cut candidates in encoded JSON: after an object in an array (``},{``, or the last one before
#: the next field: ``}],"``) and at the start of an array of objects that is a field's value
#: (``":[{``). msgspec writes no spaces, so a ``},`` or ``[{`` in any other company is inside a
#: string (``{{char}}, ...``, ``[{{user}}]``) and cutting there would tie a chunk to whatever
#: happens to sit beside it.
#: (Written to start with a character class, which ``re`` scans for quickly.)
_JSON_CUTS: Final = re.compile(rb"[}\[](?:(?<=\}),(?=\{)|(?<=\})(?=\],\")|(?<=\":\[)(?=\{))")
_OPEN_ARRAY: Final = ord("[")
#: A paragraph break inside an encoded JSON string.
_JSON_PARAGRAPH: Final = re.compile(rb"\\n\\n")
#: Hash domain of JSON chunks (text chunks hash the bare UTF-8).
_JSON_DOMAIN: Final = b"json\x00"

CHUNK_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS text_chunks (
    id INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    body TEXT NOT NULL
);
"""
_UPSERT: Final = (
    "INSERT INTO text_chunks (hash, body) VALUES (?, ?) "
    "ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash RETURNING id"
)
#: First byte of a ``body`` that is a text chunk's UTF-8 as a raw deflate stream (a ``BLOB``;
#: a text chunk stored as it is is ``TEXT``).
MARK_DEFLATED_TEXT: Final = b"\x00"
#: First byte of a ``body`` that is a JSON chunk as a raw deflate stream whose preset
#: dictionary is :data:`JSON_CHUNK_DICTIONARY`. A JSON chunk stored as it is never starts with
#: either mark: encoded JSON has no raw control characters, and chunks are cut between
#: elements or after an escaped paragraph break.
MARK_DEFLATED_JSON: Final = b"\x01"
#: The preset dictionary of deflated JSON chunks: what a ``request/assembly``'s window of
#: history references is made of (those chunks are a few hundred bytes, too short to find
#: much to refer back to in themselves). Stored chunks depend on these exact bytes: never
#: change them; a different dictionary needs a mark of its own.
JSON_CHUNK_DICTIONARY: Final = (
    b'{"role":"tool","ref":null,"content":null,"name":null},'
    b'{"role":"system","ref":null,"content":"","name":null},'
    b'{"role":"system","ref":null,"content":null,"name":null},'
    b'{"role":"assistant","ref":null,"content":null,"name":null},'
    b'{"role":"user","ref":null,"content":null,"name":null},'
    b'{"role":"assistant","ref":1,"content":null,"name":null},'
    b'{"role":"user","ref":1,"content":null,"name":null},'
)
#: A chunk is stored deflated only when that saves at least this many bytes.
MIN_COMPRESSION_SAVING: Final = 16
#: Deflate level of chunk bodies: a chunk is compressed once, when it is first stored, and
#: read back from the cache; level 6 is a few percent shorter than level 1.
_LEVEL: Final = 6
_WBITS: Final = -15  # raw deflate: no zlib header or checksum, as the event deltas
_SEP: Final = "\n\n"
_IDS_PER_QUERY: Final = 500


class _Stored(msgspec.Struct, array_like=True):
    """The envelope of a chunked row: the event with chunked texts emptied, and per chunked
    block ``[block index, chunk ids...]``."""

    event: msgspec.Raw
    blocks: list[list[int]]


def split_chunks(text: str) -> list[str]:
    """Cut ``text`` into chunks whose concatenation is ``text``."""
    parts = text.split(_SEP)
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    last = len(parts) - 1
    for index, part in enumerate(parts):
        piece = part if index == last else part + _SEP
        while len(piece) > MAX_CHUNK_CHARS:  # one huge paragraph: fixed cuts inside it
            room = MAX_CHUNK_CHARS - size
            current.append(piece[:room])
            chunks.append("".join(current))
            current, size, piece = [], 0, piece[room:]
        current.append(piece)
        size += len(piece)
        if size >= MAX_CHUNK_CHARS or (
            size >= MIN_CHUNK_CHARS and not zlib.crc32(part.encode()) & _CUT_MASK
        ):
            chunks.append("".join(current))
            current, size = [], 0
    if current:
        chunks.append("".join(current))
    return [c for c in chunks if c]


def _bounded(blob: bytes, lo: int, hi: int) -> list[bytes]:
    """``blob[lo:hi]`` in pieces of at most :data:`MAX_CHUNK_CHARS`, cut between UTF-8
    sequences."""
    out: list[bytes] = []
    while hi - lo > MAX_CHUNK_CHARS:
        cut = lo + MAX_CHUNK_CHARS
        while 0x80 <= blob[cut] < 0xC0:  # back to the start of a UTF-8 sequence
            cut -= 1
        out.append(blob[lo:cut])
        lo = cut
    if hi > lo:
        out.append(blob[lo:hi])
    return out


def _split_element(blob: bytes, lo: int, hi: int) -> list[bytes]:
    """``blob[lo:hi]`` cut after its encoded paragraph breaks (``\\n\\n`` inside a JSON
    string) where the paragraph's CRC says so, each piece at most :data:`MAX_CHUNK_CHARS`."""
    out: list[bytes] = []
    start = para = lo
    for match in _JSON_PARAGRAPH.finditer(blob, lo, hi):
        stop = match.end()
        if stop - start >= MIN_CHUNK_CHARS and not zlib.crc32(blob[para:stop]) & _CUT_MASK:
            out.extend(_bounded(blob, start, stop))
            start = stop
        para = stop
    out.extend(_bounded(blob, start, hi))
    return out


def split_json(blob: bytes) -> list[bytes]:
    """Cut encoded JSON into chunks whose concatenation is ``blob``: after an array element
    whose CRC says so, never inside a UTF-8 sequence, each at most :data:`MAX_CHUNK_CHARS`.
    An element of :data:`LARGE_JSON_ELEMENT_BYTES` or more is chunks of its own, cut at its
    paragraphs, so its cuts do not move with what is around it (an event's header fields, a
    growing history) and an edited paragraph changes one of them."""
    chunks: list[bytes] = []
    start = 0  # of the current chunk
    piece = 0  # start of the current element
    crc = zlib.crc32
    for match in _JSON_CUTS.finditer(blob):
        stop = match.end()
        if blob[stop - 1] == _OPEN_ARRAY and piece == start:
            # What comes before the array (an event's header fields: its turn, its ids)
            # changes with every event: a chunk of its own, so it does not drag the first
            # elements with it.
            if stop > start:
                chunks.extend(_bounded(blob, start, stop))
            start = piece = stop
            continue
        if stop - piece >= LARGE_JSON_ELEMENT_BYTES:
            if piece > start:
                chunks.extend(_bounded(blob, start, piece))
            chunks.extend(_split_element(blob, piece, stop))
            start = piece = stop
            continue
        if stop - start >= MIN_JSON_CHUNK_BYTES and not crc(blob[piece:stop]) & _JSON_CUT_MASK:
            chunks.extend(_bounded(blob, start, stop))
            start = stop
        piece = stop
    chunks.extend(_split_element(blob, start, len(blob)))  # the rest may be a long string
    return chunks


def _inline(chunk: bytes) -> bool:
    """Whether a JSON chunk stays in the event row instead of being a ``text_chunks`` row."""
    size = len(chunk)
    return size < INLINE_JSON_CHUNK_BYTES or (
        size <= INLINE_JSON_HEAD_BYTES and chunk.endswith(_ARRAY_START)
    )


def _pack(chunk: str | bytes) -> str | bytes:
    """The ``body`` column for a chunk: compressed when that saves
    :data:`MIN_COMPRESSION_SAVING` bytes, else as it is (``TEXT`` for a text chunk, a
    ``BLOB`` of JSON for a JSON chunk)."""
    if isinstance(chunk, str):
        raw = chunk.encode()
        packed = MARK_DEFLATED_TEXT + raw_deflate(raw, None, _LEVEL)
    else:
        raw = chunk
        packed = MARK_DEFLATED_JSON + raw_deflate(raw, JSON_CHUNK_DICTIONARY, _LEVEL)
    return packed if len(packed) + MIN_COMPRESSION_SAVING <= len(raw) else chunk


def unpack_chunk(body: str | bytes) -> str | bytes:
    """The chunk a ``body`` column holds: ``str`` for a text chunk, ``bytes`` for JSON."""
    if isinstance(body, str):
        return body
    mark = body[:1]
    if mark == MARK_DEFLATED_TEXT:
        return zlib.decompress(body[1:], _WBITS).decode()
    if mark == MARK_DEFLATED_JSON:
        inflater = zlib.decompressobj(_WBITS, zdict=JSON_CHUNK_DICTIONARY)
        return inflater.decompress(body[1:]) + inflater.flush()
    return body  # a JSON chunk stored as it is (never starts with a control character)


def _chunk_ids(
    conn: sqlite3.Connection, digests: Sequence[bytes], chunks: Sequence[str | bytes]
) -> list[int]:
    """The ``text_chunks`` ids of ``chunks`` (keyed by ``digests``), inserting those not
    stored yet; only those are compressed. Looked up in this transaction, so nothing is
    trusted across transactions: most chunks of an event are the previous event's."""
    known: dict[bytes, int] = {}
    unique = list(set(digests))
    for lo in range(0, len(unique), _IDS_PER_QUERY):
        part = unique[lo : lo + _IDS_PER_QUERY]
        marks = ",".join("?" * len(part))
        known.update(
            conn.execute(f"SELECT hash, id FROM text_chunks WHERE hash IN ({marks})", part)
        )
    ids: list[int] = []
    for digest, chunk in zip(digests, chunks, strict=True):
        chunk_id = known.get(digest)
        if chunk_id is None:
            (chunk_id,) = conn.execute(_UPSERT, (digest, _pack(chunk))).fetchone()
            known[digest] = chunk_id
        ids.append(chunk_id)
    return ids


class BodyCodec:
    """Encodes event rows (in the writer's transaction) and decodes them (in readers)."""

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()
        self._decoder: msgspec.json.Decoder[EventData] = msgspec.json.Decoder(EventData)
        self._stored = msgspec.json.Decoder(_Stored)
        self._ids = msgspec.json.Decoder(list[int | str])
        #: chunk id -> body (``str`` for text chunks, ``bytes`` for JSON chunks).
        self._cache: dict[int, str | bytes] = {}
        self._cached_chars = 0
        self._lock = threading.Lock()
        #: Small events as deltas against a keyframe (``deltas``).
        self.deltas = DeltaCodec()

    @staticmethod
    def wants_chunks(data: EventData) -> bool:
        """Whether ``data`` has a text block long enough to be chunked."""
        content: tuple[object, ...] = getattr(data, "content", None) or ()
        return any(
            isinstance(b, TextBlock) and len(b.text) >= CHUNKED_TEXT_MIN_CHARS for b in content
        )

    def store(self, conn: sqlite3.Connection, data: EventData) -> bytes:
        """The ``data`` column for ``data``, inserting its new chunks (writer thread only)."""
        content: tuple[TextBlock, ...] = data.content  # type: ignore[union-attr]
        blocks: list[list[int]] = []
        emptied: list[TextBlock] = []
        for index, block in enumerate(content):
            if len(block.text) < CHUNKED_TEXT_MIN_CHARS:
                emptied.append(block)
                continue
            chunks = split_chunks(block.text)
            digests = [hashlib.sha256(chunk.encode()).digest() for chunk in chunks]
            blocks.append([index, *_chunk_ids(conn, digests, chunks)])
            emptied.append(TextBlock(text=""))
        skeleton = msgspec.structs.replace(data, content=tuple(emptied))
        raw = msgspec.Raw(self._encoder.encode(skeleton))
        return MARK + self._encoder.encode(_Stored(event=raw, blocks=blocks))

    def store_json(self, conn: sqlite3.Connection, blob: bytes) -> bytes:
        """The ``data`` column for an encoded event stored as chunks of its JSON, inserting
        the new chunks (writer thread only)."""
        chunks = split_json(blob)
        rows = [chunk for chunk in chunks if not _inline(chunk)]
        digests = [hashlib.sha256(_JSON_DOMAIN + chunk).digest() for chunk in rows]
        stored = iter(_chunk_ids(conn, digests, rows))
        ids: list[int | str] = [
            chunk.decode() if _inline(chunk) else next(stored)  # cut between UTF-8 sequences
            for chunk in chunks
        ]
        return MARK_JSON + self._encoder.encode(ids)

    def load(self, conn: sqlite3.Connection, blob: bytes) -> EventData:
        """The event a ``data`` column holds (any thread with a connection)."""
        if is_delta(blob):
            blob = self.deltas.expand(conn, blob)
        if blob[:1] == MARK_JSON:
            items = self._ids.decode(blob[1:])
            bodies = iter(self._chunks(conn, [i for i in items if isinstance(i, int)]))
            joined = bytearray()
            for item in items:
                if isinstance(item, str):
                    joined += item.encode()
                elif isinstance(body := next(bodies), bytes):
                    joined += body
            return self._decoder.decode(joined)
        if blob[:1] != MARK:
            return self._decoder.decode(blob)
        stored = self._stored.decode(blob[1:])
        data = self._decoder.decode(stored.event)
        content = list(data.content)  # type: ignore[union-attr]
        for index, *ids in stored.blocks:
            parts = self._chunks(conn, ids)
            content[index] = TextBlock(text="".join(p for p in parts if isinstance(p, str)))
        return msgspec.structs.replace(data, content=tuple(content))

    def _chunks(self, conn: sqlite3.Connection, ids: Sequence[int]) -> list[str | bytes]:
        cache = self._cache
        bodies: dict[int, str | bytes] = {}
        for chunk_id in set(ids):
            body = cache.get(chunk_id)  # another reader may clear the cache meanwhile
            if body is not None:
                bodies[chunk_id] = body
        missing = sorted(set(ids) - bodies.keys())
        found: dict[int, str | bytes] = {}
        for lo in range(0, len(missing), _IDS_PER_QUERY):
            part = missing[lo : lo + _IDS_PER_QUERY]
            marks = ",".join("?" * len(part))
            found.update(
                (chunk_id, unpack_chunk(body))
                for chunk_id, body in conn.execute(
                    f"SELECT id, body FROM text_chunks WHERE id IN ({marks})", part
                )
            )
        if len(found) < len(missing):
            raise SessionError("a stored message body references a missing text chunk")
        if found:
            bodies.update(found)
            with self._lock:
                added = sum(len(body) for body in found.values())
                if self._cached_chars + added > MAX_CACHED_CHUNK_CHARS:
                    cache.clear()  # cheap to refill; keeps the bound
                    self._cached_chars = 0
                cache.update(found)
                self._cached_chars += added
        return [bodies[i] for i in ids]

    def cached_chars(self) -> int:
        """Characters of chunk bodies cached now."""
        return self._cached_chars
