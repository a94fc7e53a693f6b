"""Character-card metadata in PNG ``tEXt`` chunks, read and written without decoding pixels.

SillyTavern stores a card as base64 of its UTF-8 JSON in a ``tEXt`` chunk with keyword ``chara``
(V1/V2) and, since V3, ``ccv3``; readers prefer ``ccv3`` (`docs/resources.md#png-chunks`). This
module walks the chunk list of a PNG held in memory: it checks the signature, every chunk's bounds
and CRC, the ``IHDR``-first / ``IEND``-last frame, and decodes only the two metadata chunks. Pixel
data is never inflated, and the walk slices a ``memoryview``, so the working set stays at the size
of the file plus the decoded metadata.

Limits (`docs/contract/http-api.md#v1-limits`, ``POST /characters/import``): 32 MiB per file,
16 MiB decoded per card metadata chunk — the latter also on export.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Final

from .errors import FormatError

#: `docs/contract/http-api.md#v1-limits`: ``POST /characters/import`` — 32 MiB file limit.
MAX_CARD_FILE_BYTES: Final = 32 << 20
#: `docs/contract/http-api.md#v1-limits`: 16 MiB decoded per PNG card metadata chunk (import and
#: export).
MAX_METADATA_CHUNK_BYTES: Final = 16 << 20
#: Our own bound on the chunk walk, so a file of empty chunks costs bounded time. Encoders write
#: IDAT in 8–64 KiB pieces: a 32 MiB image stays far below this.
MAX_PNG_CHUNKS: Final = 65_536
#: PNG spec: chunk lengths are at most 2**31 - 1.
MAX_CHUNK_LENGTH: Final = (1 << 31) - 1
#: PNG spec: ``tEXt`` keywords are 1–79 Latin-1 bytes.
MAX_KEYWORD_BYTES: Final = 79

PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
#: Card keywords, lower case; compared case-insensitively as SillyTavern does.
CHARA: Final = "chara"
CCV3: Final = "ccv3"
CARD_KEYWORDS: Final = (CCV3, CHARA)

# Base64 of MAX_METADATA_CHUNK_BYTES is at most this long (padding included).
_MAX_ENCODED: Final = (MAX_METADATA_CHUNK_BYTES + 2) // 3 * 4
_WHITESPACE: Final = b" \t\r\n\f\v"
_TEXT_CHUNK_TYPES: Final = frozenset({b"tEXt", b"zTXt", b"iTXt"})

#: The file is not a well-formed PNG (signature, chunk bounds, CRC, IHDR/IEND frame).
PNG_INVALID: Final = "CHARACTER_PNG_INVALID"
#: The PNG has neither a ``chara`` nor a ``ccv3`` tEXt chunk.
PNG_CARD_MISSING: Final = "CHARACTER_PNG_CARD_MISSING"
#: A card chunk is not base64 of a payload (or not decodable).
PNG_METADATA_INVALID: Final = "CHARACTER_PNG_METADATA_INVALID"
#: A card chunk decodes to more than :data:`MAX_METADATA_CHUNK_BYTES`.
PNG_METADATA_TOO_LARGE: Final = "CHARACTER_PNG_METADATA_TOO_LARGE"
#: A card file is larger than :data:`MAX_CARD_FILE_BYTES`.
ARTIFACT_TOO_LARGE: Final = "ARTIFACT_TOO_LARGE"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a walked PNG: ``offset`` is where its length field starts."""

    type: bytes
    offset: int
    length: int

    @property
    def data_start(self) -> int:
        """Offset of the first data byte."""
        return self.offset + 8

    @property
    def end(self) -> int:
        """Offset just past the CRC."""
        return self.offset + 12 + self.length


@dataclass(slots=True)
class CardText:
    """The decoded card chunks of a PNG: keyword → payload bytes (not yet parsed as JSON).

    Only the first chunk of each keyword counts (SillyTavern takes the first match). A chunk whose
    base64 is broken is reported in ``errors`` instead, so the caller may fall back to the other.
    """

    payloads: dict[str, bytes] = field(default_factory=dict)
    errors: dict[str, FormatError] = field(default_factory=dict)

    @property
    def keywords(self) -> list[str]:
        """Card keywords found, usable or not, ``ccv3`` first."""
        return [k for k in CARD_KEYWORDS if k in self.payloads or k in self.errors]


def is_png(data: bytes | bytearray | memoryview) -> bool:
    """True when ``data`` starts with the PNG signature."""
    return bytes(data[:8]) == PNG_SIGNATURE


def _invalid(message: str) -> FormatError:
    return FormatError(PNG_INVALID, message, 400)


def check_file_size(size: int) -> None:
    """Reject a card file over :data:`MAX_CARD_FILE_BYTES` with ``413 ARTIFACT_TOO_LARGE``."""
    if size > MAX_CARD_FILE_BYTES:
        raise FormatError(
            ARTIFACT_TOO_LARGE,
            f"card file is {size} bytes; at most {MAX_CARD_FILE_BYTES} are allowed",
            413,
        )


def iter_chunks(data: bytes | bytearray | memoryview) -> Iterator[Chunk]:
    """Walk and validate the chunks of a PNG, ending with ``IEND``.

    Raises ``FormatError`` (``CHARACTER_PNG_INVALID``, 400) on a bad signature, a truncated or
    out-of-bounds chunk, a CRC mismatch, a first chunk other than a 13-byte ``IHDR``, a non-empty
    or missing ``IEND``, or more than :data:`MAX_PNG_CHUNKS` chunks. Bytes after ``IEND`` are
    ignored. The caller bounds the file size first (see :func:`check_file_size`).
    """
    view = memoryview(data)
    if bytes(view[:8]) != PNG_SIGNATURE:
        raise _invalid("not a PNG file (bad signature)")
    size = len(view)
    pos = 8
    count = 0
    while True:
        if pos + 12 > size:
            raise _invalid("PNG ends before its IEND chunk")
        count += 1
        if count > MAX_PNG_CHUNKS:
            raise _invalid(f"PNG has more than {MAX_PNG_CHUNKS} chunks")
        (length,) = struct.unpack_from(">I", view, pos)
        ctype = bytes(view[pos + 4 : pos + 8])
        if length > MAX_CHUNK_LENGTH:
            raise _invalid(f"chunk {count} declares an impossible length")
        if not ctype.isalpha() or not ctype.isascii():
            raise _invalid(f"chunk {count} has an invalid type")
        end = pos + 12 + length
        if end > size:
            raise _invalid(f"chunk {count} ({ctype.decode('ascii')}) exceeds the file boundary")
        (stored_crc,) = struct.unpack_from(">I", view, end - 4)
        if zlib.crc32(view[pos + 4 : end - 4]) != stored_crc:
            raise _invalid(f"chunk {count} ({ctype.decode('ascii')}) fails its CRC check")
        if count == 1 and (ctype != b"IHDR" or length != 13):
            raise _invalid("PNG does not start with a 13-byte IHDR chunk")
        if ctype == b"IEND":
            if length != 0:
                raise _invalid("IEND chunk is not empty")
            yield Chunk(ctype, pos, length)
            return
        yield Chunk(ctype, pos, length)
        pos = end


def _keyword(view: memoryview, chunk: Chunk) -> bytes | None:
    """The keyword of a text chunk, or None when it has no NUL within 80 bytes."""
    head = bytes(view[chunk.data_start : chunk.data_start + min(chunk.length, 80)])
    nul = head.find(b"\x00")
    if nul < 1 or nul > MAX_KEYWORD_BYTES:
        return None
    return head[:nul]


def _card_keyword(view: memoryview, chunk: Chunk) -> str | None:
    if chunk.type not in _TEXT_CHUNK_TYPES:
        return None
    keyword = _keyword(view, chunk)
    if keyword is None:
        return None
    lowered = keyword.lower()
    for name in CARD_KEYWORDS:
        if lowered == name.encode("ascii"):
            return name
    return None


def decode_metadata(encoded: bytes | memoryview, keyword: str) -> bytes:
    """Decode the base64 text of a card chunk, enforcing :data:`MAX_METADATA_CHUNK_BYTES`.

    ASCII whitespace is ignored and missing ``=`` padding is tolerated (writers differ); any other
    non-alphabet byte is an error.
    """
    # Whitespace can only make the text longer than its payload: bound it before copying.
    if len(encoded) > _MAX_ENCODED * 2:
        raise _too_large(keyword)
    text = bytes(encoded).translate(None, _WHITESPACE)
    if len(text) % 4:
        text += b"=" * (-len(text) % 4)
    if len(text) > _MAX_ENCODED:
        raise _too_large(keyword)
    try:
        payload = binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        raise FormatError(
            PNG_METADATA_INVALID, f"{keyword} chunk is not valid base64", 400
        ) from None
    if len(payload) > MAX_METADATA_CHUNK_BYTES:
        raise _too_large(keyword)
    return payload


def _too_large(keyword: str) -> FormatError:
    return FormatError(
        PNG_METADATA_TOO_LARGE,
        f"{keyword} chunk decodes to more than {MAX_METADATA_CHUNK_BYTES} bytes",
        413,
    )


def read_card_text(data: bytes | bytearray | memoryview) -> CardText:
    """Read the ``ccv3`` and ``chara`` payloads of a card PNG without decoding its pixels.

    Only ``tEXt`` chunks carry cards (SillyTavern reads no ``zTXt``/``iTXt``). Raises
    ``FormatError``: ``ARTIFACT_TOO_LARGE`` (413), ``CHARACTER_PNG_INVALID`` (400),
    ``CHARACTER_PNG_METADATA_TOO_LARGE`` (413), ``CHARACTER_PNG_CARD_MISSING`` (400). Broken base64
    in one chunk is reported in :attr:`CardText.errors` rather than raised.
    """
    check_file_size(len(data))
    view = memoryview(data)
    found = CardText()
    for chunk in iter_chunks(view):
        if chunk.type != b"tEXt":
            continue
        keyword = _card_keyword(view, chunk)
        if keyword is None or keyword in found.payloads or keyword in found.errors:
            continue
        encoded = view[chunk.data_start + len(keyword) + 1 : chunk.end - 4]
        try:
            found.payloads[keyword] = decode_metadata(encoded, keyword)
        except FormatError as exc:
            if exc.status == 413:
                raise
            found.errors[keyword] = exc
    if not found.payloads and not found.errors:
        raise FormatError(
            PNG_CARD_MISSING, "PNG does not contain a chara or ccv3 character-card chunk", 400
        )
    return found


def _chunk_bytes(ctype: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + ctype
        + payload
        + struct.pack(">I", zlib.crc32(ctype + payload))
    )


def text_chunk(keyword: str, payload: bytes) -> bytes:
    """A ``tEXt`` chunk holding base64 of ``payload`` (bounded by the metadata limit)."""
    if len(payload) > MAX_METADATA_CHUNK_BYTES:
        raise _too_large(keyword)
    return _chunk_bytes(b"tEXt", keyword.encode("latin-1") + b"\x00" + base64.b64encode(payload))


def _rewrite(image: bytes | bytearray | memoryview, insert: Sequence[bytes]) -> bytes:
    check_file_size(len(image))
    view = memoryview(image)
    parts: list[bytes | memoryview] = [PNG_SIGNATURE]
    for chunk in iter_chunks(view):
        if chunk.type == b"IEND":
            parts.extend(insert)
            parts.append(view[chunk.offset : chunk.end])
        elif _card_keyword(view, chunk) is None:
            parts.append(view[chunk.offset : chunk.end])
    return b"".join(parts)


def strip_card_chunks(image: bytes | bytearray | memoryview) -> bytes:
    """The image without any ``chara``/``ccv3`` text chunk: the stored cover of a card."""
    return _rewrite(image, ())


def write_card_chunks(
    image: bytes | bytearray | memoryview | None, payloads: Sequence[tuple[str, bytes]]
) -> bytes:
    """Embed card payloads into ``image`` (or :func:`placeholder_png`), before ``IEND``.

    Existing ``chara``/``ccv3`` chunks (of any text chunk type) are removed first; every other
    chunk is copied byte for byte. ``payloads`` are ``(keyword, utf8_json)`` pairs written in
    order as ``tEXt`` chunks.
    """
    chunks = [text_chunk(keyword, payload) for keyword, payload in payloads]
    return _rewrite(placeholder_png() if image is None else image, chunks)


@cache
def placeholder_png() -> bytes:
    """A small valid PNG (400×600, flat grey, 8-bit RGB) used when a card has no image."""
    width, height = 400, 600
    row = b"\x00" + b"\x6b\x6b\x78" * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _chunk_bytes(b"IHDR", header)
        + _chunk_bytes(b"IDAT", zlib.compress(row * height, 9))
        + _chunk_bytes(b"IEND", b"")
    )
