"""Exactly-once application across host restarts (stop the host, start another on its data)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from innkeeper_hostapi.agents import AGENTS

from .conftest import PLUGIN_ID, Mvu

Start = Callable[..., Awaitable[tuple[Any, Mvu]]]


async def test_applied_replies_survive_restarts_and_apply_once(
    start_host: Start, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    host, mvu = await start_host(data)
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.add('gold', 10);")
    assert (await mvu.stat(session))["gold"] == 15
    await host.close()

    # Restart: the agent is restored (agent/created, resumed) and the log rescanned.
    host, mvu = await start_host(data)
    await host.get(AGENTS).resolve_agent(session)
    state = await mvu.state(session)
    assert (state["content"]["stat_data"]["gold"], state["revision"]) == (15, 2)
    # A turn completes while the MVU plugin is not loaded: nothing sees its turn/ended.
    await host.unload(PLUGIN_ID)
    mvu.provider.enqueue("_.add('gold', 100);")
    await mvu.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "x"}, 202)
    await host.get(AGENTS).wait_idle(session)
    await host.close()

    # Next start: the missed reply is applied once, from the durable log.
    host, mvu = await start_host(data)
    await host.get(AGENTS).resolve_agent(session)
    state = await mvu.state(session)
    assert (state["content"]["stat_data"]["gold"], state["revision"]) == (115, 3)
    await mvu.turn(session, "_.add('gold', 1);")
    await host.close()

    # And never again, however often the host restarts.
    for _ in range(2):
        host, mvu = await start_host(data)
        await host.get(AGENTS).resolve_agent(session)
        await mvu.service.reconcile(session)
        state = await mvu.state(session)
        assert (state["content"]["stat_data"]["gold"], state["revision"]) == (116, 4)
        applied = mvu.service.document.applied[session]
        assert [a.outcome for a in applied.values()] == ["applied"] * 3
        await host.close()
