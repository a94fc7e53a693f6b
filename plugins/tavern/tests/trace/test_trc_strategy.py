"""With an applied Assembler strategy: the strategy and the request/assembly reference."""

from __future__ import annotations

from typing import Any

from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER, AuthorsNoteSetting, Module, Strategy
from innkeeper_hostapi.testing import RunningHost

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
