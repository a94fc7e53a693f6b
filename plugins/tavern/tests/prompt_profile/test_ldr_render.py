"""The compatibility renderer: markers, fallbacks, honest degradation, ST order, the budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from innkeeper_tavern.features.prompt_render import (
    CharacterFields,
    LoreEntry,
    RenderRequest,
    UserFields,
    render,
    render_profile,
)
from innkeeper_tavern.pure.formats.macros import MacroEnv
from innkeeper_tavern.pure.formats.preset import Preset, parse_preset, parse_preset_json

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
LUCID_LOOM = CORPUS / "prolix-oc-st-presets" / "presets" / "Lucid Loom v2.8.json"


def preset(prompts: list[dict[str, Any]], order: list[str | tuple[str, bool]]) -> Preset:
    items = [
        {"identifier": o, "enabled": True}
        if isinstance(o, str)
        else {"identifier": o[0], "enabled": o[1]}
        for o in order
    ]
    return parse_preset(
        {"prompts": prompts, "prompt_order": [{"character_id": 100001, "order": items}]}
    )


def p(identifier: str, content: str = "", **extra: Any) -> dict[str, Any]:
    return {"identifier": identifier, "name": identifier, "content": content, **extra}


def m(identifier: str) -> dict[str, Any]:
    return {"identifier": identifier, "name": identifier, "marker": True}


MARKERS = [
    "worldInfoBefore",
    "personaDescription",
    "charDescription",
    "charPersonality",
    "scenario",
    "worldInfoAfter",
    "dialogueExamples",
    "chatHistory",
]
ST_ORDER = [
    "main",
    "worldInfoBefore",
    "personaDescription",
    "charDescription",
    "charPersonality",
    "scenario",
    "nsfw",
    "worldInfoAfter",
    "dialogueExamples",
    "chatHistory",
    "jailbreak",
]

LYRA = CharacterFields(
    id="c1",
    name="Lyra",
    description="{{char}} is a bard.",
    personality="cheerful",
    scenario="A tavern.",
    message_example="<START>\n{{user}}: hi\n{{char}}: hello",
    system_prompt="Card main. {{original}}",
    post_history_instructions="Card PHI.",
    greeting="Welcome, {{user}}!",
)
ADA = UserFields(id="u1", name="Ada", description="{{user}} is a ranger.")
ENV = MacroEnv(
    char="Lyra",
    user="Ada",
    persona=ADA.description,
    description=LYRA.description,
    personality="cheerful",
    scenario="A tavern.",
)


def full_preset(**main: Any) -> Preset:
    return preset(
        [
            p("main", "Preset main.", **main),
            p("nsfw", "Aux."),
            p("jailbreak", "Preset PHI."),
            *[m(x) for x in MARKERS],
        ],
        ST_ORDER,
    )


def texts(req: RenderRequest) -> list[str]:
    return [part.text for part in render(req).parts]


def codes(req: RenderRequest) -> list[str]:
    return [d.code for d in render(req).diagnostics]


def test_preset_only_path_emits_bodies_in_order_without_wrappers() -> None:
    pr = preset(
        [
            p("main", "Main {{char}}."),
            p("a", "Alpha"),
            p("b", ""),
            p("c", "Gamma", role="user"),
            p("off", "never"),
            *[m(x) for x in MARKERS],
        ],
        [
            "main",
            "a",
            "b",
            "worldInfoBefore",
            "charDescription",
            ("off", False),
            "chatHistory",
            "c",
        ],
    )
    out = render(RenderRequest(preset=pr, env=MacroEnv(char="Nobody")))
    assert out.path == "preset-only"
    assert out.text == "Main Nobody.\n\nAlpha\n\nGamma"
    assert [x.identifier for x in out.parts] == ["main", "a", "c"]
    assert out.parts[2].role == "user"  # kept as metadata only
    assert "TAVERN_PROFILE_ROLE_APPROXIMATE" in [d.code for d in out.diagnostics]


def test_markers_fill_in_st_order_each_field_once() -> None:
    lore = (
        LoreEntry(lore_id="b1", content="Before lore.", position="before", rank=0),
        LoreEntry(lore_id="a1", content="After lore.", position="after", rank=1),
    )
    req = RenderRequest(
        preset=full_preset(), character=LYRA, user=ADA, lore=lore, include_greeting=True, env=ENV
    )
    out = render(req)
    assert [x.identifier for x in out.parts] == [
        "main",
        "worldInfoBefore",
        "personaDescription",
        "charDescription",
        "charPersonality",
        "scenario",
        "nsfw",
        "worldInfoAfter",
        "dialogueExamples",
        "greeting",
        "jailbreak",
    ]
    assert out.parts[0].text == "Card main. Preset main."  # {{original}} = the preset's main
    assert out.parts[2].text == "Ada is a ranger."
    assert out.parts[3].text == "Lyra is a bard."
    assert out.parts[8].text == "<START>\nAda: hi\nLyra: hello"
    assert out.parts[9].text == "Welcome, Ada!"
    assert out.parts[10].text == "Card PHI."
    assert out.lore_ids == ("b1", "a1")
    found = [d.code for d in out.diagnostics]
    assert "CHARACTER_PHI_APPROXIMATE" in found and "CHARACTER_GREETING_REFERENCE" in found
    assert out.user_injection["descriptionPlacement"] == "preset-marker:personaDescription"


def test_duplicate_markers_emit_once_and_creator_notes_never() -> None:
    pr = preset(
        [p("main", "M"), *[m(x) for x in MARKERS]],
        [
            "main",
            "charDescription",
            "charDescription",
            "personaDescription",
            "personaDescription",
            "chatHistory",
        ],
    )
    out = render(RenderRequest(preset=pr, character=LYRA, user=ADA, env=ENV))
    assert [x.text for x in out.parts].count("Lyra is a bard.") == 1
    assert [x.text for x in out.parts].count("Ada is a ranger.") == 1


def test_missing_markers_fall_back_in_st_default_order_before_the_chat() -> None:
    pr = preset(
        [p("main", "M"), p("jailbreak", "J"), m("chatHistory")],
        ["main", "chatHistory", "jailbreak"],
    )
    lore = (
        LoreEntry(lore_id="b", content="B", position="before"),
        LoreEntry(lore_id="a", content="A", position="after", rank=1),
    )
    out = render(
        RenderRequest(
            preset=pr,
            character=LYRA,
            user=ADA,
            lore=lore,
            env=ENV,
            prefer_system_prompt=False,
            prefer_post_history=False,
        )
    )
    assert [x.identifier for x in out.parts] == [
        "main",
        "worldInfoBefore",
        "personaDescription",
        "charDescription",
        "charPersonality",
        "scenario",
        "worldInfoAfter",
        "dialogueExamples",
        "jailbreak",
    ]
    assert all(x.kind == "fallback" for x in out.parts[1:8])
    assert out.parts[0].text == "M" and out.parts[-1].text == "J"  # switches off: suppressed
    found = [d.code for d in out.diagnostics]
    assert found.count("CHARACTER_FIELD_MARKER_FALLBACK") == 4
    assert found.count("TAVERN_LORE_MARKER_FALLBACK") == 2
    assert "USER_PERSONA_MARKER_FALLBACK" in found
    assert "Card main." not in out.text and "Card PHI." not in out.text


def test_forbid_overrides_and_a_disabled_phi_slot_keep_the_card_prompt_out() -> None:
    out = render(RenderRequest(preset=full_preset(forbid_overrides=True), character=LYRA, env=ENV))
    assert out.parts[0].text == "Preset main."
    assert "Card main." not in out.text
    assert "CHARACTER_SYSTEM_OVERRIDE_FORBIDDEN" in [d.code for d in out.diagnostics]
    pr = preset(
        [p("main", "M"), p("jailbreak", "J"), *[m(x) for x in MARKERS]],
        [("main", False), *MARKERS, ("jailbreak", False)],
    )
    out = render(RenderRequest(preset=pr, character=LYRA, env=ENV))
    # SillyTavern keeps a disabled main prompt in place with no text, so the card's system
    # prompt still takes its slot; a disabled post-history prompt leaves the card's PHI out.
    assert out.parts[0].identifier == "main" and out.parts[0].text == "Card main."
    assert "M" not in [x.text for x in out.parts] and "Card PHI." not in out.text
    found = [d.code for d in out.diagnostics]
    assert "CHARACTER_SYSTEM_PROMPT_UNUSED" not in found and "CHARACTER_PHI_UNUSED" in found


def test_persona_macro_is_an_explicit_placement() -> None:
    pr = preset(
        [p("main", "About you: {{persona}}"), *[m(x) for x in MARKERS]],
        ["main", "personaDescription", "chatHistory"],
    )
    out = render(RenderRequest(preset=pr, user=ADA, env=ENV))
    assert out.text == "About you: Ada is a ranger."
    assert out.user_injection["descriptionPlacement"] == "preset-macro:main"


def test_greeting_only_on_the_first_generation() -> None:
    req = RenderRequest(preset=full_preset(), character=LYRA, env=ENV, include_greeting=False)
    assert "Welcome" not in render(req).text
    assert "CHARACTER_GREETING_REFERENCE" not in codes(req)


def test_in_chat_prompts_and_extension_prompts_follow_st_chronology() -> None:
    pr = preset(
        [
            p("main", "M"),
            m("chatHistory"),
            p("jailbreak", "J"),
            p("d0s", "d0 system", injection_position=1, injection_depth=0, role="system"),
            p("d0u", "d0 user", injection_position=1, injection_depth=0, role="user"),
            p("d0a", "d0 assistant", injection_position=1, injection_depth=0, role="assistant"),
            p(
                "d0s50",
                "d0 system order 50",
                injection_position=1,
                injection_depth=0,
                injection_order=50,
            ),
            p("d2u", "d2 user", injection_position=1, injection_depth=2, role="user"),
            p("d2u2", "d2 user again", injection_position=1, injection_depth=2, role="user"),
            p("d4s", "d4 system", injection_position=1, injection_depth=4),
        ],
        ["main", "d0s", "d0u", "d0a", "d0s50", "d2u", "d2u2", "d4s", "chatHistory", "jailbreak"],
    )
    card = CharacterFields(id="c", name="Lyra", depth_prompt="Depth note.", depth_prompt_depth=4)
    lore = (
        LoreEntry(lore_id="w", content="WI at 4", position="at_depth", depth=4, role="system"),
        LoreEntry(lore_id="n", content="AN lore", position="an_top", rank=1),
    )
    out = render(RenderRequest(preset=pr, character=card, lore=lore, env=ENV))
    assert [(x.identifier, x.text) for x in out.parts] == [
        ("main", "M"),
        ("in-chat:d4:o100:system", "d4 system\nAN lore\nDepth note.\nWI at 4"),
        ("in-chat:d2:o100:user", "d2 user\nd2 user again"),
        ("in-chat:d0:o50:system", "d0 system order 50"),
        ("in-chat:d0:o100:assistant", "d0 assistant"),
        ("in-chat:d0:o100:user", "d0 user"),
        ("in-chat:d0:o100:system", "d0 system"),
        ("jailbreak", "J"),
    ]
    found = [d.code for d in out.diagnostics]
    for code in (
        "TAVERN_PROFILE_DEPTH_APPROXIMATE",
        "CHARACTER_DEPTH_APPROXIMATE",
        "TAVERN_LORE_AUTHORS_NOTE_APPROXIMATE",
    ):
        assert code in found


def test_a_300_prompt_preset_with_in_chat_prompts_assembles_in_st_order() -> None:
    raw = json.loads(LUCID_LOOM.read_text(encoding="utf-8"))
    live = next(o for o in raw["prompt_order"] if str(o["character_id"]) == "100001")
    # Grow the real 253-prompt preset past 300 with in-chat prompts at several depths/roles.
    roles = ("system", "user", "assistant")
    for i in range(60):
        identifier = f"extra-{i}"
        raw["prompts"].append(
            {
                "identifier": identifier,
                "name": identifier,
                "content": f"X{i}",
                "role": roles[i % 3],
                "injection_position": 1,
                "injection_depth": i % 4,
                "injection_order": 100 if i % 5 else 90,
            }
        )
        live["order"].append({"identifier": identifier, "enabled": True})
    pr = parse_preset_json(json.dumps(raw))
    assert len(pr.prompts) >= 300
    out = render(RenderRequest(preset=pr, env=MacroEnv(char="C", user="U")))
    # Relative prompts keep the live order; the in-chat groups sit at chatHistory in ST's order.
    relative = [x for x in out.parts if x.kind == "prompt"]
    enabled = [q.identifier for q in pr.prompts if q.enabled and not q.marker]
    positions = [enabled.index(x.identifier) for x in relative]
    assert positions == sorted(positions)
    in_chat = [x for x in out.parts if x.kind == "in-chat"]
    keys = []
    for part in in_chat:
        _, depth, order, role = part.identifier.split(":")
        keys.append(
            (-int(depth[1:]), int(order[1:]), {"assistant": 0, "user": 1, "system": 2}[role])
        )
    assert keys == sorted(keys) and len(keys) > 8
    ours = [x for x in in_chat if any(s.startswith("preset:extra-") for s in x.sources)]
    assert {x.identifier.split(":")[1] for x in ours} == {"d0", "d1", "d2", "d3"}
    live_enabled = [q.identifier for q in pr.prompts if q.enabled]
    history = live_enabled.index("chatHistory")
    first, last = out.parts.index(in_chat[0]), out.parts.index(in_chat[-1])
    assert all(
        live_enabled.index(x.identifier) < history for x in out.parts[:first] if x.kind == "prompt"
    )
    assert all(
        live_enabled.index(x.identifier) > history
        for x in out.parts[last + 1 :]
        if x.kind == "prompt"
    )
    assert out.parts[first : last + 1] == tuple(in_chat)
    assert "TAVERN_PROFILE_DEPTH_APPROXIMATE" in [d.code for d in out.diagnostics]


def test_setvar_flows_across_prompts_in_order() -> None:
    pr = preset([p("a", "{{setvar::mood::calm}}A"), p("b", "mood={{getvar::mood}}")], ["a", "b"])
    assert render(RenderRequest(preset=pr)).text == "A\n\nmood=calm"


def test_outlet_macro_pulls_outlet_lore() -> None:
    pr = preset([p("a", "Notes: {{outlet::Side}}")], ["a"])
    lore = (LoreEntry(lore_id="o", content="side lore", position="outlet", outlet="Side"),)
    out = render(RenderRequest(preset=pr, lore=lore))
    assert out.text == "Notes: side lore" and out.lore_ids == ("o",)


def _budget_request(count: int) -> RenderRequest:
    pr = preset([p("main", "M" * 100), m("worldInfoBefore")], ["main", "worldInfoBefore"])
    lore = tuple(
        LoreEntry(
            lore_id=f"e{i}",
            content=f"{i:03d}" + "x" * 97,
            position="before",
            rank=i,
            slot=count - i,
        )
        for i in range(count)
    )
    return RenderRequest(preset=pr, lore=lore)


def test_lore_is_trimmed_by_rank_to_fit_the_budget() -> None:
    req = _budget_request(10)
    full = render(req)
    assert full.bytes == 100 + 2 + 10 * 100 + 9
    outcome = render_profile(req, 100 + 2 + 4 * 101)
    assert outcome.rendered is not None and not outcome.too_large
    assert outcome.retained_lore == 4 and outcome.omitted_lore == 6
    kept = outcome.rendered.lore_ids
    assert set(kept) == {"e0", "e1", "e2", "e3"}  # the best-ranked prefix ...
    assert kept == ("e3", "e2", "e1", "e0")  # ... placed in bucket order
    limited = [d for d in outcome.diagnostics if d.code == "TAVERN_PROFILE_LORE_LIMITED"]
    assert limited[0].details["retainedLoreEntries"] == 4
    assert outcome.rendered.bytes <= outcome.max_bytes


def test_nothing_fits_reports_too_large_without_a_profile() -> None:
    outcome = render_profile(_budget_request(3), 50)
    assert outcome.rendered is None and outcome.too_large
    assert [d.code for d in outcome.diagnostics] == ["TAVERN_PROFILE_TOO_LARGE"]
    assert outcome.diagnostics[0].details == {"actualBytes": 100, "maxBytes": 50}


def test_everything_fits_untouched() -> None:
    outcome = render_profile(_budget_request(3), 10_000)
    assert outcome.rendered is not None and outcome.omitted_lore == 0
    assert not [d for d in outcome.diagnostics if d.code.startswith("TAVERN_PROFILE_LORE")]


def test_field_macros_place_fields_once_like_community_presets() -> None:
    # Lucid Loom style: the markers are disabled and the fields are written as macros.
    pr = preset(
        [
            p("form", "Form: {{description}}"),
            p("mind", "Mind: {{personality}}"),
            *[m(x) for x in MARKERS],
        ],
        [
            "form",
            "mind",
            ("charDescription", False),
            ("charPersonality", False),
            "scenario",
            "chatHistory",
        ],
    )
    out = render(RenderRequest(preset=pr, character=LYRA, env=ENV))
    assert [x.text for x in out.parts] == [
        "Form: Lyra is a bard.",
        "Mind: cheerful",
        "A tavern.",
        "<START>\nAda: hi\nLyra: hello",
    ]
    assert [
        d.details.get("marker")
        for d in out.diagnostics
        if d.code == "CHARACTER_FIELD_MARKER_FALLBACK"
    ] == ["dialogueExamples"]


def test_preset_formats_wrap_lore_and_fields() -> None:
    raw = {
        "prompts": [m("worldInfoBefore"), m("scenario"), m("charPersonality")],
        "prompt_order": [
            {
                "character_id": 100001,
                "order": [
                    {"identifier": i, "enabled": True}
                    for i in ("worldInfoBefore", "scenario", "charPersonality")
                ],
            }
        ],
        "wi_format": "[Lore:\n{0}]",
        "scenario_format": "[Scene: {{scenario}}]",
        "personality_format": "[{{char}}'s personality: {{personality}}]",
    }
    lore = (LoreEntry(lore_id="a", content="One.", slot=1), LoreEntry(lore_id="b", content="Two."))
    out = render(RenderRequest(preset=parse_preset(raw), character=LYRA, lore=lore, env=ENV))
    assert [x.text for x in out.parts[:3]] == [
        "[Lore:\nTwo.\nOne.]",
        "[Scene: A tavern.]",
        "[Lyra's personality: cheerful]",
    ]


def test_persona_description_at_depth_or_nowhere_is_not_placed_by_a_marker() -> None:
    at_depth = UserFields(
        id="u1",
        name="Ada",
        description="{{user}} is a ranger.",
        description_position="atDepth",
        description_depth=2,
        description_role="user",
    )
    out = render(RenderRequest(preset=full_preset(), character=LYRA, user=at_depth, env=ENV))
    parts = [(x.identifier, x.text) for x in out.parts]
    assert ("in-chat:d2:o100:user", "Ada is a ranger.") in parts
    assert sum("Ada is a ranger." in text for _, text in parts) == 1
    assert out.user_injection["descriptionPlacement"] == "at-depth"
    nowhere = UserFields(id="u1", name="Ada", description="Hidden.", description_position="none")
    out = render(RenderRequest(preset=full_preset(), character=LYRA, user=nowhere, env=ENV))
    assert "Hidden." not in out.text
    assert all("Hidden." not in part.text for part in out.parts)
    assert "USER_PERSONA_MARKER_FALLBACK" not in [d.code for d in out.diagnostics]
    # In the prompt (the default) it goes where the persona marker is, as before.
    out = render(RenderRequest(preset=full_preset(), character=LYRA, user=ADA, env=ENV))
    assert out.user_injection["descriptionPlacement"] == "preset-marker:personaDescription"
