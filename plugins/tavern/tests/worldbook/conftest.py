"""Fixtures for the world-book tests: corpus books read in place (never copied into the repo)."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.pure.formats.worldbook import (
    WorldBook,
    parse_character_book,
    parse_world_book,
)

#: `<repo>/../shared/sillytavern-corpus`, resolved from this file (tests/worldbook → repo root).
CORPUS = (Path(__file__).resolve().parents[4] / ".." / "shared" / "sillytavern-corpus").resolve()

STANDALONE = (
    "sillytavern-repo/staging-1ac6780/Eldoria.json",
    "sillytavern-repo/tag-1.0.0/Toaru.json",
    "prolix-oc-st-presets/worldbooks/The Long Reclamation.json",
)
CARDS_PNG = (
    "sillytavern-repo/staging-1ac6780/default_Seraphina.png",
    "sillytavern-content/contest_Assistant_Sakana.png",
)
CARDS_JSON = ("prolix-oc-st-presets/cards/Pxansatu.json",)


def _png_card(path: Path) -> dict[str, Any]:
    """Minimal tEXt reader (ccv3 wins over chara), enough to reach the embedded book."""
    data = path.read_bytes()
    chunks: dict[str, bytes] = {}
    offset = 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"tEXt":
            keyword, _, value = body.partition(b"\0")
            chunks[keyword.decode("latin-1").lower()] = value
    card: dict[str, Any] = json.loads(base64.b64decode(chunks.get("ccv3") or chunks["chara"]))
    return card


def corpus_books() -> list[tuple[str, dict[str, Any], str]]:
    """(name, raw document, shape) for every world book and embedded book in the corpus."""
    out: list[tuple[str, dict[str, Any], str]] = []
    for rel in STANDALONE:
        out.append((rel, json.loads((CORPUS / rel).read_text("utf-8")), "st"))
    for rel in CARDS_PNG:
        card = _png_card(CORPUS / rel)
        out.append((rel, card["data"]["character_book"], "character_book"))
    for rel in CARDS_JSON:
        card = json.loads((CORPUS / rel).read_text("utf-8"))
        out.append((rel, card["data"]["character_book"], "character_book"))
    return out


def parse_corpus(raw: dict[str, Any], shape: str) -> WorldBook:
    return parse_world_book(raw) if shape == "st" else parse_character_book(raw)


@pytest.fixture(scope="session")
def corpus() -> list[tuple[str, dict[str, Any], str]]:
    if not CORPUS.is_dir():  # pragma: no cover - the corpus ships beside the repo
        pytest.fail(f"corpus not found at {CORPUS}")
    return corpus_books()
