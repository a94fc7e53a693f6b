"""``captureSessionLease``: writes and seed operations need a lease, and a session that changes
between the capture and the atomic commit writes nothing (docs/mvu.md "Session leases")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from innkeeper_hostapi.agents import SESSIONS
from innkeeper_hostapi.mvu import MvuServiceError
from innkeeper_hostapi.sessions import ExtensionEvent
from innkeeper_tavern.features.mvu_service.leases import HostSessionLeases, SessionLease

from .conftest import Mvu


def _scope(session: str) -> dict[str, Any]:
    return {"authority": "local", "sessionId": session}


async def _edit(mvu: Mvu, session: str, hp: int, op: str) -> dict[str, Any]:
    state = await mvu.state(session)
    content = {**state["content"], "stat_data": {**state["content"]["stat_data"], "hp": hp}}
    return await mvu.service.update(
        id=state["id"],
        content=content,
        expected_revision=state["revision"],
        operation_id=op,
        scope=_scope(session),
    )


async def test_without_a_lease_source_writes_and_seeds_are_denied(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.set('hp', 90);")
    before = await mvu.state(session)
    service = mvu.service
    source = service.capture_session_lease
    service.capture_session_lease = None
    try:
        with pytest.raises(MvuServiceError) as caught:
            await _edit(mvu, session, 1, "no-lease")
        assert (caught.value.code, caught.value.status) == ("MVU_SESSION_LEASE_UNAVAILABLE", 409)
        with pytest.raises(MvuServiceError) as caught:
            await service.capture_session_seed(session_id=session, kind="fork", at_event_id=1)
        assert caught.value.code == "MVU_SESSION_LEASE_UNAVAILABLE"
        with pytest.raises(MvuServiceError) as caught:
            await service.install_session_seed(ticket="mvu-seed-x", session_id=session)
        assert caught.value.code == "MVU_SESSION_LEASE_UNAVAILABLE"
    finally:
        service.capture_session_lease = source
    assert await mvu.state(session) == before
    assert (await _edit(mvu, session, 2, "with-lease"))["receipt"]["changed"] is True


async def test_an_event_after_the_capture_expires_the_lease_and_nothing_is_written(
    mvu: Mvu,
) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.set('hp', 90);")
    before = await mvu.state(session)
    service = mvu.service
    source = service.capture_session_lease
    assert source is not None
    sessions = mvu.host.get(SESSIONS)

    async def racing(session_id: str, *, restore: bool = True) -> SessionLease | None:
        lease = await source(session_id, restore=restore)
        assert lease is not None and lease.valid()
        # Another writer commits an event to the session while the write is under way.
        await sessions.append(session_id, ExtensionEvent(name="test:other-writer"))
        for _ in range(100):  # session/events-committed is delivered asynchronously
            if not lease.valid():
                break
            await asyncio.sleep(0.01)
        return lease

    service.capture_session_lease = racing
    try:
        with pytest.raises(MvuServiceError) as caught:
            await _edit(mvu, session, 1, "raced")
        assert (caught.value.code, caught.value.status) == ("MVU_SESSION_LEASE_EXPIRED", 409)
    finally:
        service.capture_session_lease = source
    after = await mvu.state(session)
    assert after["revision"] == before["revision"]
    assert after["content"] == before["content"]
    # The same operation retried with a fresh lease commits.
    assert (await _edit(mvu, session, 1, "raced"))["receipt"]["changed"] is True


class _Agents:
    def __init__(self) -> None:
        self.running = False
        self.resolved: list[str] = []

    async def resolve_agent(self, session_id: str) -> None:
        self.resolved.append(session_id)

    def is_running(self, session_id: str) -> bool:
        return self.running


async def test_the_lease_binds_the_live_services_and_the_running_turn(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    controller = mvu.host.get(SESSIONS)
    agents = _Agents()
    current: dict[str, Any] = {"sessions": controller, "agents": agents}
    leases = HostSessionLeases(lambda: current["sessions"], lambda: current["agents"])
    lease = await leases.capture(session)
    assert lease is not None and lease.valid() and agents.resolved == [session]
    assert lease.header.id == session and len(lease.digest) == 64
    agents.running = True
    assert not lease.valid()
    agents.running = False
    current["agents"] = _Agents()  # a replaced agent service (a host reload)
    assert not lease.valid()
    current["agents"] = agents
    assert lease.valid()
    cold = await leases.capture(session, restore=False)
    assert cold is not None and agents.resolved == [session]
    assert await leases.capture("no-such-session") is None
    leases.close()
    assert not lease.valid() and not cold.valid()
