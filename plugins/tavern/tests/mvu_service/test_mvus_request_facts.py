"""``dsh-request-observed`` needs the recorded request to carry the placed text.

The positive case (a strategy's ``tavern.mvu/state`` placement observed in the sent request) is
plugins/assembler/tests/test_asm_mvu_source.py; here the two ways it must not be claimed.
"""

from __future__ import annotations

from typing import Any

from .conftest import Mvu


async def test_no_observation_without_the_text_or_without_an_attempt(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "Fine.")  # turn 1: a provider attempt, no system message
    state = await mvu.state(session)
    service = mvu.service
    seen: list[dict[str, Any]] = []
    dispose = service.observe(seen.append)
    # Turn 1 was sent, but its request never carried this text.
    await service.note_request_injection(session, 1, state["id"], 1, "Hi there")
    await service.observe_requests(session, 1)
    # Turn 9 has no recorded provider attempt at all.
    await service.note_request_injection(session, 9, state["id"], 1, "Fine.")
    await service.observe_requests(session, 9)
    dispose()
    assert [(f["turn"], f["phase"], f["detail"]) for f in seen] == [
        (1, "triggered", "before_model_request"),
        (9, "triggered", "before_model_request"),
    ]
    assert all("Hi there" not in str(f) for f in seen)  # facts are body-free
    scope = {"authority": "local", "sessionId": session}
    facts = (await mvu.get("/mvu/facts", id=state["id"], scope=scope))["facts"]
    assert not any(f.get("detail") == "dsh-request-observed" for f in facts)
