"""The compatibility renderer's parts are real named system-prompt sections (issue 15,
"Partials"; `docs/contract/loader.md#preset-only` and `docs/contract/loader.md#markers`).

Without an applied strategy, the Tavern profile reaches the system assembly as one section per
part, ``pmp-dsh-tavern:part:<identifier>`` in profile order: the host records their names and
byte spans in ``system/message.sections`` and the v3 assembly detail shows that durable record.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
STORYWEAVER = CORPUS / "prolix-oc-st-presets" / "presets" / "StoryWeaver v1.1.json"
V3 = "/pmp-dsh-tavern/api/v3"
PART = "pmp-dsh-tavern:part:"

#: StoryWeaver v1.1's enabled, non-empty prompts in its prompt order (preset-only path).
STORYWEAVER_PARTS = [
    "main",
    "c1d0fd00-7cdf-4b5f-b725-125ca80da5e5",
    "90ea9fb7-01b9-48b6-a013-c456002b334f",
    "8cef57b5-1cec-4228-b2f8-a3a4757c2289",
    "bbcb61e3-31f6-498b-b5d7-2ac0a4d540a3",
    "40797767-c382-467e-96f7-7c96261d8b45",
    "646e06df-636e-4f52-8bf3-1ac1a8d99a19",
    "3d46bfce-89dc-41e2-be08-fc6dad2443af",
    "2befeac3-bbc1-4497-a03a-ab8d22e7ac60",
    "fb486fd5-5a54-4c66-8753-7af81220571e",
    "6137b557-c303-46e4-b4d5-38483217fe0d",
    "b0527de9-1fed-4efe-95b1-8beef6a7ca7f",
    "47e0e9bb-8929-4b93-bb76-a0cb433a461b",
    "820f7d28-2922-4137-a05e-6c61e92be8b4",
    "730f0cf2-72a6-4382-9324-132a375c4568",
    "8378b66e-750e-4dd4-943c-e5b80b0f6d18",
    "c0843639-a591-42c0-ab2f-91ad72bec8ef",
]

LORE = {
    "entries": {
        "0": {"uid": 0, "key": ["x"], "content": "Lore before.", "constant": True, "position": 0},
        "1": {"uid": 1, "key": ["y"], "content": "Lore after.", "constant": True, "position": 1},
    }
}


async def system_message(tavern: Any, session: str) -> dict[str, Any]:
    events = await tavern.events(session)
    return next(e["data"] for e in reversed(events) if e["data"]["type"] == "system/message")


def texts(message: dict[str, Any]) -> dict[str, str]:
    """Each recorded section's text, sliced from the message at its span."""
    body = "".join(block["text"] for block in message["content"]).encode()
    return {s["name"]: body[s["start"] : s["end"]].decode() for s in message["sections"]}


async def test_a_preset_only_session_sends_one_section_per_enabled_prompt(tavern: Any) -> None:
    preset = await tavern.import_preset(STORYWEAVER)
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.prompt(session, "Hello")

    message = await system_message(tavern, session)
    assert [s["name"] for s in message["sections"]] == [PART + i for i in STORYWEAVER_PARTS]
    # The spans tile the message: parts joined by a blank line, nothing else in between.
    body = "".join(block["text"] for block in message["content"]).encode()
    spans = message["sections"]
    assert spans[0]["start"] == 0 and spans[-1]["end"] == len(body)
    assert all(b["start"] == a["end"] + 2 for a, b in itertools.pairwise(spans))
    # The sections are the audit's parts, byte for byte.
    parts = tavern.host.get(ASSEMBLY_AUDIT).latest(session)["composition"]["parts"]
    assert [p["name"] for p in parts] == [s["name"] for s in spans]
    assert [p["bytes"] for p in parts] == [s["end"] - s["start"] for s in spans]
    # No preset names, ids or wrappers in the text: a section's text is the prompt's body.
    assert not any(PART in text or "StoryWeaver" in text for text in texts(message).values())


async def test_markers_own_their_sections_and_the_v3_detail_shows_them(tavern: Any) -> None:
    preset = await tavern.import_preset(ST / "presets_openai_Default.json")
    card = await tavern.import_card(ST / "default_Seraphina.png")
    book = await tavern.import_world_book_json(LORE)
    user = (await tavern.v1("POST", "/users", {"name": "Mira", "description": "A wanderer."}, 201))[
        "user"
    ]["id"]
    session = await tavern.new_session()
    for path, binding in (
        ("/select", {"id": preset}),
        ("/character-selection", {"characterCardId": card}),
        ("/user-selection", {"userId": user}),
        ("/world-book-selection", {"worldBookIds": [book]}),
    ):
        await tavern.v1("POST", path, {"sessionId": session, **binding})
    await tavern.prompt(session, "Hello")

    message = await system_message(tavern, session)
    names = [s["name"] for s in message["sections"]]
    assert names == [
        PART + "main",
        PART + "worldInfoBefore",
        PART + "personaDescription",
        PART + "charDescription",
        PART + "worldInfoAfter",
        PART + "greeting",  # first round only, as plain system text (Honest degradation)
        "rp:policy",  # the card is followed into RP: another plugin section, after the profile
    ]
    sliced = texts(message)
    assert sliced[PART + "worldInfoBefore"] == "Lore before."
    assert sliced[PART + "worldInfoAfter"] == "Lore after."
    assert sliced[PART + "personaDescription"] == "A wanderer."
    assert sliced[PART + "charDescription"].startswith("[Seraphina's Personality=")
    # After the first reply the greeting is no longer a section.
    await tavern.prompt(session, "Again")
    later = [s["name"] for s in (await system_message(tavern, session))["sections"]]
    assert later == [n for n in names if n != PART + "greeting"]

    index = await tavern.call("GET", f"{V3}/sessions/{session}/assemblies")
    record_id = max(index["assemblies"], key=lambda a: a["turn"])["recordId"]
    detail = await tavern.call("GET", f"{V3}/sessions/{session}/assemblies/{record_id}")
    assert [s["name"] for s in detail["system"]["sections"]] == later
    assert [s["name"] for s in detail["sections"]] == later[:-1]  # the audit: the profile's
    assert all(s["status"] == "verified" for s in detail["sections"])


async def test_a_session_with_nothing_to_render_sends_no_part_sections(tavern: Any) -> None:
    """With nothing to render (no preset prompt, card or lore), no section is recorded."""
    session = await tavern.new_session()
    await tavern.prompt(session, "Hello")
    events = await tavern.events(session)
    messages = [e["data"] for e in events if e["data"]["type"] == "system/message"]
    assert all(not any(PART in s["name"] for s in m.get("sections", [])) for m in messages)
