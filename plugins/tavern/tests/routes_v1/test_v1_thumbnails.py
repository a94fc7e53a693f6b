"""``GET /characters/:id/thumbnail``: WebP thumbnails of card avatars, cached by source digest,
re-made when the avatar changes, and a decompression bomb refused before it is decoded."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import zlib
from pathlib import Path
from typing import Any

from PIL import Image

from innkeeper_tavern.pure.formats.png import write_card_chunks
from innkeeper_tavern.state.thumbnails import THUMBNAILS_DIR, ThumbnailCache

CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Pic", "first_mes": "Hi"}}


def card_png(image: bytes) -> bytes:
    """``image`` carrying a V2 card in its ``chara`` chunk (as SillyTavern writes it)."""
    return write_card_chunks(image, [("chara", json.dumps(CARD).encode())])


def picture(size: tuple[int, int], colour: tuple[int, int, int, int], fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGBA" if fmt == "PNG" else "RGB", size, colour[: 4 if fmt == "PNG" else 3]).save(
        out, fmt
    )
    return out.getvalue()


def bomb_png(width: int, height: int) -> bytes:
    """A valid-looking PNG whose header declares ``width`` × ``height`` pixels (a few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * 4096)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    )


async def import_png(tavern: Any, data: bytes) -> str:
    body = await tavern.call(
        "POST",
        "/characters/import?filename=pic.png",
        data=data,
        content_type="image/png",
        status=201,
    )
    return str(body["character"]["id"])


async def test_thumbnail_size_format_and_revalidation(tavern: Any) -> None:
    cid = await import_png(tavern, card_png(picture((400, 600), (200, 30, 30, 255))))
    status, data, headers = await tavern.raw(f"/characters/{cid}/thumbnail?size=192")
    assert status == 200 and headers["Content-Type"] == "image/webp"
    with Image.open(io.BytesIO(data)) as thumb:
        assert thumb.format == "WEBP" and thumb.size == (128, 192)  # aspect kept, fits 192
        red, green, _blue, *_ = thumb.convert("RGBA").getpixel((64, 96))
        assert red > 150 and green < 80
    png_status, png, _ = await tavern.raw(f"/characters/{cid}/png")
    assert png_status == 200 and len(data) * 4 < len(png)
    # Each size from the fixed set; the default is 192; anything else is refused.
    status, small, _ = await tavern.raw(f"/characters/{cid}/thumbnail?size=96")
    with Image.open(io.BytesIO(small)) as thumb:
        assert thumb.size == (64, 96)
    status, default, _ = await tavern.raw(f"/characters/{cid}/thumbnail")
    assert default == data
    for bad in ("100", "abc", "-96", "1e3"):
        body = await tavern.call("GET", f"/characters/{cid}/thumbnail?size={bad}", status=400)
        assert body["code"] == "AVATAR_SIZE_INVALID"
    # The ETag revalidates without a body.
    resp = await tavern.client.get(
        f"/pmp-dsh-tavern/api/v1/characters/{cid}/thumbnail?size=192",
        headers={"If-None-Match": headers["ETag"]},
    )
    assert resp.status == 304 and await resp.read() == b""
    # A card without a picture (a JSON import) gets the placeholder's thumbnail, never a 404.
    body = await tavern.call(
        "POST",
        "/characters/import?filename=plain.json",
        data=json.dumps(CARD).encode(),
        content_type="application/json",
        status=201,
    )
    status, plain, _ = await tavern.raw(f"/characters/{body['character']['id']}/thumbnail")
    assert status == 200 and Image.open(io.BytesIO(plain)).size == (128, 192)
    missing = await tavern.call("GET", "/characters/nope/thumbnail", status=404)
    assert missing["code"] == "CHARACTER_NOT_FOUND"


async def test_thumbnails_are_cached_by_digest_and_remade_when_the_avatar_changes(
    tavern: Any,
) -> None:
    first = await import_png(tavern, card_png(picture((300, 300), (10, 10, 200, 255))))
    twin = await import_png(tavern, card_png(picture((300, 300), (10, 10, 200, 255))))
    _, blue, headers = await tavern.raw(f"/characters/{first}/thumbnail?size=96")
    _, same, twin_headers = await tavern.raw(f"/characters/{twin}/thumbnail?size=96")
    cache = tavern.root / THUMBNAILS_DIR
    files = sorted(p.name for p in cache.iterdir())
    # Same picture, one cached file; the file is what is served.
    assert same == blue and headers["ETag"] == twin_headers["ETag"] and len(files) == 1
    assert (cache / files[0]).read_bytes() == blue
    # The stored avatar changes on disk: the next answer is the new picture, a new ETag.
    cover: Path = tavern.root / "character-artifacts" / f"{first}.png"
    await asyncio.to_thread(cover.write_bytes, card_png(picture((300, 300), (10, 200, 10, 255))))
    _, green, new_headers = await tavern.raw(f"/characters/{first}/thumbnail?size=96")
    assert new_headers["ETag"] != headers["ETag"]
    with Image.open(io.BytesIO(green)) as thumb:
        _r, g, b, *_ = thumb.convert("RGBA").getpixel((48, 48))
        assert g > 150 and b < 80
    resp = await tavern.client.get(
        f"/pmp-dsh-tavern/api/v1/characters/{first}/thumbnail?size=96",
        headers={"If-None-Match": headers["ETag"]},
    )
    assert resp.status == 200, "an old validator never revalidates a changed avatar"
    # The twin still has the old picture; a deleted card has no thumbnail.
    _, still, _ = await tavern.raw(f"/characters/{twin}/thumbnail?size=96")
    assert still == blue
    await tavern.call("DELETE", f"/characters/{first}", status=200)
    gone = await tavern.call("GET", f"/characters/{first}/thumbnail?size=96", status=404)
    assert gone["code"] == "CHARACTER_NOT_FOUND"


async def test_other_formats_and_refused_sources(tavern: Any) -> None:
    cid = await import_png(tavern, card_png(picture((64, 64), (0, 0, 0, 255))))
    cover = tavern.root / "character-artifacts" / f"{cid}.png"
    for fmt in ("JPEG", "GIF", "WEBP"):
        await asyncio.to_thread(cover.write_bytes, picture((800, 400), (250, 250, 0, 255), fmt))
        status, data, _ = await tavern.raw(f"/characters/{cid}/thumbnail?size=384")
        assert status == 200, fmt
        assert Image.open(io.BytesIO(data)).size == (384, 192), fmt
    # A small image is never enlarged.
    await asyncio.to_thread(cover.write_bytes, picture((50, 80), (1, 2, 3, 255)))
    _, data, _ = await tavern.raw(f"/characters/{cid}/thumbnail?size=384")
    assert Image.open(io.BytesIO(data)).size == (50, 80)
    # A decompression bomb: 100,000 × 100,000 declared in a few hundred bytes, refused from its
    # header (a 4xx with a stable code), nothing cached.
    bomb = await import_png(tavern, card_png(bomb_png(100_000, 100_000)))
    before = sorted((tavern.root / THUMBNAILS_DIR).iterdir())
    body = await tavern.call("GET", f"/characters/{bomb}/thumbnail?size=96", status=422)
    assert body["code"] == "AVATAR_TOO_LARGE"
    assert sorted((tavern.root / THUMBNAILS_DIR).iterdir()) == before
    await asyncio.to_thread(cover.write_bytes, b"not an image at all")
    body = await tavern.call("GET", f"/characters/{cid}/thumbnail?size=96", status=422)
    assert body["code"] == "AVATAR_UNDECODABLE"


async def test_the_cache_folder_stays_within_its_budget(tmp_path: Path) -> None:
    cache = ThumbnailCache(tmp_path)
    covers = []
    for i in range(12):
        cover = tmp_path / f"cover-{i}.png"
        await asyncio.to_thread(cover.write_bytes, picture((120, 120), (i * 20, 90, 40, 255)))
        covers.append(cover)
    one = len((await cache.get("card-0", covers[0], 1 << 20, 96)).data)
    cache.max_bytes = 4 * one + one // 2
    for i, cover in enumerate(covers):
        await cache.get(f"card-{i}", cover, 1 << 20, 96)
    kept = [p for p in (tmp_path / THUMBNAILS_DIR).iterdir()]
    assert sum(p.stat().st_size for p in kept) <= cache.max_bytes
    assert 2 <= len(kept) < len(covers)
    newest = await cache.get("card-11", covers[-1], 1 << 20, 96)
    assert any(p.read_bytes() == newest.data for p in kept), "the newest thumbnail was evicted"
