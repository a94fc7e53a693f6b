"""Swipes freeze MVU state through stateSource: a branch swipe and a root reply swipe start from
the replaced turn's pre-turn checkpoint, not from the source's later state."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from play_harness import MVU_CARD as CARD
from play_harness import Play


async def hp(play: Play, session_id: str) -> Any:
    scope = urllib.parse.quote(json.dumps({"authority": "local", "sessionId": session_id}))
    listed = await play.v1("GET", f"/mvu/resources?scope={scope}")
    rid = urllib.parse.quote(listed["resources"][0]["id"])
    record = await play.v1("GET", f"/mvu/resource?id={rid}&scope={scope}")
    return record["resource"]["content"]["stat_data"]["hp"]


async def turn(play: Play, session_id: str, reply: str) -> None:
    play.provider.enqueue(reply)
    await play.v2("POST", f"/sessions/{session_id}/user-message", {"text": "Hi"}, 202)
    await play.idle(session_id)


async def test_swipes_start_from_the_pre_turn_state(play: Play) -> None:
    await play.bind()
    card = (await play.resources.import_character(json.dumps(CARD).encode(), "ada.json")).record.id
    root = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": root, "characterCardId": card})
    await turn(play, root, "_.set('hp', 90);")
    await turn(play, root, "_.set('hp', 80);")
    assert await hp(play, root) == 80
    events = await play.events(root)
    replies = [e["seq"] for e in events if e["data"]["type"] == "assistant/message"]
    second_start = [e["seq"] for e in events if e["data"]["type"] == "turn/start"][1]
    # A swipe of reply 2 in a branch: history cut before turn 2, state from its checkpoint.
    swipe = (
        await play.v2(
            "POST",
            f"/sessions/{root}/branch",
            {
                "atEventId": second_start - 1,
                "stateSource": {"sessionId": root, "beforeReplyEventId": replies[1]},
            },
            201,
        )
    )["sessionId"]
    assert await hp(play, swipe) == 90
    # A root swipe of reply 1: a new session whose state is the opening one.
    rooted = (
        await play.v2(
            "POST",
            "/sessions",
            {
                "selectionFromSessionId": root,
                "stateSource": {"sessionId": root, "beforeReplyEventId": replies[0]},
            },
            201,
        )
    )["sessionId"]
    assert await hp(play, rooted) == 100
    assert await hp(play, root) == 80
    # A reply id that is not a reply is refused with the MVU code and changes nothing.
    status, body = await play.raw(
        "POST",
        f"/sessions/{root}/branch",
        {"atEventId": 1, "stateSource": {"sessionId": root, "beforeReplyEventId": second_start}},
    )
    assert (status, body["code"]) == (409, "MVU_SEED_EVIDENCE_MISSING")
