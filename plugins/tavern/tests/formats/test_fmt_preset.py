"""Chat Completion presets: corpus import, live order, legacy migration, export overlay."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.preset import (
    DEFAULT_PROMPT_ORDER,
    Preset,
    PresetPrompt,
    blank_preset,
    edit_preset,
    export_preset,
    export_preset_json,
    parse_preset,
    parse_preset_json,
    preset_regex_scripts,
    validate_reasoning_effort,
    with_preset_regex_scripts,
)

CORPUS = Path(__file__).resolve().parents[4].parent / "shared" / "sillytavern-corpus"
DEFAULT = CORPUS / "sillytavern-repo/staging-1ac6780/presets_openai_Default.json"
LEGACY = CORPUS / "sillytavern-repo/tag-1.9.7/OpenAI_Default.settings.json"
LUCID = CORPUS / "prolix-oc-st-presets/presets/Lucid Loom v2.8.json"
STORY = CORPUS / "prolix-oc-st-presets/presets/StoryWeaver v1.1.json"
CORPUS_PRESETS = [DEFAULT, LEGACY, LUCID, STORY]


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_bytes())
    return data


def normalized(preset: Preset) -> tuple[Any, ...]:
    """Everything a user sees of a preset (not where it came from)."""
    return (
        preset.name,
        preset.prompts,
        preset.sampling,
        preset.system_prompt_mode,
        preset.source.selected_order_character_id,
    )


def paths(value: Any, prefix: str = "$") -> set[str]:
    """Every key path of a JSON document (list items by index)."""
    found = {prefix}
    if isinstance(value, dict):
        for key, child in value.items():
            found |= paths(child, f"{prefix}.{key}")
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found |= paths(child, f"{prefix}[{index}]")
    return found


def prompt(preset: Preset, identifier: str) -> PresetPrompt:
    return next(p for p in preset.prompts if p.identifier == identifier)


# ---------------------------------------------------------------- corpus


@pytest.mark.parametrize("path", CORPUS_PRESETS, ids=lambda p: p.name)
def test_every_corpus_preset_imports_and_round_trips(path: Path) -> None:
    preset = parse_preset_json(path.read_bytes(), name=path.stem)
    exported = export_preset(preset)
    again = parse_preset(json.loads(export_preset_json(preset)))
    assert normalized(again) == normalized(preset)
    # an unedited export is the stored original plus its name: nothing dropped, nothing rewritten
    assert exported == {**preset.source.raw, "name": preset.name}
    assert paths(load(path)) <= paths(exported)


def test_default_preset_uses_the_100001_order() -> None:
    preset = parse_preset(load(DEFAULT))
    assert preset.source.selected_order_character_id == "100001"
    assert [p.identifier for p in preset.prompts] == [i for i, _ in DEFAULT_PROMPT_ORDER]
    assert prompt(preset, "personaDescription").enabled  # only in the 100001 list
    assert not prompt(preset, "enhanceDefinitions").enabled
    assert prompt(preset, "chatHistory").marker
    assert prompt(preset, "main").content.startswith("Write {{char}}'s next reply")
    sampling = preset.sampling
    assert (sampling.temperature, sampling.max_tokens, sampling.max_context) == (1, 300, 4095)
    assert (sampling.top_p, sampling.seed, sampling.reasoning_effort) == (1, -1, None)


def test_lucid_loom_prompts_injections_and_effort() -> None:
    preset = parse_preset(load(LUCID))
    assert len(preset.prompts) == 253
    in_chat = [p for p in preset.prompts if p.injection_position == 1]
    assert len(in_chat) == 73
    assert {p.role for p in in_chat if p.injection_depth == 0} == {"system", "user", "assistant"}
    # the 7 definitions outside the live order come last and are off
    assert [p.enabled for p in preset.prompts[246:]] == [False] * 7
    # prompts without role/content are system prompts with empty content, as in SillyTavern
    roleless = [p for p in load(LUCID)["prompts"] if "role" not in p]
    assert all(prompt(preset, r["identifier"]).role == "system" for r in roleless)
    assert preset.sampling.reasoning_effort == "max"


def test_storyweaver_imports() -> None:
    preset = parse_preset(load(STORY))
    assert len(preset.prompts) == 31
    assert preset.source.raw["wi_format"] != "{0}"  # kept for the loader


# ---------------------------------------------------------------- live order


def minimal(order_id: Any, *, extra_orders: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "prompts": [
            {"identifier": "main", "name": "Main", "role": "system", "content": "M"},
            {"identifier": "custom", "name": "Custom", "content": "C"},
        ],
        "prompt_order": [
            *(extra_orders or []),
            {
                "character_id": order_id,
                "order": [
                    {"identifier": "custom", "enabled": True},
                    {"identifier": "ghost", "enabled": True},
                    {"identifier": "main", "enabled": False},
                    {"identifier": "chatHistory", "enabled": True},
                ],
            },
        ],
    }


@pytest.mark.parametrize("order_id", [100001, "100001", 100001.0], ids=["int", "str", "float"])
def test_live_order_is_100001_compared_as_string(order_id: Any) -> None:
    other = {"character_id": 100000, "order": [{"identifier": "main", "enabled": True}]}
    preset = parse_preset(minimal(order_id, extra_orders=[other]))
    assert [(p.identifier, p.enabled) for p in preset.prompts] == [
        ("custom", True),
        ("main", False),
        ("chatHistory", True),  # a built-in the order names: added with defaults
    ]
    assert prompt(preset, "chatHistory").marker
    assert prompt(preset, "custom").role == "system"


def test_without_100001_the_default_order_applies_and_customs_are_off() -> None:
    preset = parse_preset(minimal(100000))
    assert preset.source.selected_order_character_id is None
    assert [p.identifier for p in preset.prompts][: len(DEFAULT_PROMPT_ORDER)] == [
        i for i, _ in DEFAULT_PROMPT_ORDER
    ]
    assert prompt(preset, "main").enabled
    assert not prompt(preset, "custom").enabled


def test_prompt_fields_are_normalized() -> None:
    raw = minimal(100001)
    raw["prompts"].append(
        {
            "identifier": " spaced ",
            "role": "narrator",
            "injection_position": 1,
            "injection_depth": 0,
            "injection_order": 50,
            "injection_trigger": ["normal", 3],
            "forbid_overrides": True,
            "name": "n" * 300,
        }
    )
    p = prompt(parse_preset(raw), "spaced")
    assert (p.role, p.injection_position, p.injection_depth, p.injection_order) == (
        "system",
        1,
        0,
        50,
    )
    assert p.injection_trigger == ["normal"]
    assert p.forbid_overrides
    assert len(p.name) == 200


# ---------------------------------------------------------------- legacy


def test_legacy_preset_is_migrated() -> None:
    raw = load(LEGACY)
    preset = parse_preset(raw)
    assert preset.source.migrated_from == "legacy-prompts"
    assert prompt(preset, "main").content == raw["main_prompt"]
    assert prompt(preset, "nsfw").content == raw["nsfw_prompt"]
    assert prompt(preset, "jailbreak").content == raw["jailbreak_prompt"]
    assert prompt(preset, "nsfw").enabled  # nsfw_toggle true
    assert not prompt(preset, "enhanceDefinitions").enabled  # enhance_definitions false
    assert [p.identifier for p in preset.prompts].index("main") == 0
    assert preset.sampling.frequency_penalty == 0.7
    exported = export_preset(preset)
    assert exported["main_prompt"] == raw["main_prompt"]  # legacy keys are kept
    assert exported["prompt_order"][0]["character_id"] == 100001


def test_legacy_nsfw_first_and_toggles() -> None:
    preset = parse_preset(
        {"main_prompt": "m", "nsfw_prompt": "n", "nsfw_toggle": False, "nsfw_first": True}
    )
    ids = [p.identifier for p in preset.prompts]
    assert ids.index("nsfw") == ids.index("main") - 1
    assert not prompt(preset, "nsfw").enabled
    assert not prompt(preset, "jailbreak").enabled  # no text


# ---------------------------------------------------------------- reasoning effort


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("max", "max"),
        ("xhigh", "xhigh"),
        ("min", "min"),
        ("provider-special-9", "provider-special-9"),
        ("auto", None),
        ("   ", None),
        ("bad\x00", None),
        ("x" * 101, None),
        (3, None),
    ],
)
def test_reasoning_effort_keeps_provider_values(value: Any, expected: str | None) -> None:
    raw = {**minimal(100001), "reasoning_effort": value}
    assert parse_preset(raw).sampling.reasoning_effort == expected


@pytest.mark.parametrize("value", ["", "a\nb", "x" * 101, 5])
def test_edited_reasoning_effort_is_validated(value: Any) -> None:
    with pytest.raises(FormatError) as info:
        validate_reasoning_effort(value)
    assert (info.value.code, info.value.status) == ("PRESET_SAMPLING_INVALID", 400)
    assert validate_reasoning_effort(None) is None
    assert validate_reasoning_effort("x" * 100) == "x" * 100


# ---------------------------------------------------------------- export overlay


def edited(preset: Preset) -> Preset:
    prompts = [copy.copy(p) for p in preset.prompts]
    prompts.reverse()
    prompts[0] = msgspec.structs.replace(
        prompts[0], content="EDITED", enabled=not prompts[0].enabled
    )
    prompts.pop()  # delete one
    prompts.append(
        PresetPrompt(identifier="new-one", name="New", role="user", content="hi", enabled=True)
    )
    sampling = msgspec.structs.replace(
        preset.sampling, temperature=0.42, reasoning_effort=None, max_tokens=777, top_p=None
    )
    return msgspec.structs.replace(preset, name="Renamed", prompts=prompts, sampling=sampling)


@pytest.mark.parametrize("path", CORPUS_PRESETS, ids=lambda p: p.name)
def test_edited_export_reimports_to_the_edited_model(path: Path) -> None:
    preset = edited(parse_preset(load(path)))
    exported = export_preset(preset)
    assert normalized(parse_preset(exported)) == normalized(preset)
    assert exported["name"] == "Renamed"
    assert exported["temperature"] == 0.42
    assert exported["openai_max_tokens"] == 777
    assert "max_tokens" not in exported
    assert "top_p" not in exported
    assert "systemPromptMode" not in exported and "system_prompt_mode" not in exported


def test_export_keeps_unknown_fields_other_orders_and_extensions() -> None:
    raw = load(LUCID)
    raw["extensions"] = {
        "regex_scripts": [{"id": "r1", "findRegex": "/a/g", "x-rule": 1}],
        "other": 2,
    }
    raw["prompts"][0]["x-custom"] = {"keep": True}
    preset = edited(parse_preset(raw))
    exported = export_preset(preset)
    assert exported["extensions"] == raw["extensions"]
    first_id = raw["prompts"][0]["identifier"]
    out_first = next(p for p in exported["prompts"] if p["identifier"] == first_id)
    assert out_first["x-custom"] == {"keep": True}
    legacy_order = [o for o in exported["prompt_order"] if str(o["character_id"]) == "100000"]
    assert legacy_order == [o for o in raw["prompt_order"] if str(o["character_id"]) == "100000"]
    # untouched top-level ST fields survive byte-for-byte
    for key in ("wi_format", "scenario_format", "names_behavior", "squash_system_messages"):
        assert exported[key] == raw[key]
    # the new prompt is a full ST definition and is in the live order
    new = next(p for p in exported["prompts"] if p["identifier"] == "new-one")
    assert (new["role"], new["content"], new["injection_position"]) == ("user", "hi", 0)
    live = next(o for o in exported["prompt_order"] if str(o["character_id"]) == "100001")
    assert {"identifier": "new-one", "enabled": True} in live["order"]


def test_cleared_reasoning_effort_exports_auto() -> None:
    preset = parse_preset(load(LUCID))
    cleared = msgspec.structs.replace(
        preset, sampling=msgspec.structs.replace(preset.sampling, reasoning_effort=None)
    )
    assert export_preset(cleared)["reasoning_effort"] == "auto"
    custom = msgspec.structs.replace(
        preset, sampling=msgspec.structs.replace(preset.sampling, reasoning_effort="vendor-x")
    )
    assert parse_preset(export_preset(custom)).sampling.reasoning_effort == "vendor-x"


def test_toggling_a_prompt_rewrites_only_the_live_order() -> None:
    raw = load(DEFAULT)
    preset = parse_preset(raw)
    toggled = [
        msgspec.structs.replace(p, enabled=not p.enabled) if p.identifier == "nsfw" else p
        for p in preset.prompts
    ]
    exported = export_preset(msgspec.structs.replace(preset, prompts=toggled))
    assert exported["prompts"] == raw["prompts"]
    live = next(o for o in exported["prompt_order"] if o["character_id"] == 100001)
    assert {"identifier": "nsfw", "enabled": False} in live["order"]
    assert exported["prompt_order"][0] == raw["prompt_order"][0]


def test_export_without_a_live_order_appends_one() -> None:
    preset = parse_preset(minimal(100000))
    toggled = [msgspec.structs.replace(p, enabled=True) for p in preset.prompts]
    exported = export_preset(msgspec.structs.replace(preset, prompts=toggled))
    live = [o for o in exported["prompt_order"] if str(o["character_id"]) == "100001"]
    assert len(live) == 1
    assert all(item["enabled"] for item in live[0]["order"])
    assert normalized(parse_preset(exported))[1] == toggled


def test_blank_preset_round_trips() -> None:
    preset = blank_preset("  Fresh  ")
    assert preset.name == "Fresh"
    assert preset.sampling.temperature == 1
    assert normalized(parse_preset(export_preset(preset))) == normalized(preset)


# ---------------------------------------------------------------- regex scripts


def test_preset_regex_scripts_default_to_extensions() -> None:
    preset = parse_preset(load(DEFAULT))
    assert preset_regex_scripts(preset) == []
    scripts = [{"id": "a", "scriptName": "A", "findRegex": "x", "unknown": [1]}]
    updated = with_preset_regex_scripts(preset, scripts)
    assert preset_regex_scripts(updated) == scripts
    assert export_preset(updated)["extensions"]["regex_scripts"] == scripts
    assert normalized(parse_preset(export_preset(updated))) == normalized(preset)


def test_preset_regex_scripts_stay_on_their_path() -> None:
    raw = {**minimal(100001), "regex_scripts": [{"id": "old"}]}
    updated = with_preset_regex_scripts(parse_preset(raw), [{"id": "new"}])
    exported = export_preset(updated)
    assert exported["regex_scripts"] == [{"id": "new"}]
    assert "extensions" not in exported


def test_regex_scripts_must_be_objects() -> None:
    with pytest.raises(FormatError) as info:
        with_preset_regex_scripts(parse_preset(load(DEFAULT)), [{"id": "a"}, "nope"])  # type: ignore[list-item]
    assert (info.value.code, info.value.path) == ("REGEX_SCRIPTS_INVALID", "$[1]")


# ---------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("body", "code", "status"),
    [
        (b"[1, 2]", "PRESET_INVALID", 400),
        (b"{nope", "INVALID_JSON", 400),
        (b'{"entries": {}}', "PRESET_INVALID", 400),
        (b'{"prompts": {"a": 1}}', "PRESET_INVALID", 400),
        (
            json.dumps({"prompts": [], "bias": list(range(100_001))}).encode(),
            "STRUCTURE_TOO_MANY_NODES",
            413,
        ),
        (b'{"prompts": []' + b',"x":' + b"[" * 40 + b"]" * 40 + b"}", "STRUCTURE_TOO_DEEP", 400),
    ],
)
def test_rejections_have_stable_codes(body: bytes, code: str, status: int) -> None:
    with pytest.raises(FormatError) as info:
        parse_preset_json(body)
    assert (info.value.code, info.value.status) == (code, status)


def test_settings_json_is_not_a_preset() -> None:
    with pytest.raises(FormatError) as info:
        parse_preset_json((CORPUS / "sillytavern-repo/staging-1ac6780/settings.json").read_bytes())
    assert info.value.code == "PRESET_INVALID"


# ---------------------------------------------------------------- edits


def test_edit_keeps_omitted_sampling_and_clears_null() -> None:
    preset = parse_preset(load(LUCID))
    out = edit_preset(preset, {"sampling": {"temperature": 0.3, "reasoningEffort": None}})
    assert out.sampling.temperature == 0.3
    assert out.sampling.reasoning_effort is None
    assert out.sampling.top_p == preset.sampling.top_p  # omitted: kept
    assert out.prompts == preset.prompts
    assert export_preset(out)["reasoning_effort"] == "auto"


def test_edit_replaces_prompts_and_ignores_read_only_keys() -> None:
    preset = parse_preset(load(DEFAULT))
    wire = msgspec.to_builtins(preset)
    wire["prompts"] = wire["prompts"][:2]
    wire["prompts"][0]["content"] = "Edited main"
    wire["name"] = "Edited"
    wire["systemPromptMode"] = "replace"
    wire["id"] = "ignored"
    out = edit_preset(preset, wire)
    assert [p.identifier for p in out.prompts] == ["main", "worldInfoBefore"]
    assert (out.name, out.system_prompt_mode, out.prompts[0].content) == (
        "Edited",
        "replace",
        "Edited main",
    )
    exported = export_preset(out)
    assert [p["identifier"] for p in exported["prompts"]] == ["main", "worldInfoBefore"]
    assert normalized(parse_preset(exported))[1] == out.prompts


@pytest.mark.parametrize(
    ("patch", "code"),
    [
        ({"unknown": 1}, "PRESET_INVALID"),
        ({"name": "  "}, "PRESET_INVALID"),
        ({"systemPromptMode": "prepend"}, "PRESET_INVALID"),
        ({"sampling": {"temperature": "hot"}}, "PRESET_SAMPLING_INVALID"),
        ({"sampling": {"maxTokens": 0}}, "PRESET_SAMPLING_INVALID"),
        ({"sampling": {"stop": [""]}}, "PRESET_SAMPLING_INVALID"),
        ({"sampling": {"reasoningEffort": "\x07"}}, "PRESET_SAMPLING_INVALID"),
        ({"sampling": {"warmth": 1}}, "PRESET_INVALID"),
        (
            {"prompts": [{"identifier": "a", "name": "A"}, {"identifier": "a", "name": "B"}]},
            "PRESET_INVALID",
        ),
        ({"prompts": [{"identifier": "a", "name": "A", "role": "narrator"}]}, "PRESET_INVALID"),
        ({"prompts": [{"identifier": "a", "name": "A", "injectionPosition": 2}]}, "PRESET_INVALID"),
    ],
)
def test_invalid_edits_are_rejected(patch: dict[str, Any], code: str) -> None:
    preset = parse_preset(load(DEFAULT))
    before = msgspec.to_builtins(preset)
    with pytest.raises(FormatError) as info:
        edit_preset(preset, patch)
    assert (info.value.code, info.value.status) == (code, 400)
    assert msgspec.to_builtins(preset) == before
