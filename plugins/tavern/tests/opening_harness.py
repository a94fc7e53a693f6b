"""A card with MVU openings for the opening tests (on ``pythonpath`` like
:mod:`play_harness`): ``[initvar]`` ``hp: 100, place: home``; greeting 0 sets hp 90, greeting 1
sets hp 40, greeting 2 has no envelope."""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from typing import Any

from play_harness import Play

V1 = "/pmp-dsh-tavern/api/v1"

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Ada",
        "first_mes": 'Morning.\n<UpdateVariable>_.set("hp", 90);</UpdateVariable>',
        "alternate_greetings": [
            'Night.\n<UpdateVariable>_.set("hp", 40);</UpdateVariable>',
            "Plain.",
        ],
        "character_book": {
            "name": "Ada book",
            "entries": [
                {
                    "keys": [],
                    "content": "hp: 100\nplace: home",
                    "comment": "[initvar] base",
                    "enabled": True,
                    "insertion_order": 100,
                }
            ],
        },
    },
}


async def card(play: Play) -> str:
    imported = await play.resources.import_character(json.dumps(CARD).encode(), "ada.json")
    return imported.record.id


async def snapshot(play: Play, scope: dict[str, Any], status: int = 200) -> Any:
    query = urllib.parse.quote(json.dumps(scope))
    got, body = await play.call_raw("GET", f"/pmp-dsh-tavern/api/v1/mvu/snapshot?scope={query}")
    assert got == status, body
    return body if status != 200 else body["snapshot"]


async def started(play: Play, *, bind: bool = True) -> dict[str, Any]:
    """A materialized draft of the Ada card: ``{playthroughId, sessionId, characterId}``."""
    if bind:
        await play.bind()
    cid = await card(play)
    draft = (await play.v2("POST", "/drafts", {"characterId": cid}, 201))["draft"]
    body = {"expectedRevision": 1, "operationId": "op", "text": "Hello"}
    receipt = await play.v2("POST", f"/drafts/{draft['id']}/materialize", body)
    return {
        "playthroughId": draft["playthroughId"],
        "sessionId": receipt["sessionId"],
        "characterId": cid,
        "requestId": receipt["requestId"],
    }


async def select(play: Play, scope: dict[str, Any], index: int) -> None:
    await play.v1(
        "POST",
        "/character-selection",
        {
            "sessionId": scope["sessionId"],
            "characterCardId": scope["characterId"],
            "character": {"greetingIndex": index},
        },
    )


def base(ids: dict[str, Any], mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "playthroughId": ids["playthroughId"],
        "sessionId": ids["sessionId"],
        "characterId": ids["characterId"],
    }


async def send(play: Play, ids: dict[str, Any], reply: str, request_id: str | None = None) -> None:
    """Send a user message (the draft's reserved ``requestId`` unless another is named) to the
    session, the model answering ``reply``, and wait for the turn to end."""
    play.provider.enqueue(reply)
    message = {"text": "Hello", "requestId": request_id or ids["requestId"]}
    await play.v2("POST", f"/sessions/{ids['sessionId']}/user-message", message, 202)
    await play.idle(ids["sessionId"])


def grant_body(source: str, execution: str = "exec-1") -> dict[str, Any]:
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return {
        "source": source,
        "sourceIdentity": {"version": 1, "sha256": digest, "scope": "card:ada"},
        "executionId": execution,
        "downloaded": True,
        "enabled": True,
    }


async def post(play: Play, path: str, body: Any, status: int = 200) -> Any:
    got, answer = await play.call_raw("POST", V1 + path, body)
    assert got == status, answer
    return answer


def write(binding: dict[str, Any], op: str, revision: int, hp: int) -> dict[str, Any]:
    return {
        "capability": binding["capability"],
        "operation": "patch",
        "value": [{"op": "replace", "path": "/hp", "value": hp}],
        "expectedRevision": revision,
        "operationId": op,
        "cause": "user-interaction",
    }
