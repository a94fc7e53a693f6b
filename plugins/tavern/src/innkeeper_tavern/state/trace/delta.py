"""Byte deltas of audit records against a base record (exact, stdlib ``zlib`` only).

Consecutive records of a session are nearly identical: the same preset's section metadata, the
same book's rejected decisions, the same selection — only the references, hashes, scan counts and
the decisions that changed differ. :class:`~.store.TraceStore` therefore keeps a session's
*base* record once (a content-addressed chunk, by SHA-256) and every other record as a delta
against it: the record's JSON deflated in fixed segments, each with a preset dictionary cut from
the base around the same offset, so a byte of the new record that also sits within
:data:`DICTIONARY_REACH` bytes of the same place in the base costs a back-reference, not a copy.

Decoding the delta with the same base gives back the record's bytes exactly (deflate is
lossless and the dictionaries are a pure function of the base and the segment offset); an edit
that moves the record's tail further than the reach only makes the delta larger, which the store
notices and answers with a fresh base.
"""

from __future__ import annotations

import zlib
from typing import Final

import msgspec

__all__ = [
    "DICTIONARY_REACH",
    "SEGMENT_BYTES",
    "DeltaError",
    "apply_delta",
    "deflate",
    "inflate",
    "make_delta",
]

#: Bytes of the new record deflated per segment (deflate's window is 32 KiB: a segment plus its
#: dictionary must fit in it for every byte of the dictionary to stay reachable).
SEGMENT_BYTES: Final = 16 * 1024
#: Bytes of the base on each side of a segment's offset given as its dictionary.
DICTIONARY_REACH: Final = 8 * 1024
#: zlib level: 6 (the default) is within 10% of 9 on audit records at ~2/3 of its time.
LEVEL: Final = 6
#: Raw deflate (no zlib header or checksum: the store checks the result by decoding it).
_WBITS: Final = -15

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(tuple[int, list[bytes] | None])


class DeltaError(ValueError):
    """A stored delta or chunk that does not decode (corrupt or truncated)."""


def _dictionary(base: bytes, offset: int) -> bytes:
    return base[max(0, offset - DICTIONARY_REACH) : offset + SEGMENT_BYTES + DICTIONARY_REACH]


def _compressor(dictionary: bytes) -> zlib._Compress:
    if dictionary:
        return zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS, zdict=dictionary)
    return zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS)


def _decompressor(dictionary: bytes) -> zlib._Decompress:
    if dictionary:
        return zlib.decompressobj(_WBITS, zdict=dictionary)
    return zlib.decompressobj(_WBITS)


def make_delta(data: bytes, base: bytes) -> bytes:
    """``data`` as a delta against ``base`` (no segment list at all when they are equal)."""
    if data == base:
        return _encoder.encode((len(data), None))
    segments: list[bytes] = []
    for offset in range(0, len(data), SEGMENT_BYTES):
        compressor = _compressor(_dictionary(base, offset))
        segment = data[offset : offset + SEGMENT_BYTES]
        segments.append(compressor.compress(segment) + compressor.flush())
    return _encoder.encode((len(data), segments))


def apply_delta(delta: bytes, base: bytes) -> bytes:
    """The bytes :func:`make_delta` was given, from its result and the same ``base``."""
    try:
        length, segments = _decoder.decode(delta)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DeltaError(f"undecodable delta: {exc}") from exc
    if segments is None:
        if length != len(base):
            raise DeltaError("delta length does not match its base")
        return base
    parts: list[bytes] = []
    for index, segment in enumerate(segments):
        decompressor = _decompressor(_dictionary(base, index * SEGMENT_BYTES))
        try:
            parts.append(decompressor.decompress(segment) + decompressor.flush())
        except zlib.error as exc:
            raise DeltaError(f"undecodable delta segment {index}: {exc}") from exc
    data = b"".join(parts)
    if len(data) != length:
        raise DeltaError("delta length does not match its segments")
    return data


def deflate(data: bytes) -> bytes:
    """A base record as stored in its chunk (raw deflate)."""
    compressor = _compressor(b"")
    return compressor.compress(data) + compressor.flush()


def inflate(data: bytes, length: int) -> bytes:
    """The base record of a chunk (``length``: its stored uncompressed size)."""
    try:
        decompressor = _decompressor(b"")
        out = decompressor.decompress(data) + decompressor.flush()
    except zlib.error as exc:
        raise DeltaError(f"undecodable chunk: {exc}") from exc
    if len(out) != length:
        raise DeltaError("chunk length does not match")
    return out
