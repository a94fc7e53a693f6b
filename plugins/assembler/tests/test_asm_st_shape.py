"""SillyTavern's Chat Completion shape, spelled out (issue 29): squashed system messages, the
example dialogue blocks under each ``names_behavior``, continue and impersonate requests.

The same behaviours are checked message for message against SillyTavern's own output by
``test_asm_st_parity.py``; here the expected arrays are written out, for the synthetic card and
the Default preset (``st_parity`` plays the session).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from innkeeper_hostapi.testing import RunningHost

from .st_parity import Outcome, Player, load

MAIN = "Write Ada's next reply in a fictional chat between Ada and Mira."
CARD: dict[str, Any] = {
    "name": "Ada",
    "description": "Ada is a herbalist.",
    "personality": "patient",
    "scenario": "A glade.",
    "first_mes": "Welcome, {{user}}.",
    "mes_example": "",
    "system_prompt": "",
    "post_history_instructions": "",
    "depth_prompt": None,
}
BLOCKS = (
    "<START>\n{{user}}: Where does this road go?\n{{char}}: To the sea.\n{{user}}: And then?",
    "<START>\n{{char}}: Quiet now.",
    "<START>\n{{user}}: Tea?\n{{char}}: Always.\n{{char}}: Two sugars.",
)
#: The example messages each block becomes: (name, text); consecutive lines of one speaker are
#: one message with the later ``Name:`` kept.
TURNS = (
    [
        ("example_user", "Where does this road go?"),
        ("example_assistant", "To the sea."),
        ("example_user", "And then?"),
    ],
    [("example_assistant", "Quiet now.")],
    [("example_user", "Tea?"), ("example_assistant", "Always.\nAda: Two sugars.")],
)


async def play(
    host: RunningHost, card: dict[str, Any], settings: dict[str, Any], *kinds: str
) -> Outcome:
    await host.load("assembler", "innkeeper_assembler.plugin")
    await host.load("tavern", "innkeeper_tavern.plugin")
    doc = copy.deepcopy(load("default"))
    player = Player(host, doc)
    await player.setup()
    scenario = {
        "id": "shape",
        "preset": "default",
        "card": card,
        "persona": False,
        "lore": False,
        "settings": settings,
        "cases": {kind: [] for kind in kinds or ("turn1",)},
    }
    return await player.play(scenario)


def sent(outcome: Outcome, kind: str = "turn1") -> list[tuple[str, str, str | None]]:
    return [(r, " ".join(t.split()), n) for r, t, n in outcome.texts[kind]]


@pytest.mark.parametrize("squash", [False, True])
async def test_squash_system_messages_on_and_off(innkeeper_host: RunningHost, squash: bool) -> None:
    card = {**CARD, "mes_example": BLOCKS[1]}
    out = sent(await play(innkeeper_host, card, {"squash_system_messages": squash}))
    head = [
        ("system", MAIN, None),
        ("system", "Ada is a herbalist.", None),
        ("system", "[Ada's personality: patient]", None),
        ("system", "[Circumstances and context of the dialogue: A glade.]", None),
    ]
    if squash:  # one message, joined by a newline (normalized here to a space)
        head = [("system", " ".join(t for _, t, _ in head), None)]
    assert out == [
        *head,
        # The example heading, the named examples and the new-chat prompt are never merged.
        ("system", "[Example Chat]", None),
        ("system", "Quiet now.", "example_assistant"),
        ("system", "[Start a new Chat]", None),
        ("assistant", "Welcome, Mira.", None),
        ("user", "Hello there.", None),
    ]


@pytest.mark.parametrize("blocks", [0, 1, 3])
@pytest.mark.parametrize("names", [-1, 0, 1, 2])
async def test_example_dialogue_blocks_under_each_names_behavior(
    innkeeper_host: RunningHost, blocks: int, names: int
) -> None:
    card = {**CARD, "mes_example": "\n".join(BLOCKS[:blocks])}
    out = sent(await play(innkeeper_host, card, {"names_behavior": names}))
    examples: list[tuple[str, str, str | None]] = []
    for turns in TURNS[:blocks]:
        examples.append(("system", "[Example Chat]", None))
        examples.extend(("system", " ".join(text.split()), name) for name, text in turns)
    start = out.index(("system", "[Start a new Chat]", None))
    assert out[4:start] == examples  # after main, description, personality, scenario
    greeting, user = "Welcome, Mira.", "Hello there."
    if names == 1:  # in `name` (letters, digits, _)
        chat = [("assistant", greeting, "Ada"), ("user", user, "Mira")]
    elif names == 2:  # in the content
        chat = [("assistant", f"Ada: {greeting}", None), ("user", f"Mira: {user}", None)]
    else:  # none / default: a one-to-one chat names nobody
        chat = [("assistant", greeting, None), ("user", user, None)]
    assert out[start + 1 :] == chat


NUDGE = (
    "[Continue the following message. Do not include ANY parts of the original message. Use "
    "capitalization and punctuation as if your reply is a part of the original message: "
    "She looks up. *Welcome back.*]"
)


@pytest.mark.parametrize("postfix", ["", " ", "\n"])
async def test_continue_nudges_after_the_chat(innkeeper_host: RunningHost, postfix: str) -> None:
    card = {**CARD, "post_history_instructions": "Stay brief."}
    settings = {"continue_postfix": postfix}
    out = sent(await play(innkeeper_host, card, settings, "continue"), "continue")
    # The message continued stays in place; the nudge quotes it (trimmed: the postfix only
    # matters to a text completion); post-history instructions stay last.
    assert out[-5:] == [
        ("assistant", "Welcome, Mira.", None),
        ("user", "Hello there.", None),
        ("assistant", "She looks up. *Welcome back.*", None),
        ("system", NUDGE, None),
        ("system", "Stay brief.", None),
    ]


async def test_continue_prefill_sends_the_message_last(innkeeper_host: RunningHost) -> None:
    card = {**CARD, "post_history_instructions": "Stay brief."}
    out = sent(await play(innkeeper_host, card, {"continue_prefill": True}, "continue"), "continue")
    assert out[-4:] == [
        ("assistant", "Welcome, Mira.", None),
        ("user", "Hello there.", None),
        ("system", "Stay brief.", None),
        ("assistant", "She looks up. *Welcome back.*", None),  # no nudge: the model extends it
    ]
    assert not any(NUDGE[:20] in t for _, t, _ in out)


async def test_impersonate_asks_for_the_users_reply_last(innkeeper_host: RunningHost) -> None:
    settings = {"impersonation_prompt": "[Write {{user}}'s next message.]"}
    out = sent(await play(innkeeper_host, CARD, settings, "impersonate"), "impersonate")
    assert out[-3:] == [
        ("user", "Hello there.", None),
        ("assistant", "She looks up. *Welcome back.*", None),
        ("system", "[Write Mira's next message.]", None),
    ]


async def test_a_normal_turn_has_neither_nudge_nor_impersonation(
    innkeeper_host: RunningHost,
) -> None:
    out = sent(await play(innkeeper_host, CARD, {}))
    assert out[-1] == ("user", "Hello there.", None)
    assert not any("Continue the following" in t or "point of view" in t for _, t, _ in out)
