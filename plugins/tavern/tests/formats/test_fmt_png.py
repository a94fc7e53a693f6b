"""PNG chunk walker and writer: corpus cards, frame and CRC checks, limits, fuzzing."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from PIL.PngImagePlugin import PngImageFile

from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.png import (
    MAX_CARD_FILE_BYTES,
    MAX_METADATA_CHUNK_BYTES,
    PNG_SIGNATURE,
    iter_chunks,
    placeholder_png,
    read_card_text,
    strip_card_chunks,
    write_card_chunks,
)

CORPUS = Path(__file__).resolve().parents[4].parent / "shared" / "sillytavern-corpus"
CORPUS_PNGS = sorted(CORPUS.rglob("*.png"))


def chunk(ctype: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + ctype
        + payload
        + struct.pack(">I", zlib.crc32(ctype + payload))
    )


def text(keyword: bytes, body: bytes) -> bytes:
    return chunk(b"tEXt", keyword + b"\x00" + body)


def png(*middle: bytes) -> bytes:
    """A 1×1 grey PNG with ``middle`` chunks inserted after IHDR."""
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    idat = chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    return PNG_SIGNATURE + ihdr + b"".join(middle) + idat + chunk(b"IEND", b"")


def b64(data: bytes) -> bytes:
    return base64.b64encode(data)


def test_corpus_has_cards() -> None:
    assert len(CORPUS_PNGS) == 4


@pytest.mark.parametrize("path", CORPUS_PNGS, ids=lambda p: p.name)
def test_reads_every_corpus_card(path: Path) -> None:
    found = read_card_text(path.read_bytes())
    assert "chara" in found.payloads
    assert found.payloads["chara"].startswith(b"{")
    assert not found.errors


def test_seraphina_carries_both_chunks_ccv3_first() -> None:
    found = read_card_text(
        (CORPUS / "sillytavern-repo/staging-1ac6780/default_Seraphina.png").read_bytes()
    )
    assert found.keywords == ["ccv3", "chara"]
    assert b'"chara_card_v3"' in found.payloads["ccv3"]
    assert b'"chara_card_v2"' in found.payloads["chara"]


def test_metadata_after_image_data_is_found() -> None:
    data = png()[:-12] + text(b"chara", b64(b'{"name":"late"}')) + chunk(b"IEND", b"")
    assert read_card_text(data).payloads == {"chara": b'{"name":"late"}'}


def test_keyword_is_case_insensitive_and_first_occurrence_wins() -> None:
    data = png(text(b"Chara", b64(b"first")), text(b"chara", b64(b"second")))
    assert read_card_text(data).payloads == {"chara": b"first"}


def test_whitespace_and_missing_padding_in_base64_are_tolerated() -> None:
    encoded = b64(b"hello world!!").rstrip(b"=")
    wrapped = encoded[:8] + b"\r\n" + encoded[8:]
    assert read_card_text(png(text(b"ccv3", wrapped))).payloads == {"ccv3": b"hello world!!"}


def test_broken_base64_is_reported_per_chunk() -> None:
    found = read_card_text(png(text(b"ccv3", b"%%%not base64%%%"), text(b"chara", b64(b"ok"))))
    assert found.payloads == {"chara": b"ok"}
    assert found.errors["ccv3"].code == "CHARACTER_PNG_METADATA_INVALID"


def test_png_without_card_chunks_is_rejected() -> None:
    with pytest.raises(FormatError) as info:
        read_card_text(png(text(b"Comment", b"hi"), chunk(b"zTXt", b"chara\x00\x00x")))
    assert (info.value.code, info.value.status) == ("CHARACTER_PNG_CARD_MISSING", 400)


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (b"GIF89a" + b"\x00" * 40, "signature"),
        (png()[:-5], "truncated IEND"),
        (png()[:-12], "missing IEND"),
        (PNG_SIGNATURE + chunk(b"IDAT", b"") + chunk(b"IEND", b""), "IHDR not first"),
        (png()[:-12] + chunk(b"IEND", b"x"), "non-empty IEND"),
        (png()[:33] + b"\xff\xff\xff\xf0" + png()[37:], "length beyond file"),
        (png()[:33] + struct.pack(">I", 10) + b"ID@T" + png()[41:], "bad chunk type"),
    ],
)
def test_malformed_frames_are_rejected(data: bytes, what: str) -> None:
    with pytest.raises(FormatError) as info:
        read_card_text(data)
    assert (info.value.code, info.value.status) == ("CHARACTER_PNG_INVALID", 400), what


def test_crc_mismatch_anywhere_is_rejected() -> None:
    good = png(text(b"chara", b64(b"{}")))
    idat_at = good.index(b"IDAT")
    bad = bytearray(good)
    bad[idat_at + 5] ^= 0x01  # a pixel byte: only the CRC can notice
    with pytest.raises(FormatError) as info:
        read_card_text(bytes(bad))
    assert "CRC" in info.value.message


def test_file_over_32_mib_is_413_before_any_parsing() -> None:
    with pytest.raises(FormatError) as info:
        read_card_text(b"\x00" * (MAX_CARD_FILE_BYTES + 1))
    assert (info.value.code, info.value.status) == ("ARTIFACT_TOO_LARGE", 413)


def test_metadata_over_16_mib_decoded_is_413() -> None:
    payload = b"x" * (MAX_METADATA_CHUNK_BYTES + 1)
    with pytest.raises(FormatError) as info:
        read_card_text(png(text(b"chara", b64(payload))))
    assert (info.value.code, info.value.status) == ("CHARACTER_PNG_METADATA_TOO_LARGE", 413)
    with pytest.raises(FormatError) as info:
        write_card_chunks(None, [("chara", payload)])
    assert info.value.status == 413


def test_metadata_of_exactly_16_mib_is_accepted() -> None:
    payload = b"y" * MAX_METADATA_CHUNK_BYTES
    assert read_card_text(write_card_chunks(None, [("ccv3", payload)])).payloads["ccv3"] == payload


def test_write_replaces_old_card_chunks_and_keeps_the_rest() -> None:
    original = png(
        text(b"chara", b64(b"old")), text(b"ccv3", b64(b"old3")), text(b"Software", b"x")
    )
    out = write_card_chunks(original, [("chara", b"new"), ("ccv3", b"new3")])
    found = read_card_text(out)
    assert found.payloads == {"chara": b"new", "ccv3": b"new3"}
    types = [c.type for c in iter_chunks(out)]
    assert types.count(b"tEXt") == 3
    assert types[-1] == b"IEND"
    assert text(b"Software", b"x") in out
    # the card chunks sit right before IEND, chara first
    assert out.index(b"tEXtchara") < out.index(b"tEXtccv3") < out.index(b"IEND")


@pytest.mark.parametrize("path", CORPUS_PNGS, ids=lambda p: p.name)
def test_written_corpus_png_keeps_its_pixels(path: Path) -> None:
    original = path.read_bytes()
    out = write_card_chunks(strip_card_chunks(original), [("chara", b"{}"), ("ccv3", b"{}")])
    with Image.open(io.BytesIO(original)) as before, Image.open(io.BytesIO(out)) as after:
        assert after.size == before.size
        assert after.tobytes() == before.tobytes()
        assert isinstance(after, PngImageFile)
        assert after.text["chara"] == base64.b64encode(b"{}").decode()


def test_strip_removes_only_card_chunks() -> None:
    original = png(text(b"chara", b64(b"a")), text(b"Title", b"t"))
    stripped = strip_card_chunks(original)
    assert stripped == png(text(b"Title", b"t"))


def test_placeholder_is_a_valid_image() -> None:
    with Image.open(io.BytesIO(placeholder_png())) as image:
        image.load()
        assert image.size == (400, 600)


# ---------------------------------------------------------------- properties

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(
    st.lists(
        st.tuples(st.sampled_from(["chara", "ccv3"]), st.binary(max_size=300)),
        max_size=2,
        unique_by=lambda x: x[0],
    )
)
def test_round_trip_of_arbitrary_payloads(payloads: list[tuple[str, bytes]]) -> None:
    if not payloads:
        return
    found = read_card_text(write_card_chunks(None, payloads))
    assert found.payloads == dict(payloads)


def outcome(data: bytes) -> tuple[str, int]:
    """("ok", n payloads) or (error code, status); any other exception escapes the test."""
    try:
        found = read_card_text(data)
    except FormatError as exc:
        return exc.code, exc.status
    return "ok", len(found.payloads) + len(found.errors)


@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_end_in_a_clean_format_error(data: bytes) -> None:
    for candidate in (data, PNG_SIGNATURE + data):
        code, status = outcome(candidate)
        if code != "ok":
            assert code.startswith("CHARACTER_PNG_")
            assert status == 400


_SEED = png(text(b"chara", b64(b'{"name":"a"}')), text(b"ccv3", b64(b'{"name":"b"}')))


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, len(_SEED) - 1), st.integers(0, 255)), max_size=6),
    st.integers(0, len(_SEED)),
)
def test_corrupted_cards_end_in_a_clean_format_error(
    edits: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(_SEED)
    for offset, value in edits:
        data[offset] = value
    code, status = outcome(bytes(data[:cut]))
    if code == "ok":
        assert status >= 1  # a card read from a damaged file still has a chunk
    else:
        assert code.startswith("CHARACTER_PNG_")
        assert status in (400, 413)
