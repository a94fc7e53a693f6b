"""The default RP strategy sends what SillyTavern would send (issue 10, item 3).

The expected arrays follow SillyTavern's prompt manager (``public/scripts/openai.js``
``populateChatCompletion``; ``docs/prompt-assembly.md#st-message-order``): each enabled relative
prompt of ``prompt_order`` is one message with its role, empty ones are dropped,
``personality_format`` / ``scenario_format`` wrap the card fields, ``new_chat_prompt`` is a system
message before the oldest chat message, the greeting is the chat's first (assistant) message in
every request, in-chat prompts sit at their depth and role, and ``squash_system_messages`` is off.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.features.prompt_profile.rp_policy import DEFAULT_RP_POLICY

ST = (
    Path(__file__).resolve().parents[5]
    / "shared/sillytavern-corpus/sillytavern-repo/staging-1ac6780"
)
CARD = {
    "name": "Ada",
    "description": "A herbalist of the {{user}}'s village.",
    "personality": "kind",
    "scenario": "A forest glade.",
    "firstMessage": "Welcome, {{user}}.",
}


@pytest_asyncio.fixture
async def both(innkeeper_host: RunningHost, tavern_for: Any) -> AsyncIterator[Any]:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    tavern = tavern_for(innkeeper_host)
    # The arrays below are SillyTavern's; the RP overlay a bound card enters by default is
    # tested on its own (test_a_bound_card_enters_rp_and_its_policy_is_sent_first).
    await tavern.rp_follow(False)
    yield tavern


async def bound_session(tavern: Any, preset_path: Path) -> str:
    preset = await tavern.import_preset(preset_path)
    card = (await tavern.v1("POST", "/characters", CARD, 201))["character"]["id"]
    user = (await tavern.v1("POST", "/users", {"name": "Mira", "description": "A wanderer."}, 201))[
        "user"
    ]["id"]
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": user})
    return session


def nudged_preset() -> dict[str, Any]:
    """The Default preset with a user nudge in-chat at depth 1 and a post-history prompt."""
    raw: dict[str, Any] = json.loads((ST / "presets_openai_Default.json").read_text())
    raw["prompts"].append(
        {
            "identifier": "nudge",
            "name": "Nudge",
            "role": "user",
            "content": "(Stay in character, {{char}}.)",
            "injection_position": 1,
            "injection_depth": 1,
            "enabled": True,
        }
    )
    for prompt in raw["prompts"]:
        if prompt["identifier"] == "jailbreak":
            prompt["content"] = "Reply in two sentences."
    order = next(o for o in raw["prompt_order"] if o["character_id"] == 100001)["order"]
    order.append({"identifier": "nudge", "enabled": True})
    return raw


def sent(tavern: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in tavern.provider.requests[-1].messages]


async def test_the_default_preset_is_sent_as_sillytavern_would(both: Any) -> None:
    tavern = both
    session = await bound_session(tavern, ST / "presets_openai_Default.json")
    head = [
        ("system", "Write Ada's next reply in a fictional chat between Ada and Mira."),
        ("system", "A wanderer."),  # personaDescription (persona position "in prompt")
        ("system", "A herbalist of the Mira's village."),  # charDescription
        ("system", "[Ada's personality: kind]"),
        ("system", "[Circumstances and context of the dialogue: A forest glade.]"),
        # nsfw, worldInfo*, dialogueExamples and jailbreak are empty: no message
        ("system", "[Start a new Chat]"),
        ("assistant", "Welcome, Mira."),  # the greeting, first message of the chat
    ]
    tavern.provider.enqueue("The glade is quiet.")
    await tavern.prompt(session, "Hi")
    assert sent(tavern) == [*head, ("user", "Hi")]

    tavern.provider.enqueue("She smiles.")
    await tavern.prompt(session, "Go on")
    # From turn 2 on the model still sees how the story began.
    assert sent(tavern) == [
        *head,
        ("user", "Hi"),
        ("assistant", "The glade is quiet."),
        ("user", "Go on"),
    ]
    # Request-only: the durable history holds only the chat itself, and the array is recorded.
    view = await tavern.call("GET", f"/host/api/sessions/{session}/messages")
    assert [(m["role"], m["text"]) for m in view["messages"] if m["role"] != "system"] == [
        ("user", "Hi"),
        ("assistant", "The glade is quiet."),
        ("user", "Go on"),
        ("assistant", "She smiles."),
    ]
    events = await tavern.events(session)
    assemblies = [e["data"] for e in events if e["data"]["type"] == "request/assembly"]
    assert len(assemblies) == 2 and assemblies[-1]["projector"] == "dsh-assembler"
    inline = [(a["role"], a["content"]) for a in assemblies[-1]["entries"] if a.get("ref") is None]
    assert inline == head


async def test_in_chat_prompts_and_post_history_land_at_their_depth_and_role(both: Any) -> None:
    tavern = both
    raw = nudged_preset()
    preset = (
        await tavern.v1("POST", "/import", {"content": json.dumps(raw), "name": "Nudged"}, 201)
    )["preset"]["id"]
    session = await bound_session(tavern, ST / "presets_openai_Default.json")
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.prompt(session, "Hi")
    messages = sent(tavern)
    tail = messages[messages.index(("assistant", "Welcome, Mira.")) :]
    assert tail == [
        ("assistant", "Welcome, Mira."),
        ("user", "(Stay in character, Ada.)"),  # in-chat at depth 1: before the last message
        ("user", "Hi"),
        ("system", "Reply in two sentences."),  # post-history instructions after the last user
    ]


async def test_a_bound_card_enters_rp_and_its_policy_is_sent_first(both: Any) -> None:
    tavern = both
    await tavern.rp_follow(True)  # the default
    session = await bound_session(tavern, ST / "presets_openai_Default.json")
    await tavern.prompt(session, "Hi")
    messages = sent(tavern)
    # Host sections of other plugins come before the strategy's messages (docs/assembler.md).
    assert messages[0] == ("system", DEFAULT_RP_POLICY)
    main = "Write Ada's next reply in a fictional chat between Ada and Mira."
    assert messages[1] == ("system", main)
    assert messages[-1] == ("user", "Hi")
    assert tavern.host.get(PROMPT_ASSEMBLER).applied(session).strategy.id == "tavern-rp"


async def test_new_sessions_get_the_strategy_and_forks_inherit_it(both: Any) -> None:
    tavern = both
    session = await bound_session(tavern, ST / "presets_openai_Default.json")
    await tavern.prompt(session, "Hi")
    assembler = tavern.host.get(PROMPT_ASSEMBLER)
    assert assembler.applied(session).strategy.id == "tavern-rp"
    child = await tavern.fork(session)
    await tavern.prompt(child, "Hello again")
    assert assembler.applied(child).strategy.id == "tavern-rp"

    # Opting out keeps the compatibility renderer: one system message, greeting not repeated.
    await tavern.call("DELETE", f"/dsh-assembler/api/v1/sessions/{session}/strategy")
    await tavern.prompt(session, "Plain")
    roles = [role for role, _ in sent(tavern)]
    assert roles[0] == "system" and roles.count("system") == 1
    assert assembler.applied(session) is None


async def test_the_greeting_is_scanned_on_the_first_turn(both: Any) -> None:
    tavern = both
    session = await bound_session(tavern, ST / "presets_openai_Default.json")
    book = await tavern.import_world_book_json(
        {
            "entries": {
                "0": {
                    "uid": 0,
                    "key": ["Welcome"],
                    "content": "The village welcomes travellers.",
                    "comment": "welcome lore",
                }
            }
        },
        "welcome.json",
    )
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    await tavern.prompt(session, "Hi")
    texts = [content for _, content in sent(tavern)]
    assert "The village welcomes travellers." in texts  # keyed on the greeting's "Welcome"


PROLIX = Path(__file__).resolve().parents[5] / "shared/sillytavern-corpus/prolix-oc-st-presets"


async def test_lucid_loom_in_chat_prompts_sit_at_their_depth_and_role(both: Any) -> None:
    """Every enabled in-chat prompt of Lucid Loom v2.8 without macros (15, depths 1-5) is sent
    in a message of its role with exactly ``depth`` chat messages after it, as SillyTavern's
    ``populationInjectionPrompts`` places it; the greeting stays the first chat message."""
    tavern = both
    path = PROLIX / "presets" / "Lucid Loom v2.8.json"
    session = await bound_session(tavern, path)
    chat = ["u1", "a1", "u2", "a2", "u3"]
    tavern.provider.enqueue("a1", "a2", "a3")
    for text in ("u1", "u2", "u3"):
        await tavern.prompt(session, text)
    raw = json.loads(path.read_text())
    order = next(o for o in raw["prompt_order"] if o["character_id"] == 100001)["order"]
    enabled = {o["identifier"] for o in order if o["enabled"]}
    in_chat = [
        p
        for p in raw["prompts"]
        if p["identifier"] in enabled
        and p.get("injection_position") == 1
        and p.get("content", "").strip()
        and "{{" not in p["content"]
    ]
    assert len(in_chat) == 15
    messages = tavern.provider.requests[-1].messages
    contents = [m.content for m in messages]
    assert contents.index("Welcome, Mira.") < contents.index("u1")
    for prompt in in_chat:
        [index] = [i for i, m in enumerate(messages) if prompt["content"].strip() in m.content]
        assert messages[index].role == prompt.get("role", "system"), prompt["identifier"]
        after = [c for c in contents[index + 1 :] if c in chat]
        assert len(after) == prompt.get("injection_depth", 4), prompt["identifier"]
