"""Forks, reply swipes and request retries get their own instance from the right baseline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.mvu import MvuServiceError

from .conftest import Mvu


def _scope(session: str) -> dict[str, Any]:
    return {"authority": "local", "sessionId": session}


def _seqs(events: list[dict[str, Any]], kind: str) -> list[int]:
    return [e["seq"] for e in events if e["data"]["type"] == kind]


async def test_fork_is_seeded_at_its_cut_never_from_later_parent_state(mvu: Mvu) -> None:
    card = await mvu.card()
    parent = await mvu.new_session(card)
    await mvu.turn(parent, "_.set('hp', 90);")
    cut = (await mvu.events(parent))[-1]["seq"]
    child = await mvu.fork(parent, cut)
    # The parent moves on before the child is ever used.
    await mvu.turn(parent, "_.set('hp', 80);")
    assert (await mvu.stat(parent))["hp"] == 80
    child_state = await mvu.state(child)
    assert child_state["content"]["stat_data"]["hp"] == 90
    assert child_state["id"] != (await mvu.state(parent))["id"]
    assert child_state["inheritedFrom"]["revision"] == 2
    # The child's own turns change only the child; inherited replies are never re-applied.
    await mvu.turn(child, "_.add('hp', 5);")
    assert (await mvu.stat(child))["hp"] == 95
    assert (await mvu.stat(parent))["hp"] == 80
    history = (await mvu.get("/mvu/history", id=child_state["id"], scope=_scope(child)))["history"]
    assert [(h["kind"], h["inherited"]) for h in history] == [
        ("initial", True),
        ("reply", True),
        ("seed", False),
        ("reply", False),
    ]
    # A nested fork cut inside the inherited prefix sees the state at that older cut.
    first_turn_start = _seqs(await mvu.events(child), "turn/start")[0]
    grandchild = await mvu.fork(child, first_turn_start - 1)
    assert (await mvu.stat(grandchild))["hp"] == 100


async def test_fork_before_any_reply_starts_from_the_opening(mvu: Mvu) -> None:
    card = await mvu.card(first_message="<UpdateVariable>_.set('mood', 'open');</UpdateVariable>")
    parent = await mvu.new_session(card)
    await mvu.stat(parent)
    await mvu.turn(parent, "_.set('mood', 'later');")
    child = await mvu.fork(parent, _seqs(await mvu.events(parent), "turn/start")[0] - 1)
    assert (await mvu.stat(child))["mood"] == "open"


async def test_reply_swipe_uses_the_pre_turn_checkpoint(mvu: Mvu) -> None:
    card = await mvu.card()
    source = await mvu.new_session(card)
    await mvu.turn(source, "_.set('hp', 90);")
    await mvu.turn(source, "_.set('hp', 80);")
    events = await mvu.events(source)
    first_reply, second_reply = _seqs(events, "assistant/message")
    prefix_end = _seqs(events, "turn/start")[1] - 1
    service = mvu.service
    # A later swipe of reply 2: history forks before turn 2, state is turn 2's checkpoint.
    ticket = await service.capture_session_seed(
        session_id=source,
        kind="reply-swipe",
        at_event_id=second_reply,
        prefix_end_event_id=prefix_end,
    )
    assert ticket is not None
    swipe = await mvu.fork(source, prefix_end)
    installed = await service.install_session_seed(ticket=ticket, session_id=swipe)
    assert installed["content"]["stat_data"]["hp"] == 90
    assert await service.install_session_seed(ticket=ticket, session_id=swipe) == installed
    other = await mvu.fork(source, prefix_end)
    with pytest.raises(MvuServiceError) as info:
        await service.install_session_seed(ticket=ticket, session_id=other)
    assert info.value.code == "MVU_SEED_CONFLICT"
    edited = await mvu.state(swipe)
    await mvu.service.update(
        id=edited["id"],
        content={**edited["content"], "stat_data": {"hp": 85}},
        expected_revision=edited["revision"],
        operation_id="swipe-edit",
        scope=_scope(swipe),
    )
    assert (await mvu.stat(swipe))["hp"] == 85
    assert (await mvu.stat(source))["hp"] == 80
    # A root swipe of reply 1: a preassigned empty session, seeded with the opening state.
    target = await mvu.new_session()
    ticket = await service.capture_session_seed(
        session_id=source, kind="reply-swipe", at_event_id=first_reply, target_session_id=target
    )
    assert ticket is not None
    await mvu.select(target, card)
    blocked = await mvu.get("/mvu/resources", 409, scope=_scope(target))
    assert blocked["code"] == "MVU_SEED_PENDING"
    await service.install_session_seed(ticket=ticket, session_id=target)
    assert (await mvu.stat(target))["hp"] == 100
    # Later parent edits never reach a captured seed.
    assert (await mvu.stat(source))["hp"] == 80


async def test_request_retry_uses_the_aborted_turns_checkpoint(mvu: Mvu) -> None:
    card = await mvu.card()
    source = await mvu.new_session(card)
    await mvu.turn(source, "_.set('hp', 90);")
    mvu.provider.enqueue(SyntheticReply(text="_.set('hp', 1); and more", delay_s=5.0))
    await mvu.call("POST", f"/host/api/sessions/{source}/prompt", {"text": "again"}, 202)
    agents = mvu.host.get(AGENTS)
    for _ in range(200):
        if "2" in mvu.service.document.checkpoints.get(source, {}):
            break
        await asyncio.sleep(0.01)
    await mvu.call("POST", f"/host/api/sessions/{source}/cancel", None, 200)
    await agents.wait_idle(source)
    assert (await mvu.stat(source))["hp"] == 90  # an interrupted turn never applies
    await mvu.turn(source, "_.set('hp', 70);")
    events = await mvu.events(source)
    user_events = [
        e["seq"]
        for e in events
        if e["data"]["type"] == "user/message" and e["data"].get("turn") == 2
    ]
    target = await mvu.new_session(card)
    ticket = await mvu.service.capture_session_seed(
        session_id=source,
        kind="request-retry",
        at_event_id=user_events[0],
        target_session_id=target,
    )
    assert ticket is not None
    installed = await mvu.service.install_session_seed(ticket=ticket, session_id=target)
    assert installed["content"]["stat_data"]["hp"] == 90
    with pytest.raises(MvuServiceError) as info:
        await mvu.service.capture_session_seed(
            session_id=source, kind="request-retry", at_event_id=1, target_session_id=target
        )
    assert info.value.code == "MVU_SEED_EVIDENCE_MISSING"
