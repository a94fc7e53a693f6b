"""The profile budget trims ranked items; the fixed 2 MiB system snapshot ceiling rejects with a
clear diagnostic and never crashes a turn."""

from __future__ import annotations

import pytest

from innkeeper_hostapi.assembly import (
    HARD_MAX_PROFILE_BYTES,
    SYSTEM_SNAPSHOT_MAX_BYTES,
    Module,
    Strategy,
)
from innkeeper_hostapi.testing import RunningHost

from .conftest import ASM, Api

MIB = 1024 * 1024


def _diagnostics(events: list[dict[str, object]]) -> list[dict[str, object]]:
    out = []
    for event in events:
        data = event["data"]
        assert isinstance(data, dict)
        if data["type"] == "ext" and data["name"] == "dsh-assembler:diagnostic":
            out.append(data["payload"])
    return out


async def test_profile_budget_trims_lore_by_rank(innkeeper_host: RunningHost, api: Api) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    items = """[
        Contribution(key="main", text="M" * 100),
        Contribution(key="lore:a", text="A" * 100, rank=0),
        Contribution(key="lore:b", text="B" * 100, rank=1),
        Contribution(key="lore:c", text="C" * 100, rank=2, placement=AtDepth(depth=1)),
    ]"""
    await innkeeper_host.load("src", api.source_plugin("src", "test.src", items))
    session = await api.new_session()
    strategy = Strategy(
        id="tight",
        name="tight",
        backend="advanced",
        modules=(Module(source="test.src"),),
        max_profile_bytes=250,
    )
    await api.use(session, strategy)
    preview = await api.assembler.preview(session)
    (limited,) = preview.diagnostics
    assert limited.code == "ASSEMBLER_PROFILE_LIMITED"
    assert limited.details["droppedKeys"] == ["test.src:lore:c", "test.src:lore:b"]
    await api.turn(session, "Go")
    sent = [m.content for m in api.provider.requests[-1].messages]
    assert sent == ["M" * 100 + "\n\n" + "A" * 100, "Go"]


async def test_profile_too_large_rejects_whole_assembly(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    items = '[Contribution(key="main", text="M" * 300)]'
    await innkeeper_host.load("src", api.source_plugin("src", "test.src", items))
    session = await api.new_session()
    await api.use(
        session,
        Strategy(id="t", name="t", modules=(Module(source="test.src"),), max_profile_bytes=200),
    )
    await api.turn(session, "Go")
    assert [m.content for m in api.provider.requests[-1].messages] == ["Go"]
    events = await api.events(session)
    (diagnostic,) = _diagnostics(events)
    assert diagnostic["code"] == "ASSEMBLER_PROFILE_TOO_LARGE"
    assert diagnostic["details"] == {"actualBytes": 300, "maxBytes": 200}
    end = [e["data"] for e in events if e["data"]["type"] == "turn/end"][-1]
    assert end["reason"]["kind"] == "completed"


async def test_snapshot_ceiling_is_not_raised_by_the_profile_budget(
    innkeeper_host: RunningHost, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    # 1.2 MiB of quotes: logically within the loosest profile budget (2 MiB), physically ~2.4 MiB
    # once serialized (every quote is escaped).
    items = f'[Contribution(key="q", text=chr(34) * {int(1.2 * MIB)}, placement=AtDepth(depth=0))]'
    await innkeeper_host.load("src", api.source_plugin("src", "test.quotes", items))
    session = await api.new_session()
    strategy = Strategy(
        id="loose",
        name="loose",
        backend="advanced",
        modules=(Module(source="test.quotes"),),
        max_profile_bytes=HARD_MAX_PROFILE_BYTES,
    )
    await api.use(session, strategy)

    preview = await api.call("POST", ASM + "/preview", {"sessionId": session, "input": "Go"})
    result = preview["preview"]
    assert result["rejected"] is True
    (code,) = [d["code"] for d in result["diagnostics"]]
    assert code == "ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE"
    assert result["snapshotBytes"] > SYSTEM_SNAPSHOT_MAX_BYTES
    assert [m["content"] for m in result["messages"]] == ["Go"]

    await api.turn(session, "Go")
    assert [m.content for m in api.provider.requests[-1].messages] == ["Go"]
    events = await api.events(session)
    (diagnostic,) = _diagnostics(events)
    assert diagnostic["code"] == "ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE"
    assert diagnostic["details"]["maxBytes"] == SYSTEM_SNAPSHOT_MAX_BYTES
    assert "2097152-byte ceiling" in str(diagnostic["message"])
    assert [e["data"]["type"] for e in events].count("request/assembly") == 0
    assert [e["data"] for e in events if e["data"]["type"] == "turn/end"][-1]["reason"][
        "kind"
    ] == "completed"
    assert '""""' not in caplog.text  # no body in the logs


async def test_complete_snapshot_counts_other_plugins_sections(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    big = api.plugin(
        "big",
        f"""
        from innkeeper_hostapi import hookimpl
        from innkeeper_hostapi.agents import SYSTEM_PROMPT

        @hookimpl
        def innkeeper_plugin_setup(ctx):
            ctx.get(SYSTEM_PROMPT).section(ctx, "big", 50, lambda turn: "B" * {int(1.5 * MIB)})
        """,
    )
    await innkeeper_host.load("big", big)
    items = f'[Contribution(key="d", text="D" * {int(0.6 * MIB)}, placement=AtDepth(depth=0))]'
    await innkeeper_host.load("src", api.source_plugin("src", "test.src", items))
    session = await api.new_session()
    strategy = Strategy(
        id="adv",
        name="adv",
        backend="advanced",
        modules=(Module(source="test.src"),),
        max_profile_bytes=HARD_MAX_PROFILE_BYTES,
    )
    await api.use(session, strategy)
    await api.turn(session, "Go")
    sent = api.provider.requests[-1].messages
    assert [m.role for m in sent] == ["system", "user"]  # the carrier was not placed
    (diagnostic,) = _diagnostics(await api.events(session))
    assert diagnostic["code"] == "ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE"
    assert "request-only messages are not placed" in str(diagnostic["message"])


async def test_profile_budget_above_hard_cap_is_refused(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    body = {"id": "x", "name": "x", "maxProfileBytes": HARD_MAX_PROFILE_BYTES + 1}
    data = await api.call("PUT", ASM + "/strategies/x", body, status=400)
    assert data["code"] == "STRATEGY_INVALID"
