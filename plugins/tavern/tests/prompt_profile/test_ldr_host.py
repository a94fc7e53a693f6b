"""Host integration: parameter fallback, adapter slots, rp:policy, timed effects, clean unload."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tavern_harness import DEFAULT_PRESET_CALL

from innkeeper_core.config import ProviderConfig
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi import RegistrationConflict
from innkeeper_tavern.features.prompt_profile import (
    ASSEMBLY_AUDIT,
    CHARACTER_ADAPTER,
    PROFILE_LOADER,
)

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
Tavern = Any

THIRD_PARTY = """
from innkeeper_hostapi import RegistrationConflict, hookimpl
from innkeeper_hostapi.agents import REQUEST_HOOKS
from innkeeper_tavern.features.prompt_profile import PROFILE_LOADER, CharacterResolution

STATE = {"calls": 0}


class Custom:
    async def resolve(self, request):
        STATE["calls"] += 1
        return CharacterResolution(None)


@hookimpl
async def innkeeper_plugin_setup(ctx):
    loader = ctx.get(PROFILE_LOADER)
    try:
        loader.register_character_adapter(ctx, Custom())
    except RegistrationConflict as exc:
        STATE["conflict"] = exc
    STATE["ctx"] = ctx
    STATE["custom"] = Custom

    def max_tokens(turn, draft):
        if STATE.get("max_tokens") is not None:
            draft.max_tokens = STATE["max_tokens"]

    ctx.get(REQUEST_HOOKS).adjust(ctx, "third:max-tokens", 20, max_tokens)
"""


def third_party(tmp_path: Path) -> str:
    folder = tmp_path / "plugins" / "thirdparty"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(textwrap.dedent(THIRD_PARTY))
    return str(folder)


async def seraphina_session(tavern: Tavern, preset_edit: Any = None) -> dict[str, str]:
    preset = await tavern.import_preset(ST / "presets_openai_Default.json")
    if preset_edit is not None:
        await tavern.v1("PUT", f"/presets/{preset}", preset_edit)
    card = await tavern.import_card(ST / "default_Seraphina.png")
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    return {"preset": preset, "card": card, "session": session}


async def test_rejected_preset_overrides_are_omitted_once_each(
    tmp_path: Path, tavern_for: Any
) -> None:
    # The host's own fallback is off: only the loader's request-error listener asks for retries.
    host = await start_test_host(tmp_path / "d", provider=ProviderConfig(parameter_fallback=False))
    try:
        await host.load("tavern", "innkeeper_tavern.plugin")
        tavern = tavern_for(host)
        ids = await seraphina_session(
            tavern, {"sampling": {"stop": ["\nAda:"], "reasoningEffort": "high"}}
        )
        tavern.provider.reject = ("temperature", "stop")
        await tavern.prompt(ids["session"], "Hello")
        sent = [r.params for r in tavern.provider.requests]
        assert [(p.temperature, p.stop) for p in sent] == [
            (1.0, ("\nAda:",)),
            (None, ("\nAda:",)),
            (None, None),
        ]
        assert all(p.max_tokens == 300 and p.reasoning_effort == "high" for p in sent)
        parameters = host.get(ASSEMBLY_AUDIT).latest(ids["session"])["parameters"]
        assert parameters["requested"] == {
            **DEFAULT_PRESET_CALL,
            "reasoningEffort": "high",
            "stop": ["\nAda:"],
        }
        assert parameters["omitted"] == ["temperature", "stop"]
        assert [f["parameter"] for f in parameters["fallbacks"]] == ["temperature", "stop"]
        assert [a["omitted"] for a in parameters["attempts"]] == [
            [],
            ["temperature"],
            ["temperature", "stop"],
        ]
        assert {k: parameters["effective"][k] for k in ("temperature", "maxTokens")} == {
            "temperature": None,
            "maxTokens": 300,
        }
        assert parameters["effective"]["reasoningEffort"] == "high"
        assert parameters["effective"]["stop"] is None
        assert parameters["effective"]["topP"] == 1.0
        events = await tavern.events(ids["session"])
        assert events[-1]["data"]["reason"]["kind"] == "completed"

        # Another plugin's parameter is not a preset override: it is never dropped by Tavern.
        await host.load("thirdparty", third_party(tmp_path))
        sys.modules["innkeeper_plugins.thirdparty"].STATE["max_tokens"] = 5
        await tavern.v1("PUT", f"/presets/{ids['preset']}", {"sampling": {"maxTokens": None}})
        tavern.provider.reject = ("maxTokens",)
        await tavern.prompt(ids["session"], "Again")
        events = await tavern.events(ids["session"])
        assert events[-1]["data"]["reason"]["code"] == "PROVIDER_INVALID_PARAMETER"
        parameters = host.get(ASSEMBLY_AUDIT).latest(ids["session"])["parameters"]
        assert parameters["omitted"] == [] and "maxTokens" not in parameters["requested"]
    finally:
        await host.close()


async def test_adapter_slots_are_singletons_and_disposers_revoke_only_their_own(
    tavern: Tavern, tmp_path: Path
) -> None:
    host = tavern.host
    loader = host.get(PROFILE_LOADER)
    await host.load("thirdparty", third_party(tmp_path))
    state = sys.modules["innkeeper_plugins.thirdparty"].STATE
    conflict = state["conflict"]
    assert isinstance(conflict, RegistrationConflict)
    assert (conflict.existing_owner, conflict.new_owner) == ("tavern", "thirdparty")
    assert "tavern" in str(conflict) and "thirdparty" in str(conflict)

    ids = await seraphina_session(tavern)
    default = loader.default_registrations["character"]
    await default.dispose()
    custom = state["custom"]()
    loader.register_character_adapter(state["ctx"], custom)
    active = await tavern.active(ids["session"])
    assert active["resources"]["characterCard"] is None and state["calls"] == 1
    await default.dispose()  # a stale disposer: the custom claim stays
    assert state["ctx"].slot(CHARACTER_ADAPTER) is custom
    with pytest.raises(RegistrationConflict):
        loader.register_character_adapter(state["ctx"], custom)

    await host.unload("thirdparty")  # takes its claim with it
    active = await tavern.active(ids["session"])
    assert "TAVERN_LOADER_ADAPTER_MISSING" in [d["code"] for d in active["diagnostics"]]


async def test_rp_policy_section_and_routes(tavern: Tavern) -> None:
    ids = await seraphina_session(tavern)  # binding the card entered RP (rpFollowCharacter)
    session = ids["session"]
    policy = await tavern.v1("GET", "/rp-policy")
    assert policy["policy"]["custom"] is False and "locked" in policy["policy"]["text"]
    await tavern.prompt(session, "Hi")
    sent = tavern.provider.requests[-1].messages[0].content
    assert sent.endswith("\n\n" + policy["policy"]["text"])  # RP is on: the section is sent
    await tavern.v1("PUT", "/rp-mode", {"sessionId": session, "active": False})
    await tavern.prompt(session, "Hello")
    assert "locked" not in tavern.provider.requests[-1].messages[0].content  # RP is off

    await tavern.v1("PUT", "/rp-mode", {"sessionId": session, "active": True})
    await tavern.v1("PUT", "/rp-policy", {"text": "Stay in the story."})
    await tavern.prompt(session, "Hi again")
    assert tavern.provider.requests[-1].messages[0].content.endswith("\n\nStay in the story.")
    too_big = await tavern.v1("PUT", "/rp-policy", {"text": "x" * 17000}, 413)
    assert too_big["code"] == "RP_POLICY_TOO_LARGE"
    assert (await tavern.v1("PUT", "/rp-policy", {"text": 1}, 400))["code"] == "RP_POLICY_INVALID"
    reset = await tavern.v1("DELETE", "/rp-policy")
    assert reset["policy"]["custom"] is False


STICKY_BOOK = {
    "entries": {
        "0": {
            "uid": 0,
            "key": ["lantern"],
            "content": "The lantern glows blue.",
            "sticky": 3,
            "position": 0,
            "order": 100,
        },
        "1": {"uid": 1, "key": ["bell"], "content": "A bell rings.", "position": 0, "order": 90},
    }
}


async def test_timed_effects_advance_only_with_the_chat(tavern: Tavern) -> None:
    ids = await seraphina_session(tavern)
    session = ids["session"]
    book = await tavern.import_world_book_json(STICKY_BOOK, "sticky.json")
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    audit = tavern.host.get(ASSEMBLY_AUDIT)

    def reason(lore_id: str) -> str:
        record = audit.latest(session)
        return next(
            d["reason"]
            for b in record["lore"]["books"]
            for d in b["decisions"]
            if d["loreId"] == lore_id
        )

    tavern.provider.enqueue("Okay.", "Fine.")  # replies that do not repeat the key
    await tavern.prompt(session, "I light the lantern.")
    assert reason(f"{book}:0") == "key-match"
    state_file = tavern.host.get(PROFILE_LOADER).timed.path
    stored = json.loads(state_file.read_bytes())["sessions"][session]
    assert stored["clock"] == 1 and f"{book}:0" in stored["after"]["sticky"]
    # A preview neither advances nor writes the state.
    before = state_file.read_bytes()
    await tavern.active(session)
    await tavern.active(session)
    assert state_file.read_bytes() == before
    # A fork continues the parent's chat, so it continues its timed effects too.
    last = (await tavern.events(session))[-1]["seq"]
    fork = await tavern.call("POST", f"/host/api/sessions/{session}/fork", {"atEventId": last}, 201)
    child = fork["session"]["id"]
    tavern.provider.enqueue("Sure.")
    await tavern.prompt(child, "Nothing happens here.")
    record = audit.latest(child)
    assert (
        next(
            d["reason"]
            for b in record["lore"]["books"]
            for d in b["decisions"]
            if d["loreId"] == f"{book}:0"
        )
        == "sticky"
    )
    await tavern.prompt(session, "Nothing else happens.")
    assert reason(f"{book}:0") == "sticky"
    assert "The lantern glows blue." in tavern.provider.requests[-1].messages[0].content
    assert json.loads(state_file.read_bytes())["sessions"][session]["clock"] == 3


async def test_claimed_input_not_yet_durable_is_scanned(tavern: Tavern) -> None:
    from innkeeper_hostapi.agents import TurnContext
    from innkeeper_hostapi.sessions import InboxItem, text_content

    ids = await seraphina_session(tavern)
    book = await tavern.import_world_book_json(STICKY_BOOK, "sticky.json")
    session = ids["session"]
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    loader = tavern.host.get(PROFILE_LOADER)
    turn = TurnContext(
        session_id=session,
        turn=1,
        delegation_depth=0,
        step=1,
        claim_seq=7,
        claimed=(InboxItem(id="pending-1", content=text_content("Ring the bell!")),),
    )
    compiled = await loader.compile(session, turn)
    assert "A bell rings." in compiled.system_text
    meta = compiled.activation.metadata
    assert meta["includedClaimedMessageCount"] == 1 and meta["claimEventSeq"] == 7
    assert loader.snapshot(session, 1, 1) is compiled
    loader.drop_turn(session, 1)
    assert loader.snapshot(session, 1, 1) is None


async def test_unloading_leaves_no_trace(
    innkeeper_host: Any, leak_check: Any, tavern_for: Any
) -> None:
    async with leak_check():
        await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
        tavern = tavern_for(innkeeper_host)
        ids = await seraphina_session(tavern)
        await tavern.prompt(ids["session"], "Hello")
        await tavern.active(ids["session"])
        await innkeeper_host.unload("tavern")


async def test_replace_mode_is_reported_not_silently_ignored(tavern: Tavern) -> None:
    ids = await seraphina_session(tavern, {"systemPromptMode": "replace"})
    active = await tavern.active(ids["session"])
    assert "TAVERN_SYSTEM_PROMPT_MODE_UNSUPPORTED" in [d["code"] for d in active["diagnostics"]]
    assert active["audit"]["composition"]["systemPromptMode"] == "replace"


async def test_a_failing_adapter_never_crashes_the_turn(tavern: Tavern) -> None:
    from innkeeper_tavern.features.prompt_profile import WORLD_BOOK_ADAPTER

    await tavern.rp_follow(False)  # no system text at all when the profile fails
    ids = await seraphina_session(tavern)
    loader = tavern.host.get(PROFILE_LOADER)
    adapter = loader.ctx.slot(WORLD_BOOK_ADAPTER)

    async def broken(request: Any) -> Any:
        raise RuntimeError("secret lore body must not leak")

    adapter.resolve = broken
    await tavern.prompt(ids["session"], "Hello")
    [request] = tavern.provider.requests
    assert [m.role for m in request.messages] == ["user"]
    events = await tavern.events(ids["session"])
    assert events[-1]["data"]["reason"]["kind"] == "completed"
    [ext] = [e["data"] for e in events if e["data"]["type"] == "ext"]
    assert ext["payload"]["code"] == "TAVERN_PROFILE_FAILED"
    assert "secret" not in json.dumps(ext)
    record = tavern.host.get(ASSEMBLY_AUDIT).latest(ids["session"])
    assert record["diagnostics"][0]["code"] == "TAVERN_PROFILE_FAILED"


async def test_activation_input_is_bounded_and_limits_are_clamped(
    tmp_path: Path, tavern_for: Any
) -> None:
    from innkeeper_hostapi.agents import SESSIONS
    from innkeeper_hostapi.sessions import AssistantMessage, UserMessage, text_content

    config = {"max_scan_messages": 4, "max_scan_characters": 50, "max_profile_bytes": 1 << 30}
    host = await start_test_host(tmp_path / "d", plugins={"tavern": config})
    try:
        await host.load("tavern", "innkeeper_tavern.plugin")
        loader = host.get(PROFILE_LOADER)
        assert loader.max_profile_bytes == 2 * 1024 * 1024  # clamped to the hard cap
        tavern = tavern_for(host)
        session = await tavern.new_session()
        sessions = host.get(SESSIONS)
        for i in range(10):
            body = text_content(f"message number {i:02d}")
            data: Any = (
                UserMessage(message_id=f"u{i}", content=body)
                if i % 2 == 0
                else AssistantMessage(message_id=f"a{i}", content=body, turn=1)
            )
            await sessions.append(session, data)
        compiled = await loader.compile(session)
        activation = compiled.activation
        assert activation.chat_length == 10
        # Newest first within 4 messages / 50 characters (+1 separator each); the oldest kept
        # message is cut at the budget.
        assert [(m.id, m.text) for m in activation.messages] == [
            ("a7", "message number"),
            ("u8", "message number 08"),
            ("a9", "message number 09"),
        ]
        assert activation.metadata["truncated"] is True
        assert activation.messages[-1].id == "a9"
    finally:
        await host.close()
    bad = await start_test_host(tmp_path / "e", plugins={"tavern": {"max_profile_bytes": "big"}})
    try:
        status = await bad.load("tavern", "innkeeper_tavern.plugin")
        assert status["state"] == "failed" and "max_profile_bytes" in str(status["lastError"])
    finally:
        await bad.close()
