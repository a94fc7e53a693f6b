"""PNG mutation fuzzing of the card importer (issue 19).

Truncation, flipped bytes, bad CRCs, huge chunk lengths, invalid base64 and deep JSON inside the
``ccv3``/``chara`` chunks: the parser answers a card or a ``FormatError`` (400/413), never another
exception, and its memory stays bounded by the file it was given; through HTTP every answer is a
201 or a stable-code 4xx that wrote nothing. A ``ccv3`` chunk broken by nesting falls back to a
valid ``chara`` chunk with warning ``png-ccv3-unreadable``.
"""

from __future__ import annotations

import base64
import struct
import tracemalloc
import zlib
from typing import Any, Final

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from innkeeper_core.http.routes import RouteEntry
from innkeeper_tavern.pure.formats.card import parse_card_bytes
from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.png import CCV3, CHARA, placeholder_png, write_card_chunks

from .conftest import TALLY, Harness, fuzz_settings

IMPORT = "/pmp-dsh-tavern/api/v1/characters/import"
#: Peak traced allocation a parse may reach beyond this many times its input (plus a floor for
#: the decoded card itself): a huge declared length must never be allocated.
MEMORY_FACTOR: Final = 12
MEMORY_FLOOR: Final = 8 << 20


def _card(name: str, spec: str, version: str) -> bytes:
    return msgspec.json.encode(
        {"spec": spec, "spec_version": version, "data": {"name": name, "first_mes": "Hello."}}
    )


V2 = _card("Chara", "chara_card_v2", "2.0")
V3 = _card("Ccv3", "chara_card_v3", "3.0")
VALID_PNG: Final = write_card_chunks(placeholder_png(), [(CHARA, V2), (CCV3, V3)])


def _chunk_offsets(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of every chunk of a well-formed PNG."""
    out: list[tuple[int, int]] = []
    at = 8
    while at + 8 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        out.append((at, length))
        at += 12 + length
    return out


def _text_chunk_raw(keyword: bytes, text: bytes) -> bytes:
    payload = keyword + b"\x00" + text
    return (
        struct.pack(">I", len(payload))
        + b"tEXt"
        + payload
        + struct.pack(">I", zlib.crc32(b"tEXt" + payload))
    )


def _with_chunks(chunks: list[bytes]) -> bytes:
    """The placeholder image with ``chunks`` inserted before IEND."""
    image = placeholder_png()
    iend = image.rindex(b"IEND") - 4
    return image[:iend] + b"".join(chunks) + image[iend:]


def _deep_json(depth: int) -> bytes:
    return b'{"spec":"chara_card_v3","data":' + b"[" * depth + b"]" * depth + b"}"


@st.composite
def mutated_pngs(draw: st.DrawFn) -> tuple[str, bytes]:
    data = bytearray(VALID_PNG)
    chunks = _chunk_offsets(VALID_PNG)
    kind = draw(
        st.sampled_from(
            ["truncate", "flip", "crc", "length", "base64", "deep", "junk-chunk", "keyword"]
        )
    )
    if kind == "truncate":
        return kind, bytes(data[: draw(st.integers(0, len(data) - 1))])
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
        return kind, bytes(data)
    if kind == "crc":
        at, length = draw(st.sampled_from(chunks))
        crc_at = at + 8 + length
        data[crc_at : crc_at + 4] = struct.pack(">I", draw(st.integers(0, 2**32 - 1)))
        return kind, bytes(data)
    if kind == "length":
        at, _length = draw(st.sampled_from(chunks))
        huge = draw(st.sampled_from([2**31 - 1, 2**31, 2**32 - 1, 16 << 20, 32 << 20]))
        data[at : at + 4] = struct.pack(">I", huge)
        return kind, bytes(data)
    if kind == "base64":
        junk = draw(st.binary(min_size=1, max_size=64).filter(lambda b: b"\x00" not in b))
        keyword = draw(st.sampled_from([b"ccv3", b"chara", b"CCV3"]))
        good = _text_chunk_raw(b"chara", base64.b64encode(V2))
        chunks_in = [_text_chunk_raw(keyword, b"!!" + junk)]
        if draw(st.booleans()):
            chunks_in.append(good)
        return kind, _with_chunks(chunks_in)
    if kind == "deep":
        depth = draw(st.integers(33, 3000))
        chunks_in = [_text_chunk_raw(b"ccv3", base64.b64encode(_deep_json(depth)))]
        if draw(st.booleans()):
            chunks_in.append(_text_chunk_raw(b"chara", base64.b64encode(V2)))
        return kind, _with_chunks(chunks_in)
    if kind == "keyword":
        keyword = draw(st.binary(min_size=0, max_size=100).filter(lambda b: b"\x00" not in b))
        return kind, _with_chunks([_text_chunk_raw(keyword, base64.b64encode(V2))])
    ctype = draw(st.binary(min_size=4, max_size=4))
    payload = draw(st.binary(max_size=128))
    chunk = struct.pack(">I", len(payload)) + ctype + payload
    chunk += struct.pack(">I", zlib.crc32(ctype + payload))
    return kind, _with_chunks([chunk, _text_chunk_raw(b"chara", base64.b64encode(V2))])


def _parse(data: bytes) -> tuple[Any, int]:
    """(card or FormatError, peak traced bytes)."""
    TALLY.parser_cases += 1
    tracemalloc.start()
    try:
        try:
            result: Any = parse_card_bytes(data, file_name="fuzz.png")
        except FormatError as exc:
            result = exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


@fuzz_settings(1500)
@given(case=mutated_pngs())
def test_mutated_pngs_parse_or_fail_cleanly(case: tuple[str, bytes]) -> None:
    kind, data = case
    result, peak = _parse(data)
    if isinstance(result, FormatError):
        assert result.status in (400, 413), (kind, result.code)
        assert result.code.isupper(), (kind, result.code)
    else:
        assert result.name in ("Chara", "Ccv3"), (kind, result.name)
    assert peak <= MEMORY_FACTOR * len(data) + MEMORY_FLOOR, (kind, peak, len(data))


def test_deep_ccv3_falls_back_to_chara() -> None:
    """Issue 19 item 3: a ccv3 chunk nested 490-975 levels breaks; the chara chunk is used."""
    for depth in (490, 700, 975, 5000):
        data = _with_chunks(
            [
                _text_chunk_raw(b"ccv3", base64.b64encode(_deep_json(depth))),
                _text_chunk_raw(b"chara", base64.b64encode(V2)),
            ]
        )
        card = parse_card_bytes(data)
        assert card.name == "Chara"
        assert "png-ccv3-unreadable" in card.warnings
        assert card.source.png_keyword == CHARA


def _import_route(harness: Harness) -> RouteEntry:
    return next(e for e in harness.routes if e.template.endswith("/characters/import"))


@fuzz_settings(150)
@given(case=mutated_pngs())
def test_mutated_pngs_over_http(harness: Harness, case: tuple[str, bytes]) -> None:
    kind, data = case
    entry = _import_route(harness)
    answer = harness.unchanged_unless_accepted(
        entry, data, what=f"png-{kind}", content_type="image/png"
    )
    assert answer.status in (201, 400, 413), (kind, answer)


def test_deep_json_cards_over_http(harness: Harness) -> None:
    """Issue 19 item 3: JSON and PNG cards nested 490-975 levels are 4xx; the fallback works."""
    entry = _import_route(harness)
    for depth in (490, 700, 975):
        answer = harness.refused_without_change(
            entry, _deep_json(depth), "application/json", what=f"json-depth-{depth}"
        )
        assert (answer.status, answer.body["code"]) == (400, "STRUCTURE_TOO_DEEP")
        only_ccv3 = _with_chunks([_text_chunk_raw(b"ccv3", base64.b64encode(_deep_json(depth)))])
        answer = harness.refused_without_change(entry, only_ccv3, "image/png", what="png-deep")
        assert answer.body["code"] == "STRUCTURE_TOO_DEEP"
    both = _with_chunks(
        [
            _text_chunk_raw(b"ccv3", base64.b64encode(_deep_json(700))),
            _text_chunk_raw(b"chara", base64.b64encode(V2)),
        ]
    )
    answer = harness.send(entry, both, "image/png")
    assert answer.status == 201, answer
    assert answer.body["character"]["name"] == "Chara"
    assert "png-ccv3-unreadable" in answer.body["character"]["warnings"]
