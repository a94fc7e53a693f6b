"""Portable user JSON and regex scripts."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.png import placeholder_png
from innkeeper_tavern.pure.formats.regex_script import (
    RegexScript,
    parse_regex_script,
    read_regex_scripts,
    replace_regex_scripts,
    split_find_regex,
)
from innkeeper_tavern.pure.formats.user import (
    MAX_AVATAR_BYTES,
    MAX_AVATAR_CHARS,
    MAX_USER_IMPORT_BYTES,
    User,
    UserData,
    edit_user,
    export_user,
    export_user_json,
    new_user,
    parse_user_import,
)

CORPUS = Path(__file__).resolve().parents[4].parent / "shared" / "sillytavern-corpus"
AVATAR = "data:image/png;base64," + base64.b64encode(placeholder_png()).decode()


def envelope(**data: Any) -> dict[str, Any]:
    return {"format": "pmp-dsh-tavern", "version": 1, "resourceType": "user", "data": data}


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


# ---------------------------------------------------------------- users


def test_user_import_and_export_round_trip() -> None:
    user = parse_user_import(
        body(envelope(name="  Reader ", description="A curious traveler.", avatar=AVATAR))
    )
    assert user == UserData(name="Reader", description="A curious traveler.", avatar=AVATAR)
    assert parse_user_import(export_user_json(user)) == user
    no_avatar = export_user(UserData(name="R"))
    assert no_avatar == envelope(name="R", description="")


@pytest.mark.parametrize(
    ("doc", "code"),
    [
        ({**envelope(name="R"), "version": 2}, "USER_IMPORT_UNSUPPORTED"),
        ({**envelope(name="R"), "version": True}, "USER_IMPORT_UNSUPPORTED"),
        ({**envelope(name="R"), "resourceType": "session-template"}, "USER_IMPORT_UNSUPPORTED"),
        ({**envelope(name="R"), "format": "sillytavern"}, "USER_IMPORT_UNSUPPORTED"),
        ({"personas": {"a.png": "A"}, "persona_descriptions": {}}, "USER_IMPORT_UNSUPPORTED"),
        ([envelope(name="R")], "USER_IMPORT_UNSUPPORTED"),
        ({**envelope(name="R"), "extra": 1}, "USER_INVALID"),
        (envelope(name="R", id="fixed"), "USER_INVALID"),
        (envelope(name="R", worldBookIds=[]), "USER_INVALID"),
        (envelope(name="   "), "USER_INVALID"),
        (envelope(description="no name"), "USER_INVALID"),
        (envelope(name="R", description=5), "USER_INVALID"),
        (envelope(name="x" * 201), "USER_INVALID"),
        (envelope(name="😀" * 101), "USER_INVALID"),  # 202 UTF-16 units
        (envelope(name="R", description="d" * 100_001), "USER_INVALID"),
        ({**envelope(name="R"), "data": "R"}, "USER_INVALID"),
    ],
)
def test_user_import_rejections(doc: Any, code: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_user_import(body(doc))
    assert (info.value.code, info.value.status) == (code, 400)


def test_user_limits_are_inclusive() -> None:
    user = parse_user_import(body(envelope(name="x" * 200, description="d" * 100_000)))
    assert len(user.name) == 200
    assert parse_user_import(body(envelope(name="😀" * 100))).name == "😀" * 100


def test_user_import_body_over_1_mib_is_413() -> None:
    big = body(envelope(name="R", description="d" * 10)) + b" " * MAX_USER_IMPORT_BYTES
    with pytest.raises(FormatError) as info:
        parse_user_import(big)
    assert (info.value.code, info.value.status) == ("USER_IMPORT_TOO_LARGE", 413)


@pytest.mark.parametrize(
    "avatar",
    [
        "data:image/svg+xml;base64,PHN2Zy8+",
        "https://example.com/a.png",
        "data:image/png;base64,not*base64",
        "data:image/png;base64,AAAA",  # base64 fine, not a PNG
        "data:image/jpeg;base64," + base64.b64encode(placeholder_png()).decode(),
        "data:image/png;base64," + "A" * MAX_AVATAR_CHARS,
        42,
    ],
)
def test_avatar_must_be_a_small_raster_data_uri(avatar: Any) -> None:
    with pytest.raises(FormatError) as info:
        parse_user_import(body(envelope(name="R", avatar=avatar)))
    assert (info.value.code, info.value.status) == ("USER_AVATAR_INVALID", 400)


def _png_of(size: int) -> str:
    """A data URI whose decoded bytes are a PNG signature padded to ``size`` bytes."""
    raw = placeholder_png()
    return "data:image/png;base64," + base64.b64encode(raw + b"\0" * (size - len(raw))).decode()


def test_avatar_limit_counts_decoded_bytes() -> None:
    at_limit = _png_of(MAX_AVATAR_BYTES)
    assert len(at_limit) > MAX_AVATAR_BYTES  # the URI is longer than the image: still accepted
    assert parse_user_import(body(envelope(name="R", avatar=at_limit))).avatar == at_limit
    for over in (MAX_AVATAR_BYTES + 1, MAX_AVATAR_BYTES + 3):
        with pytest.raises(FormatError) as info:
            parse_user_import(body(envelope(name="R", avatar=_png_of(over))))
        assert info.value.code == "USER_AVATAR_INVALID" and "larger" in info.value.message


@pytest.mark.parametrize(
    ("kind", "head"),
    [
        ("png", None),
        ("jpeg", b"\xff\xd8\xff\xe0" + b"\0" * 12),
        ("gif", b"GIF89a" + b"\0" * 10),
        ("webp", b"RIFF\0\0\0\0WEBPVP8 "),
    ],
)
def test_the_four_raster_types_are_accepted(kind: str, head: bytes | None) -> None:
    raw = placeholder_png() if head is None else head
    uri = f"data:image/{kind};base64," + base64.b64encode(raw).decode()
    assert parse_user_import(body(envelope(name="R", avatar=uri))).avatar == uri


@pytest.mark.parametrize(
    ("kind", "head"), [("bmp", b"BM" + b"\0" * 14), ("avif", b"\0\0\0\x1cftypavif")]
)
def test_other_raster_types_are_refused(kind: str, head: bytes) -> None:
    uri = f"data:image/{kind};base64," + base64.b64encode(head).decode()
    with pytest.raises(FormatError) as info:
        parse_user_import(body(envelope(name="R", avatar=uri)))
    assert info.value.code == "USER_AVATAR_INVALID"


def test_null_avatar_is_no_avatar() -> None:
    assert parse_user_import(body(envelope(name="R", avatar=None))).avatar is None


# ---------------------------------------------------------------- regex scripts


CORPUS_REGEX = sorted((CORPUS / "prolix-oc-st-presets/regex").glob("*.json"))


@pytest.mark.parametrize("path", CORPUS_REGEX, ids=lambda p: p.name)
def test_corpus_regex_scripts_parse(path: Path) -> None:
    raw = json.loads(path.read_bytes())
    script = parse_regex_script(raw)
    assert script.id == raw["id"]
    assert script.placement == tuple(raw["placement"])
    assert script.min_depth == raw["minDepth"]


def test_regex_script_details() -> None:
    bare = parse_regex_script(
        json.loads(
            (CORPUS / "prolix-oc-st-presets/regex/regex-remove_details_blocks.json").read_bytes()
        )
    )
    assert split_find_regex(bare.find_regex) == (bare.find_regex, "")  # bare: no flags
    quoted = parse_regex_script(
        json.loads(
            (CORPUS / "prolix-oc-st-presets/regex/regex-replace_formatted_quote.json").read_bytes()
        )
    )
    assert split_find_regex(quoted.find_regex) == ("“|”", "g")
    assert quoted.markdown_only and quoted.prompt_only
    assert parse_regex_script({"substituteRegex": True}).substitute_regex == 1
    assert parse_regex_script({"substituteRegex": 2}).substitute_regex == 2
    assert parse_regex_script({}) == RegexScript()
    assert split_find_regex("/a/b/gi") == ("a/b", "gi")
    assert split_find_regex("/a/xyz") == ("/a/xyz", "")


def test_regex_paths_prefer_existing_arrays() -> None:
    doc: dict[str, Any] = {
        "extensions": {"regex_scripts": [{"id": "e"}, "junk"]},
        "data": {"extensions": {"regex_scripts": [{"id": "d"}]}},
    }
    assert read_regex_scripts(doc, "card_v2") == [{"id": "e"}]
    replaced = replace_regex_scripts(doc, [{"id": "n"}], "card_v2")
    assert replaced["extensions"]["regex_scripts"] == [{"id": "n"}]
    assert replaced["data"] == doc["data"]
    assert doc["extensions"]["regex_scripts"][0] == {"id": "e"}  # the input is not mutated
    fresh = replace_regex_scripts({"data": {"name": "N"}}, [{"id": "n"}], "card_v2")
    assert fresh == {"data": {"name": "N", "extensions": {"regex_scripts": [{"id": "n"}]}}}
    preset = replace_regex_scripts({"extensions": "broken"}, [], "preset")
    assert preset == {"extensions": {"regex_scripts": []}}


def test_user_create_and_patch() -> None:
    user = new_user({"name": " Ann ", "description": "d"})
    assert user == UserData(name="Ann", description="d")
    with_avatar = edit_user(user, {"avatar": AVATAR})
    assert edit_user(with_avatar, {"description": "e"}).avatar == AVATAR  # omitted: kept
    assert edit_user(with_avatar, {"avatar": None}).avatar is None  # null: cleared
    for bad in ({"id": "x"}, {"name": ""}, {"avatar": "data:image/svg+xml;base64,AAAA"}):
        with pytest.raises(FormatError):
            edit_user(user, bad)
    with pytest.raises(FormatError):
        new_user({"description": "no name"})
    stored = User.from_data("u1", with_avatar)
    assert msgspec.to_builtins(stored) == {
        "id": "u1",
        "name": "Ann",
        "description": "d",
        "avatar": AVATAR,
    }
    assert stored.data() == with_avatar
