"""A playthrough that was not imported is exported as a chat that opens with a header and its
card's greeting, read from the card as ``GET /characters/:id`` serves it (docs/migration.md
"Going back: export a SillyTavern folder")."""

from __future__ import annotations

import json
from typing import Any, cast

from innkeeper_tavern.features.migration.export_chats import Reader, _opening
from innkeeper_tavern.pure.api_paths import V1_PREFIX


class _Library:
    """The two reads ``_opening`` makes, answered from a card document."""

    def __init__(self, card: dict[str, Any]) -> None:
        self.card = card
        self.paths: list[str] = []

    async def json_of(self, path: str) -> Any:
        self.paths.append(path)
        return {"character": self.card} if path == f"{V1_PREFIX}/characters/c1" else {}

    async def file(self, path: str) -> str | None:
        return None


async def test_a_new_playthrough_opens_with_its_cards_greeting() -> None:
    library = _Library({"id": "c1", "data": {"name": "Seraphina", "firstMessage": "Welcome."}})
    row = {"path": "play/p1/timeline.json", "ext": {"pmpDshTavern": {"characterId": "c1"}}}
    text = await _opening(cast(Reader, library), row, ("Ann", "Seraphina"))
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["user_name"] == "Ann" and lines[0]["character_name"] == "Seraphina"
    assert lines[1] == {
        "name": "Seraphina",
        "is_user": False,
        "mes": "Welcome.",
        "swipes": ["Welcome."],
        "swipe_id": 0,
    }
    assert library.paths == [f"{V1_PREFIX}/characters/c1"]


async def test_a_card_without_a_greeting_gives_a_header_alone() -> None:
    library = _Library({"id": "c1", "data": {"name": "Seraphina", "firstMessage": ""}})
    row = {"path": "play/p1/timeline.json", "ext": {"pmpDshTavern": {"characterId": "c1"}}}
    text = await _opening(cast(Reader, library), row, ("Ann", "Seraphina"))
    assert len(text.splitlines()) == 1
