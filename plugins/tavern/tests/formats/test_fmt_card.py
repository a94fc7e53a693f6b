"""Character cards: corpus import, JSON/PNG export overlay, hybrids, embedded book, regex."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from PIL import Image

from innkeeper_tavern.pure.formats.card import (
    CardData,
    CharacterCard,
    card_regex_scripts,
    card_world_book,
    edit_card,
    export_card,
    export_card_json,
    export_card_png,
    parse_card,
    parse_card_bytes,
    with_card_regex_scripts,
    with_character_book,
)
from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.png import read_card_text, strip_card_chunks, write_card_chunks

CORPUS = Path(__file__).resolve().parents[4].parent / "shared" / "sillytavern-corpus"
SERAPHINA = CORPUS / "sillytavern-repo/staging-1ac6780/default_Seraphina.png"
AQUA = CORPUS / "sillytavern-repo/tag-1.0.0/Aqua.png"
SAKANA = CORPUS / "sillytavern-content/contest_Assistant_Sakana.png"
SENSEI = CORPUS / "sillytavern-content/default_CodingSensei.png"
PXANSATU = CORPUS / "prolix-oc-st-presets/cards/Pxansatu.json"
CORPUS_CARDS = [SERAPHINA, AQUA, SAKANA, SENSEI, PXANSATU]

# name, format, PNG keyword read, embedded book entries
EXPECTED = {
    SERAPHINA: ("Seraphina", "character-card-v3", "ccv3", 4),
    AQUA: ("Aqua", "sillytavern-v1", "chara", None),
    SAKANA: ("Sakana", "sillytavern-v2", "chara", 14),
    SENSEI: ("Coding Sensei", "sillytavern-v2", "chara", None),
    PXANSATU: ("Pxansatu", "character-card-v3", None, 27),
}


def paths(value: Any, prefix: str = "$") -> set[str]:
    found = {prefix}
    if isinstance(value, dict):
        for key, child in value.items():
            found |= paths(child, f"{prefix}.{key}")
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found |= paths(child, f"{prefix}[{index}]")
    return found


def original_json(path: Path) -> dict[str, Any]:
    """The JSON the card was imported from (the winning PNG chunk, or the file)."""
    data = path.read_bytes()
    if path.suffix == ".png":
        found = read_card_text(data)
        payload = found.payloads.get("ccv3") or found.payloads["chara"]
        doc: dict[str, Any] = json.loads(payload)
        return doc
    doc = json.loads(data)
    return doc


def edit(card: CharacterCard, **changes: Any) -> CharacterCard:
    return msgspec.structs.replace(card, data=msgspec.structs.replace(card.data, **changes))


# ---------------------------------------------------------------- corpus


@pytest.mark.parametrize("path", CORPUS_CARDS, ids=lambda p: p.name)
def test_every_corpus_card_imports(path: Path) -> None:
    card = parse_card_bytes(path.read_bytes(), file_name=path.stem)
    name, card_format, keyword, entries = EXPECTED[path]
    assert (card.name, card.source.format, card.source.png_keyword) == (name, card_format, keyword)
    assert card.source.byte_length == path.stat().st_size
    assert card.source.sha256 is not None and len(card.source.sha256) == 64
    book = card_world_book(card)
    assert (None if book is None else len(book.entries)) == entries
    assert card.data.first_message


@pytest.mark.parametrize("path", CORPUS_CARDS, ids=lambda p: p.name)
def test_unedited_json_export_is_the_original(path: Path) -> None:
    card = parse_card_bytes(path.read_bytes())
    assert export_card(card) == original_json(path)
    again = parse_card_bytes(export_card_json(card))
    assert again.data == card.data
    assert again.source.format == card.source.format


@pytest.mark.parametrize("path", CORPUS_CARDS, ids=lambda p: p.name)
def test_edited_json_export_reimports_and_keeps_unknown_fields(path: Path) -> None:
    card = parse_card_bytes(path.read_bytes())
    changed = edit(
        card,
        name="Renamed",
        description="New description",
        creator_notes="notes",
        alternate_greetings=[*card.data.alternate_greetings, "Another hello"],
        tags=["x"],
        system_prompt="SYS {{original}}",
    )
    exported = export_card(changed)
    again = parse_card(exported)
    assert again.data == changed.data
    # every path of the original is still there (edited lists may only grow)
    original_paths = paths(original_json(path))
    assert original_paths - paths(exported) <= {p for p in original_paths if ".tags[" in p}


@pytest.mark.parametrize("path", CORPUS_CARDS, ids=lambda p: p.name)
def test_png_export_carries_both_chunks_and_opens(path: Path) -> None:
    card = parse_card_bytes(path.read_bytes())
    cover = strip_card_chunks(path.read_bytes()) if path.suffix == ".png" else None
    out = export_card_png(edit(card, personality="edited"), cover)
    found = read_card_text(out)
    assert sorted(found.payloads) == ["ccv3", "chara"]
    chara, ccv3 = json.loads(found.payloads["chara"]), json.loads(found.payloads["ccv3"])
    assert (chara["spec"], chara["spec_version"]) == ("chara_card_v2", "2.0")
    assert ccv3["spec"] == "chara_card_v3"
    assert {k: v for k, v in chara.items() if k not in ("spec", "spec_version")} == {
        k: v for k, v in ccv3.items() if k not in ("spec", "spec_version")
    }
    with Image.open(io.BytesIO(out)) as image:
        image.load()
        if path.suffix == ".png":
            with Image.open(path) as before:
                assert image.tobytes() == before.tobytes()
    again = parse_card_bytes(out)
    assert again.data == edit(card, personality="edited").data
    assert again.source.png_keyword == "ccv3"


def test_reexporting_a_png_replaces_the_old_chunks() -> None:
    data = SERAPHINA.read_bytes()
    card = parse_card_bytes(data)
    out = export_card_png(edit(card, name="Twice"), data)  # the card's own image, chunks and all
    assert out.count(b"tEXtchara") == 1
    assert out.count(b"tEXtccv3") == 1
    assert parse_card_bytes(out).name == "Twice"


# ---------------------------------------------------------------- hybrids and versions


def test_hybrid_edit_updates_data_and_existing_v1_mirrors() -> None:
    card = parse_card_bytes(PXANSATU.read_bytes())
    exported = export_card(edit(card, name="Mirror", creator_notes="cn", first_message="hey"))
    assert exported["data"]["name"] == exported["name"] == "Mirror"
    assert exported["data"]["creator_notes"] == exported["creatorcomment"] == "cn"
    assert exported["data"]["first_mes"] == exported["first_mes"] == "hey"


def test_hybrid_data_wins_over_top_level() -> None:
    raw = {"name": "Top", "spec": "chara_card_v2", "data": {"name": "Inner", "description": "d"}}
    card = parse_card(raw)
    assert card.data.name == "Inner"
    assert card.data.description == "d"
    assert card.data.extensions == {}


def test_hybrid_missing_data_field_falls_back_to_mirror() -> None:
    raw = {"creatorcomment": "from top", "spec": "chara_card_v2", "data": {"name": "N"}}
    assert parse_card(raw).data.creator_notes == "from top"


def test_v1_card_edits_stay_flat_and_round_trip() -> None:
    card = parse_card_bytes(AQUA.read_bytes())
    changed = edit(card, creator_notes="by me", alternate_greetings=["hi again"])
    exported = export_card(changed)
    assert exported["creatorcomment"] == "by me"
    assert exported["alternate_greetings"] == ["hi again"]
    assert "data" not in exported
    assert parse_card(exported).data == changed.data


def test_v1_png_export_becomes_a_v2_v3_hybrid() -> None:
    card = parse_card_bytes(AQUA.read_bytes())
    found = read_card_text(export_card_png(card))
    chara = json.loads(found.payloads["chara"])
    assert chara["data"]["name"] == chara["name"] == "Aqua"
    assert chara["avatar"] == original_json(AQUA)["avatar"]  # V1 extras stay at the top


def test_gradio_card_fields() -> None:
    raw = {
        "char_name": "G",
        "char_persona": "p",
        "char_greeting": "g",
        "world_scenario": "w",
        "example_dialogue": "e",
    }
    card = parse_card(raw)
    assert (card.name, card.data.description, card.data.first_message) == ("G", "p", "g")
    assert (card.data.scenario, card.data.message_example) == ("w", "e")
    exported = export_card(edit(card, first_message="g2"))
    assert exported["char_greeting"] == "g2"
    assert "first_mes" not in exported


def test_v3_card_keeps_its_version_and_warns_when_newer() -> None:
    raw = {
        "spec": "chara_card_v3",
        "spec_version": "3.1",
        "data": {"name": "N", "nickname": "Nick"},
    }
    card = parse_card(raw)
    assert card.source.format == "character-card-v3"
    assert "newer-v3-version" in card.warnings
    assert card.data.nickname == "Nick"
    ccv3 = json.loads(read_card_text(export_card_png(card)).payloads["ccv3"])
    assert ccv3["spec_version"] == "3.1"


def test_number_fields_read_as_javascript_strings() -> None:
    card = parse_card(
        {
            "spec": "chara_card_v2",
            "data": {"name": "N", "character_version": 2.0, "tags": [1, None, "t"]},
        }
    )
    assert card.data.character_version == "2"
    assert card.data.tags == ["1", "t"]
    assert export_card(card) == {
        "spec": "chara_card_v2",
        "data": {"name": "N", "character_version": 2.0, "tags": [1, None, "t"]},
    }


def test_nameless_card_uses_the_file_name_and_warns() -> None:
    card = parse_card(
        {"spec": "chara_card_v2", "data": {"description": "d"}}, file_name="file stem"
    )
    assert card.name == "file stem"
    assert "missing-name" in card.warnings


# ---------------------------------------------------------------- PNG specifics


def png_with(payloads: list[tuple[str, bytes]]) -> bytes:
    return write_card_chunks(None, payloads)


def test_ccv3_wins_over_chara() -> None:
    v2 = json.dumps({"spec": "chara_card_v2", "data": {"name": "Old"}}).encode()
    v3 = json.dumps({"spec": "chara_card_v3", "data": {"name": "New"}}).encode()
    card = parse_card_bytes(png_with([("chara", v2), ("ccv3", v3)]))
    assert card.name == "New"
    assert "png-v3-precedence" in card.warnings


def test_unreadable_ccv3_falls_back_to_chara_with_a_warning() -> None:
    v2 = json.dumps({"spec": "chara_card_v2", "data": {"name": "Fallback"}}).encode()
    card = parse_card_bytes(png_with([("ccv3", b"{broken"), ("chara", v2)]))
    assert card.name == "Fallback"
    assert card.source.png_keyword == "chara"
    assert "png-ccv3-unreadable" in card.warnings


def test_v3_in_the_chara_chunk_is_noted() -> None:
    v3 = json.dumps({"spec": "chara_card_v3", "data": {"name": "N"}}).encode()
    assert "v3-in-legacy-chunk" in parse_card_bytes(png_with([("chara", v3)])).warnings


def test_unusable_chunks_fail_with_the_ccv3_error() -> None:
    with pytest.raises(FormatError) as info:
        parse_card_bytes(png_with([("ccv3", b"[]"), ("chara", b"\xff\xfe")]))
    assert info.value.code == "CHARACTER_CARD_INVALID"


def test_oversized_card_exports_fail_with_413() -> None:
    card = parse_card({"name": "Big", "description": "x" * (16 << 20)})
    with pytest.raises(FormatError) as info:
        export_card_png(card)
    assert (info.value.code, info.value.status) == ("CHARACTER_PNG_METADATA_TOO_LARGE", 413)


# ---------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"entries": {}}, "$"),
        ({"spec": "chara_card_v2", "data": "nope"}, "$.data"),
        ({"spec": "chara_card_v2", "data": {"name": ["x"]}}, "$.data.name"),
        ({"spec": "chara_card_v3", "data": {"tags": "a,b"}}, "$.data.tags"),
        ({"spec": "chara_card_v3", "data": {"tags": [{}]}}, "$.data.tags[0]"),
        ({"spec": "chara_card_v2", "data": {"extensions": []}}, "$.data.extensions"),
        ({"spec": "chara_card_v2", "data": {"character_book": "x"}}, "$.data.character_book"),
        ({"name": "v1", "description": True}, "$.description"),
        # Issue 33: a non-string spec was a TypeError (500) in the recognizer.
        ({"spec": [], "spec_version": "2.0", "data": {"name": "Fz"}}, "$.spec"),
        ({"spec": {}, "spec_version": "2.0", "data": {"name": "Fz"}}, "$.spec"),
        ({"spec": 2, "data": {"name": "Fz"}}, "$.spec"),
        ({"spec": "chara_card_v2", "spec_version": [], "data": {"name": "Fz"}}, "$.spec_version"),
        ({"spec": "chara_card_v2", "spec_version": {}, "data": {}}, "$.spec_version"),
    ],
)
def test_invalid_cards_name_the_field(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_card(raw)
    assert (info.value.code, info.value.status, info.value.path) == (
        "CHARACTER_CARD_INVALID",
        400,
        path,
    )


def test_json_card_with_a_byte_order_mark_imports() -> None:
    data = b"\xef\xbb\xbf" + PXANSATU.read_bytes()
    assert parse_card_bytes(data).name == "Pxansatu"


def test_invalid_json_and_oversized_files() -> None:
    with pytest.raises(FormatError) as info:
        parse_card_bytes(b"\xef\xbb{not json")
    assert info.value.code == "INVALID_JSON"
    with pytest.raises(FormatError) as info:
        parse_card_bytes(b" " * ((32 << 20) + 1))
    assert (info.value.code, info.value.status) == ("ARTIFACT_TOO_LARGE", 413)


# ---------------------------------------------------------------- embedded book


def test_invalid_embedded_book_imports_but_fails_closed() -> None:
    raw = {
        "spec": "chara_card_v2",
        "data": {"name": "N", "character_book": {"entries": "bad", "x": 1}},
    }
    card = parse_card(raw)
    assert "embedded-world-book-invalid" in card.warnings
    assert export_card(card) == raw
    with pytest.raises(FormatError) as info:
        card_world_book(card)
    assert info.value.code == "EMBEDDED_WORLD_BOOK_INVALID"


def test_replacing_the_embedded_book_is_guarded() -> None:
    card = parse_card_bytes(SAKANA.read_bytes())
    too_many = {"entries": [{"keys": ["k"], "content": "c"}] * 10_001}
    with pytest.raises(FormatError) as info:
        with_character_book(card, too_many)
    assert (info.value.code, info.value.status) == ("EMBEDDED_WORLD_BOOK_INVALID", 413)
    deep: Any = [1]
    for _ in range(40):
        deep = [deep]
    with pytest.raises(FormatError) as info:
        with_character_book(card, {"entries": [], "deep": deep})
    assert (info.value.code, info.value.status) == ("EMBEDDED_WORLD_BOOK_INVALID", 400)
    book = {"name": "Draft", "entries": [], "x-keep": {"a": 1}}
    updated = with_character_book(card, book)
    exported = export_card(updated)
    assert exported["data"]["character_book"] == book
    assert parse_card(exported).data == updated.data
    removed = export_card(with_character_book(card, None))
    assert "character_book" not in removed["data"]


# ---------------------------------------------------------------- regex


def test_v2_card_regex_scripts_go_to_data_extensions() -> None:
    card = parse_card_bytes(SENSEI.read_bytes())
    scripts = [{"id": "r", "findRegex": "/a/g", "vendor": {"k": 1}}]
    updated = with_card_regex_scripts(card, scripts)
    assert card_regex_scripts(updated) == scripts
    exported = export_card(updated)
    assert exported["data"]["extensions"]["regex_scripts"] == scripts
    assert (
        exported["data"]["extensions"]["depth_prompt"]
        == original_json(SENSEI)["data"]["extensions"]["depth_prompt"]
    )
    assert parse_card(exported).data == updated.data


def test_v1_card_regex_scripts_go_to_extensions() -> None:
    card = parse_card_bytes(AQUA.read_bytes())
    exported = export_card(with_card_regex_scripts(card, [{"id": "r"}]))
    assert exported["extensions"]["regex_scripts"] == [{"id": "r"}]


def test_card_regex_scripts_stay_on_an_existing_root_path() -> None:
    raw = {"spec": "chara_card_v2", "regex_scripts": [{"id": "old"}], "data": {"name": "N"}}
    updated = with_card_regex_scripts(parse_card(raw), [{"id": "new"}])
    assert card_regex_scripts(updated) == [{"id": "new"}]
    exported = export_card(updated)
    assert exported["regex_scripts"] == [{"id": "new"}]
    assert exported["data"] == {"name": "N"}


def test_card_model_encodes_camel_case() -> None:
    wire = msgspec.json.decode(
        msgspec.json.encode(CardData(first_message="hi", post_history_instructions="p"))
    )
    assert wire["firstMessage"] == "hi"
    assert wire["postHistoryInstructions"] == "p"


# ---------------------------------------------------------------- edits


def test_card_patch_changes_fields_and_exports() -> None:
    card = parse_card_bytes(SERAPHINA.read_bytes())
    out = edit_card(card, {"name": "Sera", "firstMessage": "Hi", "alternateGreetings": ["a", "b"]})
    assert (out.name, out.data.first_message, out.data.alternate_greetings) == (
        "Sera",
        "Hi",
        ["a", "b"],
    )
    assert out.data.description == card.data.description
    assert parse_card(export_card(out)).data == out.data


@pytest.mark.parametrize(
    "patch",
    [{"characterBook": {}}, {"extensions": {}}, {"name": 3}, {"tags": "a"}, {"tags": [1]}, []],
)
def test_card_patch_rejects_other_fields(patch: Any) -> None:
    card = parse_card_bytes(SENSEI.read_bytes())
    with pytest.raises(FormatError) as info:
        edit_card(card, patch)
    assert (info.value.code, info.value.status) == ("CHARACTER_CARD_INVALID", 400)
