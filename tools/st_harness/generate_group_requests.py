"""Generate the group request fixture (``plugins/assembler/tests/st_fixtures/groups.json``):
for scripted group playthroughs, the message array SillyTavern sends for each speaker's turn,
produced by its own code (``group_assembly_driver.mjs``: ``group-chats.js`` opens the group and
joins the cards, ``openai.js`` assembles; see ``README.md``).

    uv run --no-sync python tools/st_harness/generate_group_requests.py --st-repo PATH

A scenario is one group playthrough under one corpus preset: two to four members (synthetic
cards of this file or corpus cards), a muted member or none, swap, join or join-with-muted mode
with a join prefix/suffix or none, the user Mira with a persona, the constant lore or none,
sometimes group prompts of its own or a context budget that trims the chat. Its
script (:data:`SCRIPT`): the player's first message answered by the first member (a new chat:
every member's greeting opens it), a reply without input by the second, the player's second
message answered by the last member (the muted one when there is one: a player's pick), then a
continue and an impersonate request as that last speaker. Each request is a case; the fixture
keeps role, content digest and name per message (the corpus texts stay out of the repository).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from generate import (
    INPUTS,
    LORE,
    PERSONA,
    PRESETS,
    REPLIES,
    ROLL_VALUE,
    ST_COMMIT,
    USER,
    checkout,
    corpus_card,
    preset,
    run_driver,
    synthetic_card,
)
from st_parity import wire

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parents[1]
OUT: Final = REPO / "plugins" / "assembler" / "tests" / "st_fixtures" / "groups.json"
#: Innkeeper's generation modes and SillyTavern's numbers for them.
MODES: Final = {"swap": 0, "join": 1, "join-with-muted": 2}
#: Join prefix / suffix pairs (``<FIELDNAME>``, ``{{char}}`` and ``{{user}}`` in them).
AFFIXES: Final = (
    ("", ""),
    ("[<FIELDNAME> of {{char}}]", ""),
    ("<{{char}}'s <FIELDNAME>>", "</{{char}}, told to {{user}}>"),
)


def _member(name: str, **fields: Any) -> dict[str, Any]:
    card: dict[str, Any] = {
        "name": name,
        "description": "",
        "personality": "",
        "scenario": "",
        "first_mes": "",
        "mes_example": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "depth_prompt": None,
    }
    card.update(fields)
    return card


#: The synthetic members, in the order a scenario takes them.
SYNTHETIC: Final = (
    {
        **synthetic_card(2),
        # In a group {{group}} and {{charIfNotGroup}} are the member list, not the speaker.
        "system_prompt": "You are {{char}}, one of {{group}}, with {{charIfNotGroup}} and "
        "{{user}}. {{original}}",
    },
    _member(
        "Bram",
        description="Bram is a blacksmith who owes {{user}} a favour.",
        personality="loud, loyal",
        first_mes="*Bram waves at {{user}}.* Hello from {{char}} to {{group}}!",
        mes_example="<START>\n{{user}}: Is the sword ready?\n{{char}}: Nearly.",
    ),
    _member(
        "Cyd",
        description="Cyd is a quiet scribe.",
        scenario="The village library.",
        first_mes="*Cyd nods.*",
        post_history_instructions="{{char}} speaks little.",
        depth_prompt={"prompt": "{{char}} writes everything down.", "depth": 1, "role": "user"},
    ),
    _member(
        "Dee Dee",
        description="Dee Dee sells maps to {{user}} and {{char}}'s friends.",
        personality="cheerful",
        mes_example="<START>\n{{char}}: Maps! Fresh maps!",
        depth_prompt={"prompt": "{{char}} exaggerates.", "depth": 0, "role": "assistant"},
    ),
)
#: The first three without example dialogue and depth prompts, for the budget cases: Innkeeper
#: always sends those (docs/assembler.md), SillyTavern trims them with the chat.
PLAIN: Final = tuple({**m, "mes_example": "", "depth_prompt": None} for m in SYNTHETIC[:3])
#: What a scenario does, step by step: the player's message (or none) and who answers it
#: (``first``, ``second``, ``last``: the muted member when there is one, else the last).
SCRIPT: Final = (
    ("new", INPUTS[0], "first"),
    ("reply", None, "second"),
    ("played", INPUTS[1], "last"),
)
PREVIEWS: Final = ("continue", "impersonate")
KINDS: Final = (*(s[0] for s in SCRIPT), *PREVIEWS)


def scenarios() -> Iterator[dict[str, Any]]:
    """Every scenario of every preset.

    Keys: ``id``, ``preset``, ``members`` (corpus names or synthetic card dicts), ``muted``
    (member indexes), ``mode``, ``prefix``, ``suffix``, ``persona``, ``lore``, ``settings``.
    """
    for p in PRESETS:
        for mode in MODES:
            for size in (2, 3, 4):
                prefix, suffix = AFFIXES[size - 2]
                yield {
                    "id": f"{p}/synthetic/{mode}/{size}" + ("/muted" if size > 2 else ""),
                    "preset": p,
                    "members": list(SYNTHETIC[:size]),
                    "muted": [2] if size > 2 else [],
                    "mode": mode,
                    "prefix": prefix,
                    "suffix": suffix,
                    "persona": True,
                    "lore": False,
                    "settings": {},
                }
        for mode in ("swap", "join"):
            yield {
                "id": f"{p}/synthetic/{mode}/4",
                "preset": p,
                "members": list(SYNTHETIC),
                "muted": [],
                "mode": mode,
                "prefix": AFFIXES[1][0],
                "suffix": AFFIXES[2][1],
                "persona": True,
                "lore": True,
                "settings": {
                    "group_nudge_prompt": "[{{char}} answers; {{charIfNotGroup}} listen.]",
                    "new_group_chat_prompt": "[Group: {{group}}. Not {{char}} alone.]",
                },
            }
        if p == "default":  # a budget that drops the oldest messages (greetings first)
            for mode, budget in (("swap", 265), ("swap", 275), ("join", 310)):
                yield {
                    "id": f"{p}/plain/{mode}/3/budget{budget}",
                    "preset": p,
                    "members": list(PLAIN),
                    "muted": [],
                    "mode": mode,
                    "prefix": "",
                    "suffix": "",
                    "persona": True,
                    "lore": False,
                    "settings": {"openai_max_context": budget, "openai_max_tokens": 100},
                }
        yield {
            "id": f"{p}/synthetic/join/4/names-1",
            "preset": p,
            "members": list(SYNTHETIC),
            "muted": [],
            "mode": "join",
            "prefix": AFFIXES[2][0],
            "suffix": AFFIXES[2][1],
            "persona": False,
            "lore": True,
            "settings": {"names_behavior": -1},
        }
        for mode in ("swap", "join"):
            yield {
                "id": f"{p}/corpus/{mode}/seraphina-aqua-sakana/muted",
                "preset": p,
                "members": ["seraphina", "aqua", "sakana"],
                "muted": [1],
                "mode": mode,
                "prefix": AFFIXES[1][0],
                "suffix": "",
                "persona": True,
                "lore": True,
                "settings": {},
            }
        yield {
            "id": f"{p}/corpus/join-with-muted/coding-sensei-pxansatu",
            "preset": p,
            "members": ["coding-sensei", "pxansatu"],
            "muted": [0],
            "mode": "join-with-muted",
            "prefix": AFFIXES[2][0],
            "suffix": AFFIXES[2][1],
            "persona": True,
            "lore": False,
            "settings": {},
        }


def _st_character(card: dict[str, Any]) -> dict[str, Any]:
    depth = card.get("depth_prompt")
    return {
        "name": card["name"],
        "avatar": f"{card['name']}.png",
        "description": card["description"],
        "personality": card["personality"],
        "scenario": card["scenario"],
        "first_mes": card["first_mes"],
        "mes_example": card["mes_example"],
        "data": {
            "system_prompt": card["system_prompt"],
            "post_history_instructions": card["post_history_instructions"],
            "extensions": {"depth_prompt": depth} if depth else {},
        },
    }


def speaker_index(scenario: dict[str, Any], who: str) -> int:
    """The member a script step's ``who`` names."""
    if who == "first":
        return 0
    if who == "second":
        return 1
    return scenario["muted"][0] if scenario["muted"] else len(scenario["members"]) - 1


def cases(scenario: dict[str, Any], index: int) -> Iterator[dict[str, Any]]:
    """The driver cases of a scenario (``index`` makes its group ids unique)."""
    cards = [corpus_card(m) if isinstance(m, str) else m for m in scenario["members"]]
    characters = [_st_character(c) for c in cards]
    avatars = [c["avatar"] for c in characters]
    base = {
        "preset": preset(scenario["preset"]),
        "settings": scenario["settings"],
        "user": {"name": USER, "persona": PERSONA if scenario["persona"] else ""},
        "lore": LORE if scenario["lore"] else {},
        "characters": characters,
    }
    played: list[dict[str, Any]] = []
    step = 0

    def group() -> dict[str, Any]:
        gid = f"g{index}-{step}"
        return {
            "id": gid,
            "name": "Party",
            "avatar_url": "",
            "members": avatars,
            "disabled_members": [avatars[i] for i in scenario["muted"]],
            "activation_strategy": 0,
            "generation_mode": MODES[scenario["mode"]],
            "generation_mode_join_prefix": scenario["prefix"],
            "generation_mode_join_suffix": scenario["suffix"],
            "allow_self_responses": False,
            "chat_id": gid,
            "chats": [gid],
        }

    last = 0
    for step, (kind, text, who) in enumerate(SCRIPT):
        if text is not None:
            played.append({"name": USER, "is_user": True, "mes": text, "extra": {}})
        last = speaker_index(scenario, who)
        yield {
            **base,
            "id": f"{scenario['id']}#{kind}",
            "group": group(),
            "played": [dict(m) for m in played],
            "speaker": avatars[last],
            "type": "normal",
        }
        played.append(
            {
                "name": cards[last]["name"],
                "is_user": False,
                "mes": REPLIES[step],
                "original_avatar": avatars[last],
                "extra": {},
            }
        )
    for kind in PREVIEWS:
        step += 1
        yield {
            **base,
            "id": f"{scenario['id']}#{kind}",
            "group": group(),
            "played": [dict(m) for m in played],
            "speaker": avatars[last],
            "type": kind,
        }


def run(root: Path, batch: list[dict[str, Any]]) -> dict[str, Any]:
    """What group_assembly_driver.mjs prints for ``batch`` (SillyTavern's group code running)."""
    return run_driver(root, batch, hooks="./group_register.mjs", driver="group_assembly_driver.mjs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--st-repo", type=Path, help="a SillyTavern git repository")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    root = checkout(args.st_repo)
    every = list(scenarios())
    batch = [case for i, s in enumerate(every) for case in cases(s, i)]
    expected = run(root, batch)
    failed = {k: v["error"] for k, v in expected.items() if isinstance(v, dict)}
    if failed:
        raise SystemExit(f"SillyTavern failed on {len(failed)} cases: {next(iter(failed.items()))}")
    doc = {
        "sillyTavernCommit": ST_COMMIT,
        "generator": "tools/st_harness/generate_group_requests.py",
        "presets": PRESETS,
        "rollValue": ROLL_VALUE,
        "user": USER,
        "persona": PERSONA,
        "inputs": list(INPUTS),
        "replies": list(REPLIES),
        "lore": LORE,
        "script": [list(s) for s in SCRIPT],
        "scenarios": [
            {
                **s,
                "cases": {kind: [wire(m) for m in expected[f"{s['id']}#{kind}"]] for kind in KINDS},
            }
            for s in every
        ],
    }
    args.out.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{args.out.relative_to(REPO)}: {len(batch)} cases from SillyTavern {ST_COMMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
