"""Preset parameter admission: the preflight against the provider profile
(`docs/contract/loader.md#parameter-admission`; issue 15, "Partials").

An unsupported preset reasoning effort is omitted before the request (never forwarded raw, never
replaced by a guessed value), recorded with its requested and effective value; the fallback
after a rejection keeps working on the admitted overrides only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tavern_harness import DEFAULT_PRESET_CALL

from innkeeper_core.config import ConfigError, load_config
from innkeeper_core.providers.openai import OpenAIConfig
from innkeeper_hostapi.agents import PROVIDER
from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT
from innkeeper_tavern.features.prompt_profile.admission import admit

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"


async def preset_session(tavern: Any, effort: str) -> dict[str, str]:
    """A session bound to ST's default OpenAI preset with ``reasoningEffort`` set to ``effort``."""
    preset = await tavern.import_preset(ST / "presets_openai_Default.json")
    await tavern.v1("PUT", f"/presets/{preset}", {"sampling": {"reasoningEffort": effort}})
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    return {"preset": preset, "session": session}


async def headers(tavern: Any, session: str) -> list[dict[str, Any]]:
    events = await tavern.events(session)
    return [e["data"] for e in events if e["data"]["type"] == "request/header"]


@pytest.mark.parametrize(
    ("profile", "effort", "admitted"),
    [
        ("openai", "xhigh", True),
        ("openai", "minimal", True),
        ("openai", "max", False),
        ("openrouter", "max", True),
        ("vllm", "high", True),
        ("vllm", "minimal", False),
        ("vllm", "xhigh", False),
        ("deepseek", "high", False),
        ("llamacpp", "low", False),
    ],
)
def test_each_profile_admits_only_the_efforts_its_server_takes(
    profile: str, effort: str, admitted: bool
) -> None:
    config = OpenAIConfig(model="m", profile=profile)
    assert config.accepts("reasoningEffort", effort) is admitted
    # Other parameters are admitted by name only, as before.
    assert config.accepts("temperature", 0.5)


def test_configured_efforts_replace_the_profile_list() -> None:
    config = OpenAIConfig(model="m", profile="vllm", reasoning_efforts=frozenset({"minimal"}))
    assert config.accepts("reasoningEffort", "minimal")
    assert not config.accepts("reasoningEffort", "high")
    # A profile that sends no reasoning effort at all: a value list does not turn it on.
    deepseek = OpenAIConfig(model="m", profile="deepseek", reasoning_efforts=frozenset({"high"}))
    assert not deepseek.accepts("reasoningEffort", "high")
    loaded = load_config(overrides={"provider.reasoning_efforts": ["low", "high"]})
    assert loaded.provider.reasoning_efforts == ["low", "high"]
    with pytest.raises(ConfigError, match="reasoning_efforts"):
        load_config(overrides={"provider.reasoning_efforts": ["low", ""]})


def test_admission_without_a_provider_admits_everything() -> None:
    proposed = {"temperature": 1.0, "reasoningEffort": "xhigh"}
    verdict = admit(proposed, None)
    assert verdict.admitted == proposed and verdict.omitted == ()


async def test_an_unsupported_preset_effort_is_omitted_and_recorded(tavern: Any) -> None:
    ids = await preset_session(tavern, "xhigh")
    provider = tavern.host.get(PROVIDER)
    provider.reasoning_efforts = ("low", "medium", "high")  # like a vLLM server
    await tavern.prompt(ids["session"], "Hello")

    sent = provider.requests[-1].params
    assert sent.reasoning_effort is None  # omitted: the server's default applies
    assert (sent.temperature, sent.max_tokens) == (1.0, 300)  # the rest is merged
    parameters = tavern.host.get(ASSEMBLY_AUDIT).latest(ids["session"])["parameters"]
    assert parameters["admission"] == {
        "provider": "synthetic",
        "requested": {**DEFAULT_PRESET_CALL, "reasoningEffort": "xhigh"},
        "effective": {**DEFAULT_PRESET_CALL, "reasoningEffort": None},
        "omitted": ["reasoningEffort"],
    }
    assert parameters["requested"] == DEFAULT_PRESET_CALL
    assert parameters["effective"]["reasoningEffort"] is None
    header = (await headers(tavern, ids["session"]))[-1]
    assert header["requested"]["reasoningEffort"] is None and not header.get("omitted")


async def test_a_supported_effort_is_sent_as_authored(tavern: Any) -> None:
    ids = await preset_session(tavern, "xhigh")
    provider = tavern.host.get(PROVIDER)
    provider.reasoning_efforts = ("none", "minimal", "low", "medium", "high", "xhigh")
    await tavern.prompt(ids["session"], "Hello")
    assert provider.requests[-1].params.reasoning_effort == "xhigh"
    parameters = tavern.host.get(ASSEMBLY_AUDIT).latest(ids["session"])["parameters"]
    assert parameters["admission"]["omitted"] == []
    assert parameters["admission"]["effective"]["reasoningEffort"] == "xhigh"
    assert parameters["requested"]["reasoningEffort"] == "xhigh"

    # SillyTavern's own "min" is sent as SillyTavern sends it, then admitted like any value.
    await tavern.v1("PUT", f"/presets/{ids['preset']}", {"sampling": {"reasoningEffort": "min"}})
    provider.reasoning_efforts = ("low", "medium", "high")
    await tavern.prompt(ids["session"], "Again")
    assert provider.requests[-1].params.reasoning_effort is None
    parameters = tavern.host.get(ASSEMBLY_AUDIT).latest(ids["session"])["parameters"]
    assert parameters["admission"]["requested"]["reasoningEffort"] == "minimal"
    assert parameters["admission"]["omitted"] == ["reasoningEffort"]


async def test_a_parameter_the_profile_does_not_send_is_omitted_before_the_request(
    tavern: Any,
) -> None:
    ids = await preset_session(tavern, "high")
    provider = tavern.host.get(PROVIDER)
    provider.unsupported = ("reasoningEffort", "topP")  # like DeepSeek: no reasoning_effort
    await tavern.prompt(ids["session"], "Hello")
    assert provider.requests[-1].params.reasoning_effort is None
    assert provider.requests[-1].params.top_p is None
    admission = tavern.host.get(ASSEMBLY_AUDIT).latest(ids["session"])["parameters"]["admission"]
    assert admission["omitted"] == ["reasoningEffort", "topP"]
    assert (admission["requested"]["reasoningEffort"], admission["requested"]["topP"]) == (
        "high",
        1.0,
    )
    assert (admission["effective"]["reasoningEffort"], admission["effective"]["topP"]) == (
        None,
        None,
    )


async def test_the_fallback_after_a_rejection_is_unchanged(tavern: Any) -> None:
    ids = await preset_session(tavern, "xhigh")
    provider = tavern.host.get(PROVIDER)
    provider.reasoning_efforts = ("low", "medium", "high")
    provider.reject = ("temperature",)
    await tavern.prompt(ids["session"], "Hello")
    sent = [r.params for r in provider.requests[-2:]]
    assert [(p.temperature, p.reasoning_effort) for p in sent] == [(1.0, None), (None, None)]
    parameters = tavern.host.get(ASSEMBLY_AUDIT).latest(ids["session"])["parameters"]
    assert parameters["omitted"] == ["temperature"]
    assert parameters["admission"]["omitted"] == ["reasoningEffort"]
    omissions = [h.get("omitted", []) for h in await headers(tavern, ids["session"])]
    assert omissions == [[], ["temperature"]]
