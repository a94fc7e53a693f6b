"""HTTP card import and ``innkeeper import`` recognize cards with one rule (issue 10, item 8)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.state.resources.classify import classify

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"

DOCUMENTS: dict[str, Any] = {
    "package.json": {"name": "my-app", "version": "1.0.0", "dependencies": {"left-pad": "1"}},
    "named-object": {"name": "Seraphina", "description": "only a name and a description"},
    "v1-card": {"name": "Ada", "description": "d", "first_mes": "Hello.", "mes_example": ""},
    "v2-card": {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Bea"}},
    "v3-card": {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Cy"}},
    "preset": {"prompts": [], "temperature": 1, "name": "not a card"},
}


@pytest.mark.parametrize("label", sorted(DOCUMENTS))
async def test_http_import_accepts_exactly_what_the_cli_calls_a_card(
    tavern: Any, label: str
) -> None:
    data = json.dumps(DOCUMENTS[label]).encode()
    cli_kind, _ = classify(data)
    resp = await tavern.call(
        "POST",
        f"/characters/import?filename={label}.json",
        data=data,
        content_type="application/json",
    )
    if cli_kind == "character":
        assert "character" in resp, resp
    else:
        assert resp["code"] == "CHARACTER_CARD_INVALID", resp
        assert "not a character card" in resp["error"]["message"]
        assert resp["error"]["details"] == {"path": "$"}
    assert (cli_kind == "character") == label.endswith("card")


async def test_corpus_cards_still_import(tavern: Any) -> None:
    for path in (ST / "default_Seraphina.png",):
        body = await tavern.call(
            "POST",
            f"/characters/import?filename={path.name}",
            data=path.read_bytes(),
            content_type="image/png",
            status=201,
        )
        assert body["character"]["name"] == "Seraphina"
