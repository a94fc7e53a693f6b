"""Message scopes bound to the durable timeline (docs/contract/mvu-cards.md#bubble-binding) and
card bindings of the active timeline head's message (docs/contract/mvu-cards.md#card-variables):
made-up playthrough/node/variant ids are refused, message scopes carry no greeting identity,
historic or superseded messages stay read-only, and a binding expires when the head moves."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any

from opening_harness import V1, grant_body, post, select, send, started, write
from play_harness import Play

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.agents import SESSIONS


async def message_snapshot(play: Play, scope: dict[str, Any], status: int = 200) -> Any:
    query = urllib.parse.quote(json.dumps(scope))
    got, body = await play.call_raw("GET", f"{V1}/mvu/snapshot?scope={query}")
    assert got == status, body
    return body if status != 200 else body["snapshot"]


async def replies(play: Play, session_id: str) -> list[tuple[int, int]]:
    """``(user seq, assistant seq)`` of each exchange, oldest first."""
    messages = (await play.v2("GET", f"/sessions/{session_id}/messages"))["messages"]
    users = [m["seq"] for m in messages if m["role"] == "user"]
    answers = [m["seq"] for m in messages if m["role"] == "assistant"]
    return list(zip(users, answers, strict=True))


async def set_timeline(play: Play, ids: dict[str, Any], **head: Any) -> dict[str, Any]:
    """One node per exchange of the root session (``n1``/``v1``, ``n2``/``v2``…), optionally
    with an explicit ``head``; answers the node → variant scope data."""
    path = f"openings/{ids['playthroughId']}/timeline.json"  # where the draft created it
    current = await play.read(path)
    nodes = []
    scopes: dict[str, Any] = {}
    parent = None
    for n, (user, reply) in enumerate(await replies(play, ids["sessionId"]), start=1):
        variant = {
            "id": f"v{n}",
            "sessionId": ids["sessionId"],
            "startEventId": user,
            "endEventId": reply,
        }
        nodes.append(
            {
                "id": f"n{n}",
                "kind": "qa",
                "parentVariantId": parent,
                "adoptedVariantId": f"v{n}",
                "variants": [variant],
            }
        )
        parent = f"v{n}"
        scopes[f"n{n}"] = {
            "playthroughId": ids["playthroughId"],
            "sessionId": ids["sessionId"],
            "nodeId": f"n{n}",
            "variantId": f"v{n}",
            "endEventId": reply,
        }
    doc: dict[str, Any] = {"nodes": nodes, "ext": {}}
    if head:
        doc["head"] = head
    await play.write(path, json.dumps(doc), expectedRevision=current["revision"])
    return scopes


async def test_message_scopes_are_bound_to_the_durable_timeline(play: Play) -> None:
    ids = await started(play)
    await send(play, ids, "_.set('hp', 10);")
    scope = (await set_timeline(play, ids))["n1"]
    good = await message_snapshot(play, scope)
    assert good["variables"]["stat_data"]["hp"] == 10
    stranger = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({**scope, "playthroughId": "made-up"}, 404, "PLAY_PLAYTHROUGH_NOT_FOUND"),
        ({**scope, "nodeId": "n9"}, 403, "MVU_MEMBERSHIP_DENIED"),
        ({**scope, "variantId": "v9"}, 403, "MVU_MEMBERSHIP_DENIED"),
        ({**scope, "sessionId": stranger}, 403, "MVU_MEMBERSHIP_DENIED"),
        ({**scope, "endEventId": scope["endEventId"] + 1}, 409, "MVU_COORDINATES_MISMATCH"),
        ({k: v for k, v in scope.items() if k != "variantId"}, 400, "MVU_SCOPE_INVALID"),
        ({**scope, "greetingIndex": 0}, 400, "MVU_SCOPE_INVALID"),
        ({**scope, "selectionToken": "x" * 48}, 400, "MVU_SCOPE_INVALID"),
    ]
    for bad, status, code in cases:
        assert (await message_snapshot(play, bad, status))["code"] == code, bad
    # A native coordinate without timeline ids keeps working (sessions outside a playthrough).
    native = {"sessionId": scope["sessionId"], "endEventId": scope["endEventId"]}
    assert (await message_snapshot(play, native))["revision"] == good["revision"]


async def bind(play: Play, scope: dict[str, Any], status: int = 200) -> Any:
    grant = await post(play, "/rendering-write-grants", grant_body('{"bundle":1}'))
    body = {"scope": scope, "grantId": grant["grantId"], "sourceIdentity": grant["sourceIdentity"]}
    return await post(play, "/mvu/card-binding", body, status)


async def test_the_head_message_is_writable_until_the_head_moves(play: Play) -> None:
    ids = await started(play)
    await send(play, ids, "_.set('hp', 10);")
    scope = (await set_timeline(play, ids))["n1"]
    binding = await bind(play, scope)
    assert binding["resourceId"] and binding["currentRevision"] >= binding["revision"]
    revision = binding["currentRevision"]
    done = await post(play, "/mvu/card-write", write(binding, "w1", revision, 33))
    assert done["receipt"]["changed"] is True
    local = urllib.parse.quote(json.dumps({"authority": "local", "sessionId": ids["sessionId"]}))
    rid = urllib.parse.quote(binding["resourceId"])
    history = (await play.v1("GET", f"/mvu/history?id={rid}&scope={local}"))["history"]
    source = history[-1]["source"]
    assert source["cause"] == "user-interaction" and "initial" not in source
    assert source["endEventId"] == scope["endEventId"]

    # A new reply: the binding is stale, and the old message is historic (read-only) even
    # before the timeline names the new one.
    await send(play, ids, "_.set('hp', 5);", "second")
    stale = await post(play, "/mvu/card-write", write(binding, "w2", revision + 1, 1), 409)
    assert stale["code"] == "CARD_BINDING_STALE"
    assert (await bind(play, scope, 409))["code"] == "CARD_MESSAGE_READ_ONLY"
    scopes = await set_timeline(play, ids)
    assert (await bind(play, scopes["n1"], 409))["code"] == "CARD_MESSAGE_READ_ONLY"
    head = await bind(play, scopes["n2"])
    # Moving the head (a timeline write) expires the head's binding.
    await set_timeline(play, ids, sessionId=ids["sessionId"], nodeId="n1", variantId="v1")
    current = head["currentRevision"]
    moved = await post(play, "/mvu/card-write", write(head, "w3", current, 2), 409)
    assert moved["code"] == "CARD_BINDING_STALE"
    # The explicit head now names n1, but n1 is no longer the session's latest reply.
    assert (await bind(play, scopes["n1"], 409))["code"] == "CARD_MESSAGE_READ_ONLY"
    assert (await bind(play, scopes["n2"], 409))["code"] == "CARD_MESSAGE_READ_ONLY"


async def test_message_bindings_refuse_made_up_ids_and_greeting_identity(play: Play) -> None:
    ids = await started(play)
    await send(play, ids, "_.set('hp', 10);")
    scope = (await set_timeline(play, ids))["n1"]
    assert (await bind(play, {**scope, "nodeId": "nope"}, 403))["code"] == ("MVU_MEMBERSHIP_DENIED")
    assert (await bind(play, {**scope, "greetingIndex": 0}, 400))["code"] == "MVU_SCOPE_INVALID"
    await select(play, ids, 1)  # a selection change after binding expires it
    binding = await bind(play, scope)
    await select(play, ids, 0)
    stale = await post(
        play, "/mvu/card-write", write(binding, "w", binding["currentRevision"], 1), 409
    )
    assert stale["code"] == "CARD_BINDING_STALE"


async def test_a_running_message_is_read_only(play: Play) -> None:
    ids = await started(play)
    await send(play, ids, "_.set('hp', 10);")
    scope = (await set_timeline(play, ids))["n1"]
    play.provider.enqueue(SyntheticReply(text="slow reply", chunks=["slow ", "reply"], delay_s=0.3))
    message = {"text": "Again", "requestId": "running"}
    await play.v2("POST", f"/sessions/{ids['sessionId']}/user-message", message, 202)
    sessions = play.host.get(SESSIONS)
    for _ in range(100):  # until the turn is open
        if (await sessions.inspect(ids["sessionId"])).turn_open:
            break
        await asyncio.sleep(0.01)
    running = await bind(play, scope, 409)
    assert running["code"] == "CARD_MESSAGE_READ_ONLY" and "running" in running["error"]
    await play.idle(ids["sessionId"])
