"""With an applied Assembler strategy: the strategy and the request/assembly reference."""

from __future__ import annotations

from typing import Any

import pytest

from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER, AuthorsNoteSetting, Module, Strategy
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.features import prompt_render
from innkeeper_tavern.features.prompt_profile import profile
from innkeeper_tavern.features.prompt_sources import sources
from innkeeper_tavern.state.trace import capture

DEPTH_BOOK = {
    "entries": {
        "0": {
            "uid": 0,
            "key": ["bell"],
            "content": "The bell tower is cracked.",
            "constant": True,
            "position": 4,
            "depth": 1,
            "role": 1,
            "order": 100,
        },
    }
}


async def test_advanced_strategy_is_recorded_and_its_array_verified(
    innkeeper_host: RunningHost, trace_helpers: Any
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    assert (await innkeeper_host.load("tavern", "innkeeper_tavern.plugin"))["state"] != "failed"
    host = trace_helpers(innkeeper_host)
    ids = await host.bound_session(DEPTH_BOOK)
    session = ids["session"]
    assembler = innkeeper_host.get(PROMPT_ASSEMBLER)
    strategy = Strategy(
        id="tavern-advanced",
        name="Tavern, advanced",
        backend="advanced",
        modules=(Module(source="tavern.profile"),),
        authors_note=AuthorsNoteSetting(text="A secret note body"),
    )
    await assembler.put_strategy(strategy)
    await assembler.apply(session, strategy.id)
    await host.prompt(session, "Hello")

    index = await host.v3(f"/sessions/{session}/assemblies")
    (entry,) = index["assemblies"]
    assert entry["references"]["assemblySeq"] is not None
    detail = await host.v3(f"/sessions/{session}/assemblies/{entry['recordId']}")
    record = detail["assembly"]
    assert record["strategy"]["id"] == "tavern-advanced"
    assert record["strategy"]["backend"] == "advanced"
    assert record["strategy"]["modules"][0]["source"] == "tavern.profile"
    assert record["strategy"]["authorsNote"]["bytes"] == len("A secret note body")
    assert "A secret note body" not in str(record)
    assert "The bell tower is cracked." not in str(record)
    assert detail["verification"]["status"] == "verified"
    assembly = detail["request"]["assembly"]
    assert assembly["status"] == "verified"
    inline = [e["content"] for e in assembly["entries"] if e.get("ref") is None]
    assert "The bell tower is cracked." in inline
    assert detail["system"]["status"] == "verified"
    placement = detail["request"]["placement"]
    assert placement["status"] == "verified"
    assert placement["record"]["appliedSha256"] == record["strategy"]["sha256"]
    assert entry["references"]["placementSeq"] == placement["seq"]


async def test_a_strategy_turn_renders_the_tavern_profile_once(
    innkeeper_host: RunningHost, trace_helpers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``tavern.profile`` source reuses the compile's render for a ``normal`` request
    instead of expanding every macro of the same input again; the request carries it."""
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    host = trace_helpers(innkeeper_host)
    ids = await host.bound_session(DEPTH_BOOK)
    assembler = innkeeper_host.get(PROMPT_ASSEMBLER)
    strategy = Strategy(
        id="tavern-plain", name="Tavern", backend="advanced", modules=(Module("tavern.profile"),)
    )
    await assembler.put_strategy(strategy)
    await assembler.apply(ids["session"], strategy.id)
    rendered: list[prompt_render.ProfileOutcome] = []

    def counted(request: prompt_render.RenderRequest, max_bytes: int) -> Any:
        outcome = prompt_render.render_profile(request, max_bytes)
        rendered.append(outcome)
        return outcome

    monkeypatch.setattr(profile, "render_profile", counted)
    monkeypatch.setattr(sources, "render_profile", counted)
    await host.prompt(ids["session"], "Hello")

    [outcome] = rendered
    assert outcome.rendered is not None
    [entry] = (await host.v3(f"/sessions/{ids['session']}/assemblies"))["assemblies"]
    detail = await host.v3(f"/sessions/{ids['session']}/assemblies/{entry['recordId']}")
    assembly = detail["request"]["assembly"]
    inline = [e["content"] for e in assembly["entries"] if e.get("ref") is None]
    assert "The bell tower is cracked." in inline
    assert detail["verification"]["status"] == "verified"


async def test_the_turn_end_reads_the_turn_back_once_for_the_audit(
    innkeeper_host: RunningHost, trace_helpers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader's parameter evidence and the recorder's references come from one read."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    host = trace_helpers(innkeeper_host)
    ids = await host.bound_session(DEPTH_BOOK)
    reads: list[int] = []
    real = capture.read_turn

    async def counted(sessions: Any, session_id: str, turn: int) -> Any:
        reads.append(turn)
        return await real(sessions, session_id, turn)

    monkeypatch.setattr(capture, "read_turn", counted)
    await host.prompt(ids["session"], "Hello")

    assert reads == [1]
    [entry] = (await host.v3(f"/sessions/{ids['session']}/assemblies"))["assemblies"]
    detail = await host.v3(f"/sessions/{ids['session']}/assemblies/{entry['recordId']}")
    assert detail["verification"]["status"] == "verified"
    record = detail["assembly"]
    assert [a["attempt"] for a in record["parameters"]["attempts"]] == [1]
    assert record["references"]["turnEnd"] is not None
