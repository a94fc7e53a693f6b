"""What the web client's preset editor relies on (`docs/resources.md` "Preset editing"): the
preset's revision (compare-and-set edits), sampler ranges with a stable code, and the admission
answer that says what each sampler becomes against the provider."""

from __future__ import annotations

import json
from typing import Any

from innkeeper_hostapi.agents import PROVIDER

from .conftest import CORPUS

Tavern = Any
DEFAULT_PRESET = CORPUS / "sillytavern-repo" / "staging-1ac6780" / "presets_openai_Default.json"


async def imported(tavern: Tavern) -> dict[str, Any]:
    text = DEFAULT_PRESET.read_text(encoding="utf-8")
    made = await tavern.call(
        "POST", "/import", json={"content": text, "name": "Default"}, status=201
    )
    return dict((await tavern.get(f"/presets/{made['preset']['id']}"))["preset"])


async def test_a_stale_preset_revision_is_refused_and_changes_nothing(tavern: Tavern) -> None:
    preset = await imported(tavern)
    pid, revision = preset["id"], preset["revision"]
    assert isinstance(revision, str) and len(revision) == 64
    first = await tavern.call(
        "PUT",
        f"/presets/{pid}",
        json={"sampling": {"temperature": 0.7}, "expectedRevision": revision},
        status=200,
    )
    assert first["preset"]["revision"] != revision
    assert (
        first["preset"]["revision"] == (await tavern.get(f"/presets/{pid}"))["preset"]["revision"]
    )
    stale = await tavern.call(
        "PUT",
        f"/presets/{pid}",
        json={"sampling": {"temperature": 1.5}, "expectedRevision": revision},
        status=409,
    )
    assert stale["code"] == "RESOURCE_REVISION_CONFLICT"
    assert (await tavern.get(f"/presets/{pid}"))["preset"]["sampling"]["temperature"] == 0.7
    bad = await tavern.call("PUT", f"/presets/{pid}", json={"expectedRevision": 3}, status=400)
    assert bad["code"] == "PRESET_INVALID"
    # A fetched document sent back whole (its read-only revision included) is an edit of its
    # edit fields only; the compare-and-set is expectedRevision's alone.
    again = (await tavern.get(f"/presets/{pid}"))["preset"]
    back = await tavern.call(
        "PUT", f"/presets/{pid}", json={**again, "name": "Renamed"}, status=200
    )
    assert back["preset"]["name"] == "Renamed"


async def test_sampler_ranges_and_prompt_depth_are_enforced_and_lose_nothing(
    tavern: Tavern,
) -> None:
    preset = await imported(tavern)
    pid = preset["id"]
    before = await tavern.call("GET", f"/presets/{pid}/export")
    cases = [
        ({"temperature": -0.1}, "temperature must be at least 0"),
        ({"temperature": 2.5}, "temperature must be at most 2"),
        ({"topP": 1.01}, "topP must be at most 1"),
        ({"minP": -1}, "minP must be at least 0"),
        ({"topK": 501}, "topK must be at most 500"),
        ({"frequencyPenalty": 3}, "frequencyPenalty must be at most 2"),
        ({"repetitionPenalty": 0.5}, "repetitionPenalty must be at least 1"),
        ({"maxTokens": 0}, "maxTokens must be a positive integer"),
        ({"seed": -2}, "seed must be at least -1"),
    ]
    for sampling, message in cases:
        answer = await tavern.call(
            "PUT", f"/presets/{pid}", json={"sampling": sampling}, status=400
        )
        assert answer["code"] == "PRESET_SAMPLING_INVALID", sampling
        assert message in answer["error"]["message"], (sampling, answer["error"])
    prompts = preset["prompts"]
    deep = [{**prompts[0], "injectionPosition": 1, "injectionDepth": 10000}, *prompts[1:]]
    answer = await tavern.call("PUT", f"/presets/{pid}", json={"prompts": deep}, status=400)
    assert answer["code"] == "PRESET_INVALID"
    assert answer["error"]["details"]["path"] == "$.prompts[0].injectionDepth"
    # Nothing was written: the export is byte for byte what it was.
    assert await tavern.call("GET", f"/presets/{pid}/export") == before
    # The ends of each range are accepted.
    edge = {"temperature": 2, "topP": 0, "topK": 500, "repetitionPenalty": 1, "seed": -1}
    body = await tavern.call("PUT", f"/presets/{pid}", json={"sampling": edge}, status=200)
    assert body["preset"]["sampling"]["topK"] == 500


async def test_an_edited_preset_exports_as_sillytavern_reads_it(tavern: Tavern) -> None:
    preset = await imported(tavern)
    pid = preset["id"]
    prompts = preset["prompts"]
    by_id = {p["identifier"]: p for p in prompts}
    order = [p["identifier"] for p in prompts]
    i, j = order.index("charDescription"), order.index("charPersonality")
    order[i], order[j] = order[j], order[i]
    edited = [dict(by_id[k]) for k in order]
    for p in edited:
        if p["identifier"] == "nsfw":
            p["enabled"] = False
        if p["identifier"] == "main":
            p["content"] = "Write as {{char}}, briefly."
    await tavern.call(
        "PUT",
        f"/presets/{pid}",
        json={"sampling": {"temperature": 0.5, "maxTokens": 123}, "prompts": edited},
        status=200,
    )
    out = json.loads(await tavern.call("GET", f"/presets/{pid}/export"))
    original = json.loads(DEFAULT_PRESET.read_text(encoding="utf-8"))
    assert (out["temperature"], out["openai_max_tokens"]) == (0.5, 123)
    live = next(o for o in out["prompt_order"] if str(o["character_id"]) == "100001")
    ids = [o["identifier"] for o in live["order"]]
    assert ids.index("charPersonality") < ids.index("charDescription")
    assert {o["identifier"]: o["enabled"] for o in live["order"]}["nsfw"] is False
    main = next(p for p in out["prompts"] if p["identifier"] == "main")
    assert main["content"] == "Write as {{char}}, briefly."
    # Everything else is the original, key for key (SillyTavern's other settings survive).
    changed = {"temperature", "openai_max_tokens", "prompt_order", "prompts", "name"}
    assert {k: v for k, v in out.items() if k not in changed} == {
        k: v for k, v in original.items() if k not in changed
    }
    other = [o for o in out["prompt_order"] if str(o["character_id"]) != "100001"]
    assert other == [o for o in original["prompt_order"] if str(o["character_id"]) != "100001"]


async def test_admission_says_what_each_sampler_becomes_and_why(tavern: Tavern) -> None:
    preset = await imported(tavern)
    provider = tavern.host.get(PROVIDER)
    provider.unsupported = ("topP",)
    provider.reasoning_efforts = ("low", "medium", "high")
    # The unsaved edit is applied over the stored preset; the stored one is not touched.
    answer = await tavern.call(
        "POST",
        "/preset-admission",
        json={
            "presetId": preset["id"],
            "sampling": {"temperature": 0.8, "reasoningEffort": "xhigh", "topK": 40},
        },
        status=200,
    )
    admission = answer["admission"]
    assert admission["provider"] == "synthetic"
    rows = {r["name"]: r for r in admission["samplers"]}
    assert rows["temperature"] == {
        "name": "temperature",
        "stored": 0.8,
        "sent": 0.8,
        "effective": 0.8,
        "range": {"min": 0.0, "max": 2.0},
        "status": "sent",
        "reason": "sent as stored",
    }
    assert (rows["topP"]["status"], rows["topP"]["effective"]) == ("dropped", None)
    assert "does not send topP" in rows["topP"]["reason"]
    assert rows["reasoningEffort"]["status"] == "dropped"
    assert "does not take reasoningEffort 'xhigh'" in rows["reasoningEffort"]["reason"]
    assert (rows["topK"]["status"], rows["topK"]["effective"]) == ("sent", 40)
    # SillyTavern's "off" values are not sent, and the reason says so.
    assert rows["seed"]["status"] == "not-sent" and "random" in rows["seed"]["reason"]
    assert rows["maxContext"]["status"] == "not-sent" and rows["maxContext"]["stored"] == 4095
    assert rows["topA"]["stored"] == 0 and rows["topA"]["status"] == "sent"
    assert rows["stop"]["status"] == "unset"
    assert admission["omitted"] == ["reasoningEffort", "topP"]
    assert (await tavern.get(f"/presets/{preset['id']}"))["preset"]["sampling"]["temperature"] == 1
    # ST's own effort names are mapped as ST sends them.
    mapped = await tavern.call(
        "POST", "/preset-admission", json={"sampling": {"reasoningEffort": "max"}}, status=200
    )
    effort = {r["name"]: r for r in mapped["admission"]["samplers"]}["reasoningEffort"]
    assert (effort["status"], effort["sent"], effort["effective"]) == ("mapped", "high", "high")
    # Bad input: the edit's own validation and code; unknown fields and presets.
    bad = await tavern.call(
        "POST", "/preset-admission", json={"sampling": {"temperature": 9}}, status=400
    )
    assert bad["code"] == "PRESET_SAMPLING_INVALID"
    bad = await tavern.call("POST", "/preset-admission", json={"preset": "x"}, status=400)
    assert bad["code"] == "PRESET_INVALID"
    missing = await tavern.call(
        "POST", "/preset-admission", json={"presetId": "preset-nope"}, status=404
    )
    assert missing["code"] == "PRESET_NOT_FOUND"
