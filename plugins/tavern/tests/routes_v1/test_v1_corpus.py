"""Every file of the shared SillyTavern corpus goes through the v1 routes, and exports re-import
to the same normalized model (`docs/contract/http-api.md#prefixes` and
`docs/contract/resources.md#preset-export`)."""

from __future__ import annotations

import io
import json
import urllib.parse
from pathlib import Path
from typing import Any

import msgspec
import pytest
from PIL import Image

from innkeeper_tavern.pure.formats.card import parse_card_bytes
from innkeeper_tavern.pure.formats.png import read_card_text
from innkeeper_tavern.pure.formats.preset import parse_preset_json
from innkeeper_tavern.pure.formats.worldbook import parse_any_world_book

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
Tavern = Any

# What each corpus file is (checked by hand against INDEX.md, independent of the classifier).
EXPECTED: dict[str, str] = {
    "sillytavern-repo/staging-1ac6780/default_Seraphina.png": "character",
    "sillytavern-repo/staging-1ac6780/Eldoria.json": "world-book",
    "sillytavern-repo/staging-1ac6780/presets_openai_Default.json": "preset",
    "sillytavern-repo/staging-1ac6780/settings.json": "settings",
    "sillytavern-repo/tag-1.0.0/Aqua.png": "character",
    "sillytavern-repo/tag-1.0.0/Toaru.json": "world-book",
    "sillytavern-repo/tag-1.9.7/OpenAI_Default.settings.json": "preset",
    "sillytavern-content/contest_Assistant_Sakana.png": "character",
    "sillytavern-content/default_CodingSensei.png": "character",
    "prolix-oc-st-presets/presets/Lucid Loom v2.8.json": "preset",
    "prolix-oc-st-presets/presets/StoryWeaver v1.1.json": "preset",
    "prolix-oc-st-presets/regex/regex-remove_details_blocks.json": "regex",
    "prolix-oc-st-presets/regex/regex-replace_formatted_quote.json": "regex",
    "prolix-oc-st-presets/regex/regex-replace_formatted_single_quote.json": "regex",
    "prolix-oc-st-presets/regex/regex-trim_sim_blocks.json": "regex",
    "prolix-oc-st-presets/regex/regex-trimdetailsblocks.json": "regex",
    "prolix-oc-st-presets/worldbooks/The Long Reclamation.json": "world-book",
    "prolix-oc-st-presets/cards/Pxansatu.json": "character",
}


def corpus_files() -> list[str]:
    return sorted(
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*")
        if p.is_file() and p.suffix in (".json", ".png")
    )


def test_the_table_covers_the_whole_corpus() -> None:
    assert corpus_files() == sorted(EXPECTED)


def of_kind(kind: str) -> list[str]:
    return [name for name, k in EXPECTED.items() if k == kind]


def _q(name: str) -> str:
    return urllib.parse.quote(name)


async def import_card(tavern: Tavern, rel: str) -> dict[str, Any]:
    data = (CORPUS / rel).read_bytes()
    ctype = "image/png" if rel.endswith(".png") else "application/json"
    body = await tavern.call(
        "POST",
        f"/characters/import?filename={_q(Path(rel).name)}",
        data=data,
        content_type=ctype,
        status=201,
    )
    return body["character"]  # type: ignore[no-any-return]


def plain(model: Any) -> Any:
    """A model as the JSON a client receives."""
    return json.loads(msgspec.json.encode(model))


def strip_volatile(model: Any) -> Any:
    """A normalized model without diagnostics (they describe the source file, not the book)."""
    doc = plain(model)
    doc.pop("diagnostics", None)
    return doc


@pytest.mark.parametrize("rel", of_kind("character"))
async def test_cards_import_and_export_round_trip(tavern: Tavern, rel: str) -> None:
    original = parse_card_bytes((CORPUS / rel).read_bytes(), file_name=Path(rel).stem)
    character = await import_card(tavern, rel)
    cid = character["id"]
    assert character["name"] == original.name
    assert character["data"] == plain(original.data)
    assert character["source"]["sha256"] == original.source.sha256
    assert "raw" not in character["source"]
    assert character["hasCover"] is rel.endswith(".png")

    status, exported_json, headers = await tavern.raw(f"/characters/{cid}/json")
    assert status == 200 and headers["Content-Disposition"].startswith("attachment")
    # The JSON export keeps every unknown field of the original.
    assert json.loads(exported_json) == original.source.raw
    again = parse_card_bytes(exported_json)
    assert again.data == original.data

    status, png, headers = await tavern.raw(f"/characters/{cid}/png")
    assert status == 200 and headers["Content-Type"] == "image/png"
    text = read_card_text(png)
    assert {"chara", "ccv3"} <= set(text.keywords)
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        if rel.endswith(".png"):
            with Image.open(CORPUS / rel) as source:
                assert image.size == source.size
    reimported = await tavern.call(
        "POST",
        "/characters/import?filename=again.png",
        data=png,
        content_type="image/png",
        status=201,
    )
    assert reimported["character"]["data"] == character["data"]


@pytest.mark.parametrize("rel", of_kind("preset"))
async def test_presets_import_and_export_round_trip(tavern: Tavern, rel: str) -> None:
    text = (CORPUS / rel).read_text("utf-8")
    name = Path(rel).stem
    body = await tavern.call("POST", "/import", json={"content": text, "name": name}, status=201)
    preset = body["preset"]
    expected = parse_preset_json(text, name=name)
    assert preset["name"] == expected.name
    assert preset["prompts"] == plain(expected.prompts)
    assert preset["sampling"] == plain(expected.sampling)

    status, exported, headers = await tavern.raw(f"/presets/{preset['id']}/export")
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    assert headers["Content-Disposition"].startswith("attachment")
    again = await tavern.call(
        "POST", "/import", json={"content": exported.decode("utf-8")}, status=201
    )
    assert again["preset"]["prompts"] == preset["prompts"]
    assert again["preset"]["sampling"] == preset["sampling"]
    assert again["preset"]["name"] == preset["name"]
    # Unknown top-level fields of the original survive the export.
    original = json.loads(text)
    exported_doc = json.loads(exported)
    for key in original:
        if key not in ("name", "prompts", "prompt_order") and not key.endswith("_prompt"):
            assert key in exported_doc, key


@pytest.mark.parametrize("rel", of_kind("world-book"))
async def test_world_books_import_and_export_round_trip(tavern: Tavern, rel: str) -> None:
    data = (CORPUS / rel).read_bytes()
    body = await tavern.call(
        "POST",
        f"/world-books/import?filename={_q(Path(rel).name)}",
        data=data,
        content_type="application/json",
        status=201,
    )
    book = body["worldBook"]
    expected = parse_any_world_book(json.loads(data))
    assert book["book"] == plain(expected)
    assert book["name"] == (expected.name or Path(rel).stem)
    assert book["source"]["byteLength"] == len(data)

    status, exported, headers = await tavern.raw(f"/world-books/{book['id']}/json")
    assert status == 200 and headers["Content-Disposition"].startswith("attachment")
    assert strip_volatile(parse_any_world_book(json.loads(exported))) == strip_volatile(expected)
    listing = await tavern.get("/world-books")
    assert listing["worldBooks"][0]["entryCount"] == len(expected.entries)


@pytest.mark.parametrize("rel", of_kind("regex"))
async def test_regex_scripts_attach_to_a_preset_and_a_card(tavern: Tavern, rel: str) -> None:
    script = json.loads((CORPUS / rel).read_text("utf-8"))
    preset = (await tavern.call("POST", "/presets", json={"name": "R"}, status=201))["preset"]
    body = await tavern.call(
        "PUT", f"/presets/{preset['id']}/regex-scripts", json={"regexScripts": [script]}, status=200
    )
    assert body["regexScripts"] == [script]
    exported = json.loads((await tavern.raw(f"/presets/{preset['id']}/export"))[1])
    assert exported["extensions"]["regex_scripts"] == [script]

    card = await import_card(tavern, "sillytavern-content/default_CodingSensei.png")
    await tavern.call(
        "PUT",
        f"/characters/{card['id']}/regex-scripts",
        json={"regexScripts": [script]},
        status=200,
    )
    got = await tavern.get(f"/characters/{card['id']}/regex-scripts")
    assert got["regexScripts"] == [script]
    exported_card = json.loads((await tavern.raw(f"/characters/{card['id']}/json"))[1])
    assert exported_card["data"]["extensions"]["regex_scripts"] == [script]


async def test_the_settings_file_is_refused_cleanly(tavern: Tavern) -> None:
    text = (CORPUS / of_kind("settings")[0]).read_text("utf-8")
    body = await tavern.call("POST", "/import", json={"content": text}, status=400)
    assert body["code"] == "PRESET_INVALID"
    assert (await tavern.get("/presets"))["presets"] == []


async def test_regex_scripts_put_applies_the_depth_32_guard(tavern: Tavern) -> None:
    """Issue 19 item 5: what the regex PUT stores must re-import through ``POST /import``."""
    preset = await tavern.call("POST", "/presets", json={"name": "deep regex"}, status=201)
    pid = preset["preset"]["id"]
    nested: Any = "leaf"
    for _ in range(40):
        nested = [nested]
    answer = await tavern.call(
        "PUT",
        f"/presets/{pid}/regex-scripts",
        json={"regexScripts": [{"scriptName": "x", "findRegex": "a", "extra": nested}]},
        status=400,
    )
    assert answer["code"] == "STRUCTURE_TOO_DEEP"
    # The deepest array the PUT accepts still exports into a preset that re-imports.
    accepted = 0
    for depth in range(20, 34):
        deep: Any = "leaf"
        for _ in range(depth):
            deep = [deep]
        scripts = [{"scriptName": "x", "findRegex": "a", "extra": deep}]
        resp = await tavern.client.put(
            f"/pmp-dsh-tavern/api/v1/presets/{pid}/regex-scripts",
            json={"regexScripts": scripts},
            headers=tavern.origin,
        )
        if resp.status != 200:
            assert (resp.status, (await resp.json())["code"]) == (400, "STRUCTURE_TOO_DEEP")
            break
        accepted = depth
    assert 20 <= accepted < 33
    deep = "leaf"
    for _ in range(accepted):
        deep = [deep]
    await tavern.call(
        "PUT",
        f"/presets/{pid}/regex-scripts",
        json={"regexScripts": [{"scriptName": "x", "findRegex": "a", "extra": deep}]},
    )
    _, exported, _ = await tavern.raw(f"/presets/{pid}/export")
    again = await tavern.call("POST", "/import", json={"content": exported.decode()}, status=201)
    assert again["preset"]["id"] != pid
