"""Preset samplers reach the OpenAI-compatible request; what a provider profile cannot send is
omitted before the request and recorded as requested/effective (issue 10, item 4; issue 15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from innkeeper_core.providers.openai import OpenAIConfig, build_body
from innkeeper_hostapi.providers import CallParams, ChatMessage, ProviderRequest
from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT

PROLIX = Path(__file__).resolve().parents[5] / "shared/sillytavern-corpus/prolix-oc-st-presets"


async def test_lucid_loom_samplers_are_sent_or_recorded_as_omitted(tavern: Any) -> None:
    preset = await tavern.import_preset(PROLIX / "presets" / "Lucid Loom v2.8.json")
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    # A server profile like OpenAI's own: no top_k / min_p / top_a / repetition_penalty.
    tavern.provider.unsupported = ("topK", "minP", "topA", "repetitionPenalty")
    await tavern.prompt(session, "Hello")

    sent = tavern.provider.requests[-1].params
    assert (sent.temperature, sent.top_p, sent.max_tokens) == (1.2, 0.95, 16384)
    assert sent.reasoning_effort == "high"  # SillyTavern's "max" in the API's terms
    assert sent.top_k is None and sent.seed is None  # seed -1 is "random": not sent
    # Admitted before the request (the preflight): the preset's value is recorded as requested,
    # the effective one as null, and the host never sees the omitted overrides.
    admission = tavern.host.get(ASSEMBLY_AUDIT).latest(session)["parameters"]["admission"]
    assert admission["requested"]["topK"] == 255 and admission["effective"]["topK"] is None
    assert admission["requested"]["topP"] == admission["effective"]["topP"] == 0.95
    assert set(admission["omitted"]) == {"topK", "minP", "topA", "repetitionPenalty"}
    header = next(
        e["data"] for e in await tavern.events(session) if e["data"]["type"] == "request/header"
    )
    assert header["requested"]["topK"] is None and header["effective"]["topP"] == 0.95

    tavern.provider.unsupported = ()
    tavern.provider.reject = ("topK",)  # a server that rejects top_k outright
    await tavern.prompt(session, "Again")
    headers = [
        e["data"] for e in await tavern.events(session) if e["data"]["type"] == "request/header"
    ]
    assert headers[-1]["omitted"] == ["topK"] and headers[-1]["attempt"] == 2
    assert tavern.provider.requests[-1].params.top_k is None
    assert tavern.provider.requests[-2].params.top_k == 255


def test_profiles_choose_what_goes_on_the_wire() -> None:
    params = CallParams(temperature=1.0, top_p=0.9, top_k=40, min_p=0.05, repetition_penalty=1.1)
    request = ProviderRequest(messages=(ChatMessage(role="user", content="hi"),), params=params)
    openai = OpenAIConfig(model="m")
    assert [n for n in ("topP", "topK", "minP") if openai.accepts(n)] == ["topP"]
    llama = OpenAIConfig(model="m", profile="llamacpp")
    assert llama.accepts("topK") and llama.accepts("repetitionPenalty")
    body = build_body(llama, request)
    assert body["top_k"] == 40 and body["repeat_penalty"] == 1.1 and body["top_p"] == 0.9
    assert OpenAIConfig(model="m", extra_parameters=frozenset({"topK"})).accepts("topK")
