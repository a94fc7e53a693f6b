"""A card with MVU openings for the opening tests (on ``pythonpath`` like
:mod:`play_harness`): ``[initvar]`` ``hp: 100, place: home``; greeting 0 sets hp 90, greeting 1
sets hp 40, greeting 2 has no envelope."""

from __future__ import annotations

import json

from play_harness import Play

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Ada",
        "first_mes": 'Morning.\n<UpdateVariable>_.set("hp", 90);</UpdateVariable>',
        "alternate_greetings": [
            'Night.\n<UpdateVariable>_.set("hp", 40);</UpdateVariable>',
            "Plain.",
        ],
        "character_book": {
            "name": "Ada book",
            "entries": [
                {
                    "keys": [],
                    "content": "hp: 100\nplace: home",
                    "comment": "[initvar] base",
                    "enabled": True,
                    "insertion_order": 100,
                }
            ],
        },
    },
}


async def card(play: Play) -> str:
    imported = await play.resources.import_character(json.dumps(CARD).encode(), "ada.json")
    return imported.record.id
