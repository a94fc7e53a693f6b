"""The ``tavern.mvu/state`` request source, placed by a strategy that selects it."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from aiohttp import ClientResponse

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.assembly import Module, Strategy
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.features.prompt_sources.mvu_state import UPDATE_INSTRUCTIONS

from .conftest import Api

V1 = "/pmp-dsh-tavern/api/v1"

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Ada",
        "first_mes": "Welcome.",
        "character_book": {
            "entries": [
                {
                    "keys": [],
                    "content": "hp: 100\nmood: calm",
                    "comment": "[initvar] base",
                    "enabled": True,
                    "insertion_order": 100,
                }
            ]
        },
    },
}


async def _session_with_card(api: Api, host: RunningHost) -> str:
    resp: ClientResponse = await host.client.post(
        V1 + "/characters/import?filename=ada.json",
        data=json.dumps(CARD).encode(),
        headers={"Origin": host.origin, "Content-Type": "application/json"},
    )
    assert resp.status == 201, await resp.text()
    card = (await resp.json())["character"]["id"]
    session = await api.new_session()
    await api.call(
        "POST", V1 + "/character-selection", {"sessionId": session, "characterCardId": card}
    )
    return session


async def test_selected_mvu_source_sends_the_sessions_state(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    with_state = await _session_with_card(api, innkeeper_host)
    without = await _session_with_card(api, innkeeper_host)
    await api.use(
        with_state,
        Strategy(
            id="with-mvu",
            name="with MVU",
            backend="standard",
            modules=(Module(source="tavern.profile"), Module(source="tavern.mvu/state")),
        ),
    )
    await api.use(
        without,
        Strategy(
            id="profile-only",
            name="profile only",
            backend="standard",
            modules=(Module(source="tavern.profile"),),
        ),
    )
    api.provider.enqueue(SyntheticReply.with_mvu("You feel better.", {"hp": 120}))
    await api.turn(with_state, "I drink the potion.")
    first = api.provider.requests[-1].messages[0].content
    assert (
        "Current variables (stat_data, YAML):\nhp: 100\nmood: calm\n\n" + UPDATE_INSTRUCTIONS
    ) in first
    await api.turn(with_state, "How am I?")
    second = api.provider.requests[-1].messages[0].content
    assert (
        "Current variables (stat_data, YAML):\nhp: 120\nmood: calm\n\n" + UPDATE_INSTRUCTIONS
    ) in second

    facts = await _model_request_facts(api, with_state)
    assert [(f["turn"], f["phase"], f["detail"]) for f in facts] == [
        (1, "triggered", "before_model_request"),
        (1, "applied", "dsh-request-observed"),
        (2, "triggered", "before_model_request"),
        (2, "applied", "dsh-request-observed"),
    ]
    # Each fact names the revision the request carried: turn 2 sent the state turn 1 wrote.
    assert facts[0]["revision"] < facts[2]["revision"] == facts[3]["revision"]

    await api.turn(without, "Hello")  # not selected: nothing of the state is sent
    assert "mood: calm" not in api.provider.requests[-1].messages[0].content
    assert "<UpdateVariable>" not in api.provider.requests[-1].messages[0].content
    assert await _model_request_facts(api, without) == []


async def _model_request_facts(api: Api, session: str) -> list[dict[str, Any]]:
    scope = json.dumps({"authority": "local", "sessionId": session})
    resources = await api.call("GET", V1 + "/mvu/resources?" + urlencode({"scope": scope}))
    (resource,) = resources["resources"]
    query = urlencode({"id": resource["id"], "scope": scope})
    facts = (await api.call("GET", V1 + "/mvu/facts?" + query))["facts"]
    return [f for f in facts if f.get("turnKind") == "model-request"]
