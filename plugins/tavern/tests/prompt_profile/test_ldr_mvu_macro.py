"""``{{format_message_variable::stat_data}}`` in lore (docs/contract/mvu.md#world-book-macro)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_tavern.features.prompt_profile.mvu_macro import (
    MvuDependencyUnavailable,
    expand_mvu_markers,
    marker,
    strip_dollar_keys,
    to_yaml,
)
from innkeeper_tavern.features.prompt_render import LoreEntry

from .conftest import V1, Tavern


async def test_markers_expand_with_inherited_indentation_and_literal_macros() -> None:
    lore = (
        LoreEntry(
            lore_id="b:1", content=f"Status:\n  {marker(['stat_data'])}\nEnd.", resource_id="book-1"
        ),
        LoreEntry(lore_id="b:2", content="No variables here."),
    )
    variables = {
        "stat_data": {
            "hp": 100,
            "$meta": {"extensible": True},
            "bag": {"$x": 1, "note": "{{char}}"},
        }
    }
    reads: list[int] = []

    async def read(book_id: str) -> dict[str, Any]:
        reads.append(book_id)
        return variables

    first, second = await expand_mvu_markers(lore, read)
    assert first.content == "Status:\n  hp: 100\n  bag:\n    note: '{{char}}'\nEnd."
    assert second.content == "No variables here."
    assert reads == ["book-1"]


async def test_no_marker_reads_nothing_and_unavailable_stops() -> None:
    async def never(book_id: str) -> dict[str, Any]:
        raise AssertionError("MVU must not be read")

    plain = (LoreEntry(lore_id="b:1", content="plain"),)
    assert await expand_mvu_markers(plain, never) == plain

    async def denied(book_id: str) -> None:
        return None

    with pytest.raises(MvuDependencyUnavailable):
        await expand_mvu_markers((LoreEntry(lore_id="b:1", content=marker(["stat_data"])),), denied)


def test_yaml_rendering() -> None:
    assert strip_dollar_keys([{"$a": 1, "b": [{"$c": 2, "d": 3}]}]) == [{"b": [{"d": 3}]}]
    assert to_yaml({"名字": "艾拉", "hp": [1, 2]}) == "名字: 艾拉\nhp:\n- 1\n- 2"
    assert to_yaml(5) == "5"


async def test_a_turn_shows_the_sessions_variables_in_lore(tavern: Tavern) -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Ada",
            "first_mes": "Welcome.",
            "character_book": {
                "entries": [
                    {
                        "keys": [],
                        "content": "hp: 100\nmood: calm",
                        "comment": "[initvar] base",
                        "enabled": True,
                        "insertion_order": 100,
                    },
                    {
                        "keys": [],
                        "constant": True,
                        "content": "Current state:\n  {{format_message_variable::stat_data}}",
                        "comment": "status",
                        "enabled": True,
                        "insertion_order": 10,
                    },
                ]
            },
        },
    }
    created = await tavern.call(
        "POST",
        f"{V1}/characters/import?filename=ada.json",
        data=json.dumps(card).encode(),
        content_type="application/json",
        status=201,
    )
    session = await tavern.new_session()
    await tavern.v1(
        "POST",
        "/character-selection",
        {"sessionId": session, "characterCardId": created["character"]["id"]},
    )
    tavern.provider.enqueue(SyntheticReply.with_mvu("You feel better.", {"hp": 120}), "Fine.")
    await tavern.prompt(session, "I drink the potion.")
    first = tavern.provider.requests[-1].messages[0].content
    assert "Current state:\n  hp: 100\n  mood: calm" in first
    await tavern.prompt(session, "How am I?")
    second = tavern.provider.requests[-1].messages[0].content
    assert "Current state:\n  hp: 120\n  mood: calm" in second  # the committed update
