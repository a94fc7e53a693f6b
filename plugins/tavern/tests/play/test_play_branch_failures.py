"""The branch's two 502s: ``PLAY_BRANCH_INPUT_RESET_FAILED`` (the fork holds more than the
inherited prefix) and ``PLAY_BRANCH_COPY_FAILED`` (a binding copy failed). Either way nothing
Tavern-side refers to the forked host session afterwards, and the timeline is untouched."""

from __future__ import annotations

import json
from typing import Any

from play_harness import Play

from innkeeper_hostapi.agents import SESSIONS
from innkeeper_hostapi.sessions import (
    InboxItem,
    InboxSpliced,
    SessionController,
    SessionHeader,
    text_content,
)
from innkeeper_tavern.features.play import TAVERN_PLAY

TIMELINE = "ada/p1/timeline.json"
CONTEXT = "ada/p1/import-context.json"


async def setup(play: Play) -> tuple[str, int, str]:
    """A session with a card and a pending import context, and a timeline naming it:
    ``(sessionId, lastSeq, timeline bytes)``."""
    await play.bind()
    card = await play.character("Ada")
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": sid, "characterCardId": card})
    await play.write(CONTEXT, json.dumps({"schemaVersion": 1, "qa": []}))
    ref = {"reference": {"path": CONTEXT}}
    await play.v2("PUT", f"/sessions/{sid}/import-context", ref)
    timeline = json.dumps({"nodes": []})
    await play.write(TIMELINE, timeline, expectedRevision=None)
    last = (await play.host.get(SESSIONS).inspect(sid)).last_seq
    return sid, last, timeline


async def session_ids(play: Play) -> set[str]:
    listed = await play.host.get(SESSIONS).list(limit=100)
    return {s.header.id for s in listed.sessions}


async def assert_unreferenced(play: Play, child: str, timeline: str) -> None:
    """The failed branch's host session has no selection and no import-context binding, and
    the timeline still holds its old bytes."""
    services = play.host.get(TAVERN_PLAY)
    assert services.sessions.selections.stored(child) is None
    assert (await play.v2("GET", f"/sessions/{child}/import-context"))["binding"] is None
    assert (await play.read(TIMELINE))["content"] == timeline


class LeakyForks:
    """A session controller whose forks keep one queued input (the seam the branch checks)."""

    def __init__(self, real: SessionController) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def fork(self, session_id: str, at_event_id: int) -> SessionHeader:
        child = await self.real.fork(session_id, at_event_id)
        item = InboxItem(id="leaked", content=text_content("queued before the fork"))
        await self.real.append(
            child.id, InboxSpliced(op="insert", target="next-turn", start=0, inserted=(item,))
        )
        return child


async def test_input_reset_failure_is_502_and_leaves_nothing(play: Play) -> None:
    sid, last, timeline = await setup(play)
    before = await session_ids(play)
    services = play.host.get(TAVERN_PLAY)
    real = services.sessions.host_sessions
    leaky = LeakyForks(play.host.get(SESSIONS))
    services.sessions.host_sessions = lambda: leaky  # type: ignore[assignment,return-value]
    try:
        status, body = await play.raw("POST", f"/sessions/{sid}/branch", {"atEventId": last})
    finally:
        services.sessions.host_sessions = real
    assert (status, body["code"]) == (502, "PLAY_BRANCH_INPUT_RESET_FAILED")
    (child,) = await session_ids(play) - before
    await assert_unreferenced(play, child, timeline)


async def test_copy_failure_is_502_and_rolls_the_copies_back(play: Play) -> None:
    sid, last, timeline = await setup(play)
    services = play.host.get(TAVERN_PLAY)

    async def failing(parent: str, child: str, at: int) -> None:
        raise OSError("disk full")

    services.sessions.branch_copiers.append(failing)  # after the import-lineage copier
    before = await session_ids(play)
    try:
        status, body = await play.raw("POST", f"/sessions/{sid}/branch", {"atEventId": last})
    finally:
        services.sessions.branch_copiers.remove(failing)
    assert (status, body["code"]) == (502, "PLAY_BRANCH_COPY_FAILED")
    (child,) = await session_ids(play) - before
    await assert_unreferenced(play, child, timeline)

    # Without the failure the same branch copies both (so the checks above can fail).
    ok = await play.v2("POST", f"/sessions/{sid}/branch", {"atEventId": last}, 201)
    assert services.sessions.selections.stored(ok["sessionId"]) is not None
    copied = await play.v2("GET", f"/sessions/{ok['sessionId']}/import-context")
    assert copied["binding"] is not None
