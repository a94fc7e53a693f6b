"""What the web client's character editor relies on: the card's revision (compare-and-set
edits), the depth prompt edit and the avatar upload (`docs/resources.md` "Character editing")."""

from __future__ import annotations

import io
import json
from typing import Any

from PIL import Image

from innkeeper_tavern.pure.formats.png import read_card_text

Tavern = Any


def picture(width: int, height: int, fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(out, fmt)
    return out.getvalue()


async def test_a_stale_revision_is_refused_and_changes_nothing(tavern: Tavern) -> None:
    made = await tavern.call("POST", "/characters", json={"name": "Ada"}, status=201)
    cid = made["character"]["id"]
    read = (await tavern.get(f"/characters/{cid}"))["character"]
    revision = read["revision"]
    assert isinstance(revision, str) and len(revision) == 64
    first = await tavern.call(
        "PATCH",
        f"/characters/{cid}",
        json={"description": "one", "expectedRevision": revision},
        status=200,
    )
    assert first["character"]["revision"] != revision
    assert (
        first["character"]["revision"]
        == (await tavern.get(f"/characters/{cid}"))["character"]["revision"]
    )
    # A second editor still holding the first revision is refused.
    stale = await tavern.call(
        "PATCH",
        f"/characters/{cid}",
        json={"description": "two", "expectedRevision": revision},
        status=409,
    )
    assert stale["code"] == "RESOURCE_REVISION_CONFLICT"
    card = (await tavern.get(f"/characters/{cid}"))["character"]
    assert card["data"]["description"] == "one"
    # Without expectedRevision the edit is last-writer-wins, as before.
    await tavern.call("PATCH", f"/characters/{cid}", json={"description": "three"}, status=200)
    bad = await tavern.call("PATCH", f"/characters/{cid}", json={"expectedRevision": 5}, status=400)
    assert bad["code"] == "CHARACTER_CARD_INVALID"


async def test_depth_prompt_is_written_as_sillytavern_stores_it(tavern: Tavern) -> None:
    made = await tavern.call("POST", "/characters", json={"name": "Ada"}, status=201)
    cid = made["character"]["id"]
    note = {"prompt": "Ada is wary.", "depth": 2, "role": "user"}
    body = await tavern.call("PATCH", f"/characters/{cid}", json={"depthPrompt": note}, status=200)
    assert body["character"]["data"]["extensions"]["depth_prompt"] == note
    exported = json.loads((await tavern.raw(f"/characters/{cid}/json"))[1])
    assert exported["data"]["extensions"]["depth_prompt"] == note
    for wrong in (
        {"prompt": "x", "depth": -1, "role": "system"},
        {"prompt": "x", "depth": 1, "role": "narrator"},
        {"prompt": "x", "depth": True, "role": "system"},
        {"prompt": "x"},
    ):
        bad = await tavern.call(
            "PATCH", f"/characters/{cid}", json={"depthPrompt": wrong}, status=400
        )
        assert bad["code"] == "CHARACTER_CARD_INVALID"
    again = (await tavern.get(f"/characters/{cid}"))["character"]
    assert again["data"]["extensions"]["depth_prompt"] == note


async def test_avatar_upload_is_cropped_to_two_by_three_and_exported(tavern: Tavern) -> None:
    made = await tavern.call(
        "POST", "/characters", json={"name": "Ada", "firstMessage": "Hi"}, status=201
    )
    cid = made["character"]["id"]
    revision = (await tavern.get(f"/characters/{cid}"))["character"]["revision"]
    for fmt, media in (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")):
        body = await tavern.call(
            "PUT",
            f"/characters/{cid}/avatar?expectedRevision={revision}",
            data=picture(900, 300, fmt),
            content_type=media,
            status=200,
        )
        revision = body["character"]["revision"]
        assert body["character"]["hasCover"] is True
        status, png, _ = await tavern.raw(f"/characters/{cid}/png")
        assert status == 200
        with Image.open(io.BytesIO(png)) as image:
            assert image.size == (200, 300)  # the centre 2:3 box of a 3:1 picture
        chunks = read_card_text(png).payloads
        assert json.loads(chunks["chara"])["spec"] == "chara_card_v2"
        assert json.loads(chunks["ccv3"])["data"]["first_mes"] == "Hi"
    stale = await tavern.call(
        "PUT",
        f"/characters/{cid}/avatar?expectedRevision={'0' * 64}",
        data=picture(20, 30, "PNG"),
        content_type="image/png",
        status=409,
    )
    assert stale["code"] == "RESOURCE_REVISION_CONFLICT"
    bad = await tavern.call(
        "PUT", f"/characters/{cid}/avatar", data=b"not an image", content_type="image/png",
        status=422,
    )  # fmt: skip
    assert bad["code"] == "AVATAR_UNDECODABLE"
    gif = io.BytesIO()
    Image.new("RGB", (20, 30)).save(gif, "GIF")
    bad = await tavern.call(
        "PUT", f"/characters/{cid}/avatar", data=gif.getvalue(), content_type="image/png",
        status=422,
    )  # fmt: skip
    assert bad["code"] == "AVATAR_UNDECODABLE"
    refused = await tavern.call(
        "PUT", f"/characters/{cid}/avatar", data=b"x", content_type="image/gif", status=415
    )
    assert refused["ok"] is False
    # The refused uploads left the last good picture.
    with Image.open(io.BytesIO((await tavern.raw(f"/characters/{cid}/png"))[1])) as image:
        assert image.size == (200, 300)
