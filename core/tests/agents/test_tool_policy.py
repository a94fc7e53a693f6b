"""Guards, sandbox modes, approvals, cancel and reload around tool calls (synthetic provider)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from innkeeper_core.config import ToolsConfig
from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.testing import RunningHost
from innkeeper_hostapi.tools import TOOL_POLICY

from .conftest import Api, eventually, read_sse

TOOLS = """
import asyncio
from innkeeper_hostapi import hookimpl

CALLS = []
GATE = asyncio.Event()

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def fire(call):
        CALLS.append(("fire", dict(call.arguments), call.sandbox_mode))
        return "fired"

    async def write(call):
        CALLS.append(("write", dict(call.arguments), call.sandbox_mode))
        return "written"

    async def slow(call):
        CALLS.append(("slow", {}, call.sandbox_mode))
        await GATE.wait()
        return "slow done"

    schema = {"type": "object", "properties": {"target": {"type": "string"}}}
    ctx.add_tool("fire", "Shoot.", schema, fire, risk="read-only")
    ctx.add_tool("write", "Write a file.", schema, write, risk="workspace-write")
    ctx.add_tool("slow", "Take a while.", schema, slow, risk="read-only")
"""

GUARD = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.tools import TOOLS

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def no_fire(call):
        if call.name == "fire":
            if ctx.config.get("cancel"):
                await ctx.get(AGENTS).cancel(call.session_id, "rp-high-risk-block", keep_inbox=True)
            return "fire is locked in this story"
        return None

    ctx.get(TOOLS).guard(ctx, "guard:no-fire", 10, no_fire)
"""

PIN = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import PRE_STEP

STEPS = []

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def pin(notice):
        STEPS.append((notice.turn, notice.step))
        notice.pin_sandbox("read-only")

    ctx.on(PRE_STEP, pin)
"""


def calls_of(host: RunningHost) -> list[Any]:
    calls: list[Any] = sys.modules["innkeeper_plugins.tools"].CALLS
    return calls


async def results(api: Api, session: str) -> list[tuple[str, bool, str]]:
    return [
        (e["data"]["name"], e["data"].get("isError", False), e["data"]["content"][0]["text"])
        for e in await api.events(session)
        if e["data"]["type"] == "tool/result"
    ]


async def end_reason(api: Api, session: str) -> dict[str, Any]:
    ends = [e["data"] for e in await api.events(session) if e["data"]["type"] == "turn/end"]
    reason: dict[str, Any] = ends[-1]["reason"]
    return reason


async def test_a_guard_blocks_and_unloading_it_removes_the_block(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
    await innkeeper_host.load("guard", plugin_dir("guard", GUARD))
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply.calling(("fire", {"target": "door"})), "The door holds.")
    await api.prompt(session, "Shoot the door")
    await api.idle(session)
    assert calls_of(innkeeper_host) == []  # the handler never ran
    assert await results(api, session) == [("fire", True, "blocked: fire is locked in this story")]
    assert (await end_reason(api, session))["kind"] == "completed"
    second = api.provider.requests[1].messages
    assert second[-1].role == "tool" and "fire is locked" in second[-1].content

    await innkeeper_host.unload("guard")
    api.provider.enqueue(SyntheticReply.calling(("fire", {"target": "door"})), "Boom.")
    await api.prompt(session, "Again")
    await api.idle(session)
    assert calls_of(innkeeper_host) == [("fire", {"target": "door"}, "workspace-write")]
    assert (await results(api, session))[-1] == ("fire", False, "fired")


async def test_a_guard_cancels_the_turn_keeping_the_inbox(
    tmp_path: Path, plugin_dir: Callable[[str, str], str]
) -> None:
    host = await start_test_host(tmp_path / "data", plugins={"guard": {"cancel": True}})
    try:
        api = Api(host)
        await host.load("tools", plugin_dir("tools", TOOLS))
        await host.load("guard", plugin_dir("guard", GUARD))
        session = await api.new_session()
        api.provider.enqueue(
            SyntheticReply.calling(("fire", {}), ("write", {})), "never sent", "Next turn."
        )
        await api.prompt(session, "Shoot")
        await api.prompt(session, "queued meanwhile")
        await api.idle(session)
        events = await api.events(session)
        ends = [e["data"]["reason"] for e in events if e["data"]["type"] == "turn/end"]
        assert ends[0] == {
            "kind": "interrupted",
            "code": "CANCELLED",
            "message": "rp-high-risk-block",
        }
        assert ends[1]["kind"] == "completed"  # the queued input was kept and served
        assert await results(api, session) == [
            ("fire", True, "blocked: fire is locked in this story"),
            ("write", True, "interrupted: rp-high-risk-block"),
        ]
        assert calls_of(host) == []
    finally:
        await host.close()


async def test_read_only_refuses_a_workspace_write_tool(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
    session = await api.new_session()
    policy = await api.call(
        "POST",
        f"/host/api/sessions/{session}/policy",
        {"sandboxMode": "read-only", "approvalPolicy": "never"},
    )
    assert policy == {
        "ok": True,
        "preset": "custom",
        "sandboxMode": "read-only",
        "approvalPolicy": "never",
    }
    types = await api.types(session)
    assert types == ["permission/preset", "sandbox/mode", "approval/policy"]
    api.provider.enqueue(SyntheticReply.calling(("write", {}), ("fire", {})), "ok")
    await api.prompt(session, "Write it")
    await api.idle(session)
    assert await results(api, session) == [
        (
            "write",
            True,
            "refused: the tool's risk workspace-write is above the sandbox mode "
            "read-only and the approval policy is never",
        ),
        ("fire", False, "fired"),
    ]
    assert calls_of(innkeeper_host) == [("fire", {}, "read-only")]


async def _pending(api: Api, session: str) -> list[dict[str, Any]]:
    async def approvals() -> list[dict[str, Any]]:
        data = await api.call("GET", f"/host/api/sessions/{session}/approvals")
        found: list[dict[str, Any]] = data["approvals"]
        return found

    return await eventually(approvals, "a pending approval", tries=300)


async def test_approval_pending_then_approve_or_deny(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
    session = await api.new_session()
    await innkeeper_host.get(TOOL_POLICY).set(session, preset="read-only")  # asks above read-only
    resp = await innkeeper_host.client.get(f"/host/api/sessions/{session}/events")
    api.provider.enqueue(
        SyntheticReply.calling(("write", {"target": "a"})),
        "first done",
        SyntheticReply.calling(("write", {"target": "b"})),
        "second done",
    )
    await api.prompt(session, "Write a")
    (pending,) = await _pending(api, session)
    assert (pending["callId"], pending["name"], pending["risk"]) == (
        "call_1",
        "write",
        "workspace-write",
    )
    assert (pending["sandboxMode"], pending["approvalPolicy"]) == ("read-only", "on-request")
    assert calls_of(innkeeper_host) == []
    base = f"/host/api/sessions/{session}/approvals"
    bad = await api.call("POST", f"{base}/call_1", {"decision": "maybe"}, status=400)
    assert bad["code"] == "INVALID_BODY"
    await api.call("POST", f"{base}/call_1", {"decision": "approve"})
    await api.idle(session)
    assert calls_of(innkeeper_host) == [("write", {"target": "a"}, "read-only")]
    frames = await read_sse(resp, lambda f: f.get("event") == "approval/resolved")
    live = [f for f in frames if f.get("event") in ("approval/pending", "approval/resolved")]
    assert [f["event"] for f in live] == ["approval/pending", "approval/resolved"]
    assert live[1]["data"]["outcome"] == "approve"
    resp.close()

    await api.prompt(session, "Write b")
    await _pending(api, session)
    await api.call("POST", f"{base}/call_1", {"decision": "deny"})
    await api.idle(session)
    assert len(calls_of(innkeeper_host)) == 1
    assert (await results(api, session))[-1] == (
        "write",
        True,
        "refused: a person denied this call",
    )
    missing = await api.call("POST", f"{base}/call_1", {"decision": "approve"}, status=404)
    assert missing["code"] == "APPROVAL_NOT_FOUND"


async def test_an_unanswered_approval_times_out_refused(
    tmp_path: Path, plugin_dir: Callable[[str, str], str]
) -> None:
    host = await start_test_host(
        tmp_path / "data", tools=ToolsConfig(permission_preset="read-only", approval_timeout_s=0.2)
    )
    try:
        api = Api(host)
        await host.load("tools", plugin_dir("tools", TOOLS))
        session = await api.new_session()
        assert await api.types(session) == []  # defaults are not written into the session
        api.provider.enqueue(SyntheticReply.calling(("write", {})), "gave up")
        await api.prompt(session, "Write")
        await api.idle(session)
        assert await results(api, session) == [
            ("write", True, "refused: nobody approved this call in time")
        ]
        assert calls_of(host) == []
    finally:
        await host.close()


async def test_pre_step_pins_the_sandbox_mode(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
    await innkeeper_host.load("pin", plugin_dir("pin", PIN))
    session = await api.new_session()
    await innkeeper_host.get(TOOL_POLICY).set(session, preset="full-access")
    api.provider.enqueue(SyntheticReply.calling(("write", {})), "pinned")
    await api.prompt(session, "Write")
    await api.idle(session)
    assert sys.modules["innkeeper_plugins.pin"].STEPS == [(1, 1), (1, 2)]
    modes = [
        e["data"]["mode"] for e in await api.events(session) if e["data"]["type"] == "sandbox/mode"
    ]
    assert modes == ["danger-full-access", "read-only"]  # recorded once, at the first pin
    assert (await results(api, session))[0][1:] == (
        True,
        "refused: the tool's risk workspace-write is above the sandbox mode read-only "
        "and the approval policy is never",
    )


async def test_cancel_interrupts_a_running_tool(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply.calling(("slow", {}), ("fire", {})), "never")
    await api.prompt(session, "Go")
    await api.prompt(session, "queued")
    for _ in range(300):
        if calls_of(innkeeper_host):
            break
        await asyncio.sleep(0.01)
    data = await api.call(
        "POST", f"/host/api/sessions/{session}/cancel", {"reason": "user-stop", "keepInbox": False}
    )
    assert data["interrupted"] is True
    await api.idle(session)
    assert await results(api, session) == [
        ("slow", True, "interrupted: user-stop"),
        ("fire", True, "interrupted: user-stop"),
    ]
    assert await end_reason(api, session) == {
        "kind": "interrupted",
        "code": "CANCELLED",
        "message": "user-stop",
    }
    types = await api.types(session)
    assert types.count("turn/start") == 1  # keepInbox false: the queued input was dropped
    assert [c[0] for c in calls_of(innkeeper_host)] == ["slow"]


async def test_reloading_the_tool_plugin_mid_call_interrupts_it_and_leaves_nothing(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str], leak_check: Any
) -> None:
    async with leak_check():
        await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
        session = await api.new_session()
        api.provider.enqueue(SyntheticReply.calling(("slow", {})), "after reload")
        await api.prompt(session, "Go")
        for _ in range(300):
            if calls_of(innkeeper_host):
                break
            await asyncio.sleep(0.01)
        status = await innkeeper_host.reload("tools")
        assert status["state"] == "active"
        await api.idle(session)
        assert await results(api, session) == [
            ("slow", True, "interrupted: the tool slow was unloaded while it ran")
        ]
        assert (await end_reason(api, session))["kind"] == "completed"
        assert [t["name"] for t in (await api.call("GET", "/host/api/tools"))["tools"]] == [
            "fire",
            "slow",
            "write",
        ]
        await innkeeper_host.unload("tools")
    assert (await api.call("GET", "/host/api/tools"))["tools"] == []


async def test_the_step_limit_answers_the_last_calls_and_ends_the_turn(
    tmp_path: Path, plugin_dir: Callable[[str, str], str]
) -> None:
    host = await start_test_host(tmp_path / "data", tools=ToolsConfig(max_steps=2))
    try:
        api = Api(host)
        await host.load("tools", plugin_dir("tools", TOOLS))
        session = await api.new_session()
        api.provider.enqueue(
            SyntheticReply.calling(("fire", {})), SyntheticReply.calling(("fire", {}))
        )
        await api.prompt(session, "Loop")
        await api.idle(session)
        assert await results(api, session) == [
            ("fire", False, "fired"),
            ("fire", True, "interrupted: the turn reached its limit of 2 steps"),
        ]
        reason = await end_reason(api, session)
        assert (reason["kind"], reason["code"]) == ("error", "TOOL_STEP_LIMIT")
    finally:
        await host.close()


async def test_unknown_tools_and_invalid_arguments_are_answered(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
    session = await api.new_session()
    api.provider.enqueue(SyntheticReply.calling(("nope", {}), ("fire", {"target": 3})), "ok")
    await api.prompt(session, "Try")
    await api.idle(session)
    (unknown, invalid) = await results(api, session)
    assert unknown == ("nope", True, "error: there is no tool named 'nope'")
    assert invalid[:2] == ("fire", True) and "target: 3 is not of type 'string'" in invalid[2]
    assert calls_of(innkeeper_host) == []


async def test_cancel_while_a_call_waits_for_approval(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("tools", plugin_dir("tools", TOOLS))
    session = await api.new_session()
    await innkeeper_host.get(TOOL_POLICY).set(session, preset="read-only")
    api.provider.enqueue(SyntheticReply.calling(("write", {})), "never")
    await api.prompt(session, "Write")
    await _pending(api, session)
    await api.call("POST", f"/host/api/sessions/{session}/cancel")
    await api.idle(session)
    assert await results(api, session) == [("write", True, "interrupted: the turn was cancelled")]
    assert (await api.call("GET", f"/host/api/sessions/{session}/approvals"))["approvals"] == []
    assert await end_reason(api, session) == {"kind": "interrupted", "code": None, "message": None}
    assert calls_of(innkeeper_host) == []


async def test_policy_route_validates_and_reads_defaults(
    innkeeper_host: RunningHost, api: Api
) -> None:
    session = await api.new_session()
    base = f"/host/api/sessions/{session}/policy"
    assert await api.call("GET", base) == {
        "ok": True,
        "preset": "auto",
        "sandboxMode": "workspace-write",
        "approvalPolicy": "on-request",
    }
    assert await api.types(session) == []  # a GET writes nothing
    bad = await api.call("POST", base, {"sandboxMode": "root"}, status=400)
    assert bad["code"] == "INVALID_BODY"
    mismatch = await api.call(
        "POST", base, {"preset": "full-access", "sandboxMode": "read-only"}, status=400
    )
    assert mismatch["code"] == "INVALID_ARGUMENT"
    assert await api.types(session) == []
    done = await api.call("POST", base, {"preset": "full-access"})
    assert (done["sandboxMode"], done["approvalPolicy"]) == ("danger-full-access", "never")
    events = [e["data"] for e in await api.events(session)]
    assert events == [
        {"type": "permission/preset", "preset": "full-access"},
        {"type": "sandbox/mode", "mode": "danger-full-access"},
        {"type": "approval/policy", "policy": "never"},
    ]
    missing = await api.call("GET", "/host/api/sessions/nope/policy", status=404)
    assert missing["code"] == "SESSION_NOT_FOUND"
