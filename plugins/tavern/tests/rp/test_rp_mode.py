"""RP mode over a real host: pending intents committed at the next pre-step, the read-only pin
and its restore, the high-risk guard's alert (once, consumed by DELETE), lineage, /rp."""

from __future__ import annotations

import asyncio

from rp_harness import mode, open_turn, sandbox_modes, tools_state
from tavern_harness import TavernApi

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.testing import RunningHost
from innkeeper_hostapi.tools import TOOL_POLICY
from innkeeper_tavern.state.session_bindings import SESSION_SELECTIONS


async def test_rp_on_during_an_open_turn_is_queued_then_committed_at_the_next_step(
    api: TavernApi, innkeeper_host: RunningHost
) -> None:
    session = await api.new_session()
    before = await mode(api, session)
    assert before["active"] is False and before["pending"] is None
    assert before["followCharacter"] is True
    state = await open_turn(api, session)
    queued = await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": True})
    assert queued["outcome"] == "queued"
    assert queued["rp"]["pending"] is True and queued["rp"]["active"] is True
    stored = innkeeper_host.get(SESSION_SELECTIONS).stored(session)
    assert stored is None or stored.rp.active is False  # not committed yet
    state["gate"].set()
    await api.idle(session)
    committed = await mode(api, session)
    assert committed["active"] is True and committed["pending"] is None
    assert committed["source"] == "command"
    rp = innkeeper_host.get(SESSION_SELECTIONS).get(session).rp
    assert rp.active and rp.sandbox_before == "workspace-write"  # the host default (auto)
    assert await sandbox_modes(api, session) == ["read-only"]
    headers = [e["data"] for e in await api.events(session) if e["data"]["type"] == "tool/result"]
    assert [h["name"] for h in headers] == ["look"]
    # Leaving (no turn open) commits at once and restores the previous mode.
    left = await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": False})
    assert left["outcome"] == "committed" and left["rp"]["active"] is False
    assert (await innkeeper_host.get(TOOL_POLICY).effective(session)).sandbox_mode == (
        "workspace-write"
    )
    again = await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": False})
    assert again["outcome"] == "noop"


async def test_a_queued_change_is_cancelled_by_asking_for_the_committed_state(
    api: TavernApi,
) -> None:
    session = await api.new_session()
    state = await open_turn(api, session)
    assert (await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": True}))[
        "outcome"
    ] == "queued"
    answer = await api.call(
        "POST", f"/host/api/sessions/{session}/prompt", {"text": "/rp off"}, 200
    )
    assert answer["command"]["kind"] == "success" and "cancelled" in answer["command"]["text"]
    state["gate"].set()
    await api.idle(session)
    assert (await mode(api, session))["active"] is False
    assert await sandbox_modes(api, session) == []


async def test_a_blocked_tool_raises_one_alert_consumed_by_delete(
    api: TavernApi, innkeeper_host: RunningHost
) -> None:
    session = await api.new_session()
    answer = await api.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "/rp"}, 200)
    assert answer["command"]["text"] == "RP on: committed"
    assert (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"] is None
    api.provider.enqueue(
        SyntheticReply.calling(("bash", {"command": "ls"}), ("note", {})), "never", "Next."
    )
    await api.send(session, "Run it")
    await api.send(session, "queued meanwhile")
    await api.idle(session)
    assert tools_state()["calls"] == []  # neither handler ran
    events = await api.events(session)
    ends = [e["data"]["reason"] for e in events if e["data"]["type"] == "turn/end"]
    assert ends[0] == {"kind": "interrupted", "code": "CANCELLED", "message": "rp-high-risk-block"}
    assert ends[1]["kind"] == "completed"  # the inbox was kept
    alert = (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"]
    assert alert["tool"] == "bash" and alert["sessionId"] == session
    assert alert["originSessionId"] == session and alert["turn"] == 1
    # GET never consumes; a wrong id does not either; DELETE does, once.
    assert (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"] == alert
    wrong = await api.v1("DELETE", f"/rp-alert?sessionId={session}&id=nope")
    assert wrong["consumed"] is False
    done = await api.v1("DELETE", f"/rp-alert?sessionId={session}&id={alert['id']}")
    assert done["consumed"] is True
    assert (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"] is None
    assert (await api.v1("DELETE", f"/rp-alert?sessionId={session}"))["consumed"] is False


async def test_a_fork_of_an_rp_session_is_in_rp_and_alerts_go_to_the_top(
    api: TavernApi, innkeeper_host: RunningHost
) -> None:
    parent = await api.new_session()
    api.provider.enqueue("Hello.")
    await api.send(parent, "Hi")
    await api.idle(parent)
    await api.v1("PUT", "/rp-mode", {"sessionId": parent, "active": True})
    child = await api.fork(parent)
    view = await mode(api, child)
    assert view["active"] is True
    refused = await api.v1("PUT", "/rp-mode", {"sessionId": child, "active": False}, 409)
    assert refused["code"] == "RP_INHERITED"
    api.provider.enqueue(SyntheticReply.calling(("bash", {})), "never")
    await api.send(child, "Run")
    await api.idle(child)
    assert (await innkeeper_host.get(TOOL_POLICY).effective(child)).sandbox_mode == "read-only"
    alert = (await api.v1("GET", f"/rp-alert?sessionId={parent}"))["alert"]
    assert alert["originSessionId"] == child and alert["sessionId"] == parent
    assert (await api.v1("GET", f"/rp-alert?sessionId={child}"))["alert"] is None


async def test_rp_mode_bad_input(api: TavernApi) -> None:
    session = await api.new_session()
    for body in ({"sessionId": session}, {"sessionId": session, "active": "yes"}, [1]):
        assert (await api.v1("PUT", "/rp-mode", body, 400))["code"] == "RP_MODE_INVALID"
    extra = {"sessionId": session, "active": True, "x": 1}
    assert (await api.v1("PUT", "/rp-mode", extra, 400))["code"] == "RP_MODE_INVALID"
    assert (await api.v1("GET", "/rp-mode?sessionId=missing-1", None, 404))[
        "code"
    ] == "SESSION_NOT_FOUND"
    assert (await api.v1("GET", "/rp-alert", None, 400))["code"] == "RP_MODE_INVALID"


async def test_a_loosened_mode_is_pinned_back_to_read_only_at_once(
    api: TavernApi, innkeeper_host: RunningHost
) -> None:
    session = await api.new_session()
    api.provider.enqueue("Hello.")
    await api.send(session, "Hi")
    await api.idle(session)
    await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": True})
    policy = innkeeper_host.get(TOOL_POLICY)
    loosen = {"sandboxMode": "danger-full-access"}
    # e.g. the chat-bar chip: the host's own route, not the Tavern's
    await api.call("POST", f"/host/api/sessions/{session}/policy", loosen)
    for _ in range(500):  # the re-pin follows the committed event (delivered asynchronously)
        if (await policy.effective(session)).sandbox_mode == "read-only":
            break
        await asyncio.sleep(0.01)
    events = [e["data"] for e in await api.events(session)]
    loosened = events.index({"type": "sandbox/mode", "mode": "danger-full-access"})
    # The very next events are the re-pin (permission/preset + sandbox/mode, one commit).
    assert events[loosened + 1 :] == [
        {"type": "permission/preset", "preset": "custom"},
        {"type": "sandbox/mode", "mode": "read-only"},
    ]
    assert await sandbox_modes(api, session) == ["read-only", "danger-full-access", "read-only"]
    # Every pre-step pins too: a turn adds no event, the mode already is read-only.
    api.provider.enqueue("Fine.")
    await api.send(session, "Again")
    await api.idle(session)
    assert await sandbox_modes(api, session) == ["read-only", "danger-full-access", "read-only"]
    # Leaving restores the mode from before RP, not the loosened one; outside RP a loosened
    # mode stays.
    await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": False})
    assert (await policy.effective(session)).sandbox_mode == "workspace-write"
    await api.call("POST", f"/host/api/sessions/{session}/policy", loosen)
    await asyncio.sleep(0.1)
    assert (await policy.effective(session)).sandbox_mode == "danger-full-access"
