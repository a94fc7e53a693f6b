"""RP across restarts, resumes and delegation: a queued change and an unconsumed alert survive a
restart (``rp-state.json``); a resumed, forked or delegated session is in RP and pinned
read-only before it serves a request (`docs/contract/loader.md#rp-overlay`: forks,
resumes and delegated agents use the same initialization boundary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rp_harness import bind, card, mode, open_turn, sandbox_modes, tools_state
from tavern_harness import HostStarter, TavernApi

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.tools import TOOL_POLICY
from innkeeper_tavern.features.rp.durable import RP_STATE_FILE


async def played(api: TavernApi, session: str, text: str = "Hi") -> None:
    api.provider.enqueue("Hello.")
    await api.send(session, text)
    await api.idle(session)


async def first_run(start: HostStarter, data: Path) -> tuple[Any, TavernApi, str]:
    """The first host on ``data`` and a new session in it."""
    host, api = await start(data)
    return host, api, await api.new_session()


async def test_a_queued_change_survives_a_restart_and_commits_at_the_next_boundary(
    start_rp: HostStarter, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    host, api, session = await first_run(start_rp, data)
    await open_turn(api, session)
    queued = await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": True})
    assert queued["outcome"] == "queued"
    saved = json.loads((data / "plugins" / "tavern" / RP_STATE_FILE).read_text())
    assert saved["pending"] == {session: True}
    await host.close()  # the turn never reached its next step

    host, api = await start_rp(data)
    kept = await mode(api, session)
    assert kept["pending"] is True and kept["active"] is True  # a pending "on" already counts
    # The session's next agent (its next prompt, or here resolved directly) commits it first.
    await api.resolve(session)
    view = await mode(api, session)
    assert view["active"] is True and view["pending"] is None and view["source"] == "command"
    assert (await host.get(TOOL_POLICY).effective(session)).sandbox_mode == "read-only"
    saved = json.loads((data / "plugins" / "tavern" / RP_STATE_FILE).read_text())
    assert saved["pending"] == {}


async def test_an_unconsumed_alert_survives_a_restart_until_deleted(
    start_rp: HostStarter, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    host, api, session = await first_run(start_rp, data)
    await played(api, session)
    await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": True})
    api.provider.enqueue(SyntheticReply.calling(("bash", {"command": "ls"})), "never")
    await api.send(session, "Run it")
    await api.idle(session)
    alert = (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"]
    assert alert["tool"] == "bash"
    await host.close()

    host, api = await start_rp(data)
    assert (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"] == alert
    assert (await api.v1("DELETE", f"/rp-alert?sessionId={session}"))["consumed"] is True
    await host.close()

    host, api = await start_rp(data)
    assert (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"] is None


async def test_a_corrupt_state_file_is_moved_aside(start_rp: HostStarter, tmp_path: Path) -> None:
    folder = tmp_path / "data" / "plugins" / "tavern"
    folder.mkdir(parents=True)
    (folder / RP_STATE_FILE).write_text("{not json")
    _, api = await start_rp(tmp_path / "data")
    session = await api.new_session()
    assert (await mode(api, session))["pending"] is None
    assert (folder / (RP_STATE_FILE + ".corrupt")).read_text() == "{not json"


async def test_a_resumed_session_is_pinned_read_only_before_it_serves(
    start_rp: HostStarter, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    host, api, session = await first_run(start_rp, data)
    await bind(api, session, await card(api))  # follows the card: RP
    await played(api, session)
    await host.close()
    # Without the Tavern plugin, something loosens the sandbox of the stored session.
    bare = await start_test_host(data)
    try:
        await bare.get(TOOL_POLICY).set(session, sandbox_mode="danger-full-access")
    finally:
        await bare.close()

    host, api = await start_rp(data)
    await api.resolve(session)  # the resume: agent/created runs before any request
    assert await sandbox_modes(api, session) == ["read-only", "danger-full-access", "read-only"]
    assert (await mode(api, session))["active"] is True
    # And the guard still holds after the resume.
    api.provider.enqueue(SyntheticReply.calling(("note", {})), "never")
    await api.send(session, "Write it down")
    await api.idle(session)
    assert tools_state()["calls"] == []
    assert (await api.v1("GET", f"/rp-alert?sessionId={session}"))["alert"]["tool"] == "note"


async def test_a_delegated_agent_of_an_rp_session_commits_rp_itself(
    api: TavernApi, innkeeper_host: Any
) -> None:
    parent = await api.new_session()
    await played(api, parent)
    await api.v1("PUT", "/rp-mode", {"sessionId": parent, "active": True})
    created = await api.call("POST", "/host/api/sessions", {"delegatedFrom": parent}, 201)
    child = created["session"]["id"]
    await api.resolve(child)
    view = await mode(api, child)
    assert view["active"] is True and view["inheritedFrom"] == parent
    assert view["source"] == "command"  # its own rp, committed at its creation
    assert (await innkeeper_host.get(TOOL_POLICY).effective(child)).sandbox_mode == "read-only"
    refused = await api.v1("PUT", "/rp-mode", {"sessionId": child, "active": False}, 409)
    assert refused["code"] == "RP_INHERITED"


async def test_a_failed_state_write_changes_nothing(
    api: TavernApi, innkeeper_host: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    from innkeeper_tavern.features.rp import durable

    session = await api.new_session()
    state = await open_turn(api, session)

    def broken(path: Path, data: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(durable, "atomic_write", broken)
    refused = await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": True}, 500)
    assert refused["code"] == "RP_STATE_WRITE_FAILED"
    assert (await mode(api, session))["pending"] is None  # nothing was queued
    answer = await api.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "/rp"})
    assert answer["command"]["kind"] == "error"
    monkeypatch.undo()
    queued = await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": True})
    assert queued["outcome"] == "queued"
    state["gate"].set()
    await api.idle(session)
    assert (await mode(api, session))["pending"] is None
