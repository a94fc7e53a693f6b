"""Configuration preview and apply: diagnostics, no side effects, atomic application."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_tavern.state.resources import atomic
from innkeeper_tavern.state.session_bindings import journal
from innkeeper_tavern.state.session_bindings.model import RpState
from innkeeper_tavern.state.session_bindings.store import SELECTIONS_FILE
from innkeeper_tavern.state.session_templates.model import selection_to_wire

from .conftest import Tavern

BAD = "INVALID_SESSION_TEMPLATE_REQUEST"


def on_disk(root: Path) -> tuple[bytes | None, ...]:
    """The raw bytes of the selection file and of a change log (``None`` when absent)."""
    paths = (root / SELECTIONS_FILE, root / journal.LOG_FILE)
    return tuple(p.read_bytes() if p.exists() else None for p in paths)


async def make_template(tavern: Tavern, selection: dict[str, Any], name: str = "T") -> str:
    body = {"name": name, "selection": selection}
    tid: str = (await tavern.v1("POST", "/session-templates", body, 201))["template"]["id"]
    return tid


async def full_profile(tavern: Tavern) -> dict[str, Any]:
    return {
        "presetId": await tavern.preset("P"),
        "characterCardId": await tavern.character("C", greetings=2),
        "userId": await tavern.user("U"),
        "worldBookIds": [await tavern.world_book("W1"), await tavern.world_book("W2")],
        "character": {"greetingIndex": 1},
        "rp": {"active": True, "source": "command"},
    }


async def test_preview_current_reads_without_writing(tavern: Tavern) -> None:
    preset = await tavern.preset("Default")
    await tavern.v1("POST", "/select", {"id": preset})
    session = await tavern.new_session()
    preview = await tavern.v1(
        "POST",
        "/session-configurations/preview",
        {"source": {"mode": "current", "sessionId": session}},
    )
    assert preview["ok"] is True and preview["available"] is True
    assert preview["selection"]["presetId"] == preset  # what it would freeze
    assert preview["contents"]["preset"] == {"id": preset, "name": "Default", "missing": False}
    assert preview["diagnostics"] == []
    assert set(preview) == {"ok", "selection", "contents", "diagnostics", "available"}
    assert not tavern.store.has(session)  # preview never freezes or binds


async def test_preview_template_reports_every_deleted_resource(tavern: Tavern) -> None:
    profile = await full_profile(tavern)
    tid = await make_template(tavern, profile)
    ok = await tavern.v1(
        "POST",
        "/session-configurations/preview",
        {"source": {"mode": "template", "templateId": tid}},
    )
    assert ok["available"] is True and ok["selection"]["rp"]["active"] is True

    res = tavern.resources
    await res.delete_preset(profile["presetId"])
    await res.delete_character(profile["characterCardId"])
    await res.delete_user(profile["userId"])
    await res.delete_world_book(profile["worldBookIds"][1])

    preview = await tavern.v1(
        "POST",
        "/session-configurations/preview",
        {"source": {"mode": "template", "templateId": tid}},
    )
    assert preview["available"] is False
    assert [(d["code"], d["field"], d["resourceId"]) for d in preview["diagnostics"]] == [
        ("SESSION_CONFIGURATION_PRESET_MISSING", "presetId", profile["presetId"]),
        (
            "SESSION_CONFIGURATION_CHARACTER_MISSING_OR_INVALID",
            "characterCardId",
            profile["characterCardId"],
        ),
        ("SESSION_CONFIGURATION_USER_MISSING", "userId", profile["userId"]),
        ("SESSION_CONFIGURATION_WORLD_BOOK_MISSING", "worldBookIds", profile["worldBookIds"][1]),
    ]
    assert all(d["message"] for d in preview["diagnostics"])
    # The template itself is not rewritten when its resources go away.
    assert preview["selection"]["presetId"] == profile["presetId"]
    assert preview["contents"]["worldBooks"][0]["missing"] is False
    assert preview["contents"]["worldBooks"][1]["missing"] is True
    detail = await tavern.v1("GET", f"/session-templates/{tid}")
    assert len(detail["diagnostics"]) == 4


async def test_greeting_past_the_cards_greetings_is_a_diagnostic(tavern: Tavern) -> None:
    card = await tavern.character("C", greetings=2)
    tid = await make_template(tavern, {"characterCardId": card, "character": {"greetingIndex": 2}})
    preview = await tavern.v1(
        "POST",
        "/session-configurations/preview",
        {"source": {"mode": "template", "templateId": tid}},
    )
    [diagnostic] = preview["diagnostics"]
    assert diagnostic["code"] == "SESSION_CONFIGURATION_CHARACTER_MISSING_OR_INVALID"
    assert "greetingIndex 2" in diagnostic["message"]


async def test_bad_sources(tavern: Tavern) -> None:
    path = "/session-configurations/preview"
    for source in (
        None,
        "current",
        {"mode": "fork", "sessionId": "x"},
        {"mode": "current"},
        {"mode": "current", "sessionId": ""},
        {"mode": "template", "sessionId": "x"},
        {"mode": "template", "templateId": "t", "sessionId": "x"},
    ):
        assert (await tavern.v1("POST", path, {"source": source}, 400))["code"] == BAD, source
    assert (await tavern.v1("POST", path, {"source": None, "x": 1}, 400))["code"] == BAD
    missing = {"source": {"mode": "template", "templateId": "nope"}}
    assert (await tavern.v1("POST", path, missing, 404))["code"] == "SESSION_TEMPLATE_NOT_FOUND"
    unknown = {"source": {"mode": "current", "sessionId": "no-such-session"}}
    assert (await tavern.v1("POST", path, unknown, 404))["code"] == "SESSION_NOT_FOUND"


async def test_apply_template_writes_the_complete_selection(tavern: Tavern) -> None:
    profile = await full_profile(tavern)
    tid = await make_template(tavern, profile)
    target = await tavern.new_session()
    # The target had its own bindings: apply replaces them all.
    other_book = await tavern.world_book("Other")
    await tavern.v1(
        "POST", "/world-book-selection", {"sessionId": target, "worldBookIds": [other_book]}
    )
    applied = await tavern.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": target, "source": {"mode": "template", "templateId": tid}},
    )
    assert applied["diagnostics"] == [] and applied["agentRunning"] is False
    assert applied["targetSessionId"] == target
    stored = tavern.store.stored(target)
    assert stored is not None
    assert applied["selection"] == selection_to_wire(stored)
    assert stored.world_book_ids == tuple(profile["worldBookIds"])
    assert stored.rp == RpState(active=True, source="command")
    assert stored.character.greeting_index == 1
    # The selection routes now read the applied configuration.
    view = await tavern.v1("GET", f"/character-selection?sessionId={target}")
    assert view["selection"]["characterCardId"] == profile["characterCardId"]


async def test_apply_current_copies_another_session(tavern: Tavern) -> None:
    preset, user = await tavern.preset("P"), await tavern.user("U")
    source, target = await tavern.new_session(), await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": source})
    await tavern.v1("POST", "/user-selection", {"sessionId": source, "userId": user})
    await tavern.store.update(source, lambda s: msgspec.structs.replace(s, rp=RpState(active=True)))
    await tavern.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": target, "source": {"mode": "current", "sessionId": source}},
    )
    assert tavern.store.stored(target) == tavern.store.stored(source)
    # Not linked afterwards.
    await tavern.v1("POST", "/user-selection", {"sessionId": source, "userId": None})
    target_selection = tavern.store.stored(target)
    assert target_selection is not None and target_selection.user_id == user


async def test_apply_with_missing_resources_is_409_and_writes_nothing(tavern: Tavern) -> None:
    profile = await full_profile(tavern)
    tid = await make_template(tavern, profile)
    target = await tavern.new_session()
    kept_preset = await tavern.preset("Kept")
    await tavern.v1("POST", "/select", {"id": kept_preset, "sessionId": target})
    before = tavern.store.stored(target)
    file_before = on_disk(tavern.root)
    await tavern.resources.delete_world_book(profile["worldBookIds"][0])

    error = await tavern.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": target, "source": {"mode": "template", "templateId": tid}},
        409,
    )
    assert error["ok"] is False and error["code"] == "SESSION_CONFIGURATION_UNAVAILABLE"
    assert isinstance(error["error"], str)
    assert [d["resourceId"] for d in error["diagnostics"]] == [profile["worldBookIds"][0]]
    assert tavern.store.stored(target) == before
    assert on_disk(tavern.root) == file_before


async def test_apply_target_checks(tavern: Tavern) -> None:
    tid = await make_template(tavern, {})
    source = {"mode": "template", "templateId": tid}
    path = "/session-configurations/apply"
    missing = await tavern.v1("POST", path, {"targetSessionId": "no-such", "source": source}, 404)
    assert missing["code"] == "SESSION_NOT_FOUND"
    assert not tavern.store.has("no-such")
    bad = await tavern.v1("POST", path, {"targetSessionId": "__proto__", "source": source}, 400)
    assert bad["code"] == "SESSION_ID_INVALID"
    for body in ({"source": source}, {"targetSessionId": 5, "source": source}):
        assert (await tavern.v1("POST", path, body, 400))["code"] == BAD
    target = await tavern.new_session()
    extra = {"targetSessionId": target, "source": source, "dryRun": True}
    assert (await tavern.v1("POST", path, extra, 400))["code"] == BAD
    assert not tavern.store.has(target)


async def test_apply_write_failure_changes_nothing(
    tavern: Tavern, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = await full_profile(tavern)
    tid = await make_template(tavern, profile)
    target = await tavern.new_session()
    await tavern.v1("POST", "/user-selection", {"sessionId": target, "userId": profile["userId"]})
    before = tavern.store.stored(target)
    file_before = on_disk(tavern.root)

    def fail(fd: int) -> None:
        raise OSError("fsync refused")

    monkeypatch.setattr(atomic, "_fsync", fail)
    error = await tavern.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": target, "source": {"mode": "template", "templateId": tid}},
        500,
    )
    assert error["code"] == "SESSION_SELECTION_WRITE_FAILED"
    assert tavern.store.stored(target) == before
    assert on_disk(tavern.root) == file_before
    assert not [p for p in tavern.root.iterdir() if p.name.endswith(".tmp")]


async def test_apply_overwrites_a_running_session_and_says_so(tavern: Tavern) -> None:
    from innkeeper_core.providers.synthetic import SyntheticProvider, SyntheticReply

    preset = await tavern.preset("P")
    tid = await make_template(tavern, {"presetId": preset})
    session = await tavern.new_session()
    provider = tavern.host.get(PROVIDER)
    assert isinstance(provider, SyntheticProvider)
    provider.enqueue(SyntheticReply(text="slow reply", delay_s=0.3))
    await tavern.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "Hi"}, 202)
    agents = tavern.host.get(AGENTS)
    for _ in range(100):
        if agents.is_running(session):
            break
        await asyncio.sleep(0.01)
    assert agents.is_running(session)
    # `docs/contract/loader.md#running-agent`: apply is not refused.
    applied = await tavern.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": session, "source": {"mode": "template", "templateId": tid}},
    )
    assert applied["agentRunning"] is True
    assert applied["selection"]["presetId"] == preset
    await agents.wait_idle(session)
    stored = tavern.store.stored(session)
    assert stored is not None and stored.preset_id == preset
