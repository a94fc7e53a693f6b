"""World-book export is the original field for field; an edit changes only what it edits
(issue 10, item 9)."""

from __future__ import annotations

import copy
import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.pure.formats.card import parse_card_bytes

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
STANDALONE = (
    "sillytavern-repo/staging-1ac6780/Eldoria.json",
    "sillytavern-repo/tag-1.0.0/Toaru.json",
    "prolix-oc-st-presets/worldbooks/The Long Reclamation.json",
)
CARDS = (
    "sillytavern-repo/staging-1ac6780/default_Seraphina.png",
    "sillytavern-content/contest_Assistant_Sakana.png",
    "prolix-oc-st-presets/cards/Pxansatu.json",
)


def corpus_books() -> list[tuple[str, dict[str, Any]]]:
    books = [(rel, json.loads((CORPUS / rel).read_text("utf-8"))) for rel in STANDALONE]
    for rel in CARDS:
        book = parse_card_bytes((CORPUS / rel).read_bytes()).data.character_book
        assert book is not None
        books.append((rel + "#character_book", book))
    return books


async def import_book(tavern: Any, doc: dict[str, Any], name: str) -> str:
    body = await tavern.call(
        "POST",
        f"/world-books/import?filename={urllib.parse.quote(Path(name).name)}.json",
        data=json.dumps(doc).encode(),
        content_type="application/json",
        status=201,
    )
    return str(body["worldBook"]["id"])


async def exported(tavern: Any, book_id: str) -> Any:
    status, data, _ = await tavern.raw(f"/world-books/{book_id}/json")
    assert status == 200
    return json.loads(data)


@pytest.mark.parametrize(("name", "original"), corpus_books(), ids=lambda v: str(v)[:40])
async def test_an_unedited_export_is_the_original(
    tavern: Any, name: str, original: dict[str, Any]
) -> None:
    book_id = await import_book(tavern, original, name)
    assert await exported(tavern, book_id) == original


async def test_an_edited_export_changes_only_the_edit(tavern: Any) -> None:
    original = json.loads((CORPUS / STANDALONE[0]).read_text("utf-8"))
    book_id = await import_book(tavern, original, "Eldoria")
    doc = (await tavern.get(f"/world-books/{book_id}"))["worldBook"]
    assert "raw" not in doc["source"]  # the original is served by the export route only
    book = doc["book"]
    book["entries"][0]["content"] = "Edited content."
    added = copy.deepcopy(book["entries"][1])
    added.update(uid=999, source_key=None, content="A new entry.")
    book["entries"].append(added)
    await tavern.call("PATCH", f"/world-books/{book_id}", json={"book": book}, status=200)

    out = await exported(tavern, book_id)
    first = next(iter(original["entries"]))
    expected = copy.deepcopy(original)
    expected["entries"][first]["content"] = "Edited content."
    new = out["entries"].pop("999")
    assert out == expected  # every untouched field keeps its original spelling
    assert new["content"] == "A new entry." and new["uid"] == 999
