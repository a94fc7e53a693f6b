"""The default RP strategy trims the chat to the preset's context budget (SillyTavern's rule).

SillyTavern (``public/scripts/openai.js`` ``populateChatHistory``) fills ``openai_max_context``
minus ``openai_max_tokens`` with the prompt-order sections first, then with the newest chat
messages, whole, until one does not fit; the greeting is the oldest chat message. The trim is
request-only: the durable history keeps every message.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .test_ldr_default_strategy import ST, both, bound_session, nudged_preset, sent

__all__ = ["both"]

HEAD = [
    ("system", "Write Ada's next reply in a fictional chat between Ada and Mira."),
    ("system", "A wanderer."),
    ("system", "A herbalist of the Mira's village."),
    ("system", "[Ada's personality: kind]"),
    ("system", "[Circumstances and context of the dialogue: A forest glade.]"),
    ("system", "[Start a new Chat]"),
]
NUDGE = ("user", "(Stay in character, Ada.)")
JAILBREAK = ("system", "Reply in two sentences.")


def tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 3.5))


def line(tag: str) -> str:
    return (tag + " " + "x" * 350)[:350]  # 100 estimated tokens


async def story(tavern: Any, max_context: int, turns: int) -> tuple[str, list[tuple[str, str]]]:
    raw = nudged_preset()
    raw["openai_max_context"], raw["openai_max_tokens"] = max_context, 300
    preset = (
        await tavern.v1("POST", "/import", {"content": json.dumps(raw), "name": "Small"}, 201)
    )["preset"]["id"]
    session = await bound_session(tavern, ST / "presets_openai_Default.json")
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    chat: list[tuple[str, str]] = [("assistant", "Welcome, Mira.")]
    for turn in range(turns):
        tavern.provider.enqueue(line(f"reply {turn}"))
        await tavern.prompt(session, line(f"user {turn}"))
        chat += [("user", line(f"user {turn}")), ("assistant", line(f"reply {turn}"))]
    return session, chat[:-1]  # the last reply is not part of the last request


async def test_a_long_chat_sends_only_the_newest_messages_that_fit(both: Any) -> None:
    tavern = both
    session, chat = await story(tavern, max_context=300 + 400, turns=5)
    messages = sent(tavern)
    # The system sections are intact, then the newest chat messages that fit, in order, the
    # in-chat nudge still before the last message and the post-history prompt last.
    kept = chat[-3:]
    assert messages == [*HEAD, *kept[:-1], NUDGE, kept[-1], JAILBREAK]
    used = 3 + sum(tokens(text) for _, text in messages)
    assert used <= 400 < used + tokens(chat[-4][1])  # the next older one would not fit
    events = await tavern.events(session)
    trims = [e["data"] for e in events if e["data"].get("name") == "dsh-assembler:history-trim"]
    assert trims and trims[-1]["payload"]["droppedMessages"] == len(chat) - 3
    assert trims[-1]["payload"]["historyTokens"] == 400
    # Request-only: the durable history keeps every message.
    durable = [
        e["data"] for e in events if e["data"]["type"] in ("user/message", "assistant/message")
    ]
    assert len(durable) >= 10


async def test_a_context_large_enough_sends_the_whole_chat(both: Any) -> None:
    tavern = both
    session, chat = await story(tavern, max_context=300 + 100_000, turns=5)
    assert sent(tavern) == [*HEAD, *chat[:-1], NUDGE, chat[-1], JAILBREAK]
    events = await tavern.events(session)
    assert not [e for e in events if e["data"].get("name") == "dsh-assembler:history-trim"]
