"""The v1 MVU primitives over HTTP, with the real Tavern plugin: a whole turn end to end."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from tavern_harness import V1

from innkeeper_core.providers.synthetic import SyntheticProvider, SyntheticReply
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.testing import RunningHost

from .conftest import Mvu, card_json


async def _call(host: RunningHost, method: str, path: str, status: int, **kw: Any) -> Any:
    headers = {"Origin": host.origin} if method != "GET" else {}
    headers.update(kw.pop("headers", {}))
    resp = await host.client.request(method, path, headers=headers, **kw)
    data = await resp.json()
    assert resp.status == status, data
    return data


def _q(**params: Any) -> str:
    return urlencode({k: json.dumps(v) if isinstance(v, dict) else v for k, v in params.items()})


async def test_whole_turn_over_http_with_the_tavern_plugin(innkeeper_host: RunningHost) -> None:
    host = innkeeper_host
    await host.load("tavern", "innkeeper_tavern.plugin")
    imported = await _call(
        host,
        "POST",
        V1 + "/characters/import",
        201,
        data=card_json(name="Bea"),
        headers={"Content-Type": "application/json"},
    )
    card = imported["character"]["id"]
    session = (await _call(host, "POST", "/host/api/sessions", 201, json={"title": "t"}))[
        "session"
    ]["id"]
    await _call(
        host,
        "POST",
        V1 + "/character-selection",
        200,
        json={"sessionId": session, "characterCardId": card},
    )
    provider = host.get(PROVIDER)
    assert isinstance(provider, SyntheticProvider)
    provider.enqueue(SyntheticReply.with_mvu("Bea nods.", {"hp": 64, "mood": "glad"}))
    await _call(host, "POST", f"/host/api/sessions/{session}/prompt", 202, json={"text": "Hi"})
    await host.get(AGENTS).wait_idle(session)

    scope = {"authority": "local", "sessionId": session}
    listed = await _call(host, "GET", V1 + "/mvu/resources?" + _q(scope=scope), 200)
    (summary,) = listed["resources"]
    assert "content" not in summary and summary["type"] == "mvu-state"
    record = (
        await _call(host, "GET", V1 + "/mvu/resource?" + _q(id=summary["id"], scope=scope), 200)
    )["resource"]
    assert record["content"]["stat_data"]["hp"] == 64
    assert record["content"]["stat_data"]["mood"] == "glad"
    assert record["revision"] == 2 and record["name"] == "Bea"
    # An edit through POST /mvu/update, then the history shows all three versions.
    content = {**record["content"], "stat_data": {**record["content"]["stat_data"], "hp": 65}}
    body = {
        "id": record["id"],
        "scope": scope,
        "content": content,
        "expectedRevision": 2,
        "operationId": "ui-1",
    }
    updated = await _call(host, "POST", V1 + "/mvu/update", 200, json=body)
    assert updated["receipt"]["revision"] == 3
    history = await _call(host, "GET", V1 + "/mvu/history?" + _q(id=record["id"], scope=scope), 200)
    assert [h["stat_data"]["hp"] for h in history["history"]] == [100, 64, 65]
    await host.unload("tavern")


async def test_http_errors_use_the_spec_shape(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state = await mvu.state(session)
    assert (await mvu.v1("GET", "/mvu/resource?id=x", status=400))["code"] == "MVU_SCOPE_INVALID"
    bad_json = await mvu.v1("GET", "/mvu/resource?id=x&scope=%7Bnope", status=400)
    assert bad_json["code"] == "MVU_SCOPE_INVALID"
    no_session = await mvu.get("/mvu/history", 400, id=state["id"], scope={"authority": "local"})
    assert no_session["code"] == "MVU_SCOPE_INVALID"
    historical = await mvu.get(
        "/mvu/facts",
        400,
        id=state["id"],
        scope={"authority": "local", "sessionId": session, "endEventId": 1},
    )
    assert historical["code"] == "MVU_SCOPE_INVALID"
    unknown = await mvu.v1("POST", "/mvu/update", {"id": state["id"], "extra": 1}, status=400)
    assert unknown["code"] == "INVALID_BODY"
    owned = await mvu.v1(
        "POST",
        "/mvu/update",
        {
            "id": state["id"],
            "scope": {"authority": "local", "sessionId": session},
            "content": {"stat_data": {}, "schema": {"type": "object"}},
            "expectedRevision": 1,
            "operationId": "o",
        },
        status=400,
    )
    assert owned["code"] == "MVU_SCHEMA_OWNED"
    gone = await mvu.get(
        "/mvu/resources", 404, scope={"authority": "local", "sessionId": "no-such-session"}
    )
    assert gone["code"] == "MVU_SESSION_NOT_FOUND"
    snap = await mvu.get("/mvu/snapshot", 400, scope={"mode": "greeting", "sessionId": session})
    # Greeting mode is answered by the openings package (not installed in this harness).
    assert snap["code"] == "MVU_SCOPE_UNSUPPORTED"
    snap = await mvu.get("/mvu/snapshot", 400, scope={"mode": "draft", "sessionId": session})
    assert snap["code"] == "MVU_SCOPE_UNSUPPORTED"


def _random_json(rng: Any, depth: int = 0) -> Any:
    kinds = ["null", "bool", "int", "str", "list", "dict"] if depth < 3 else ["int", "str"]
    kind = rng.choice(kinds)
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice([0, 1, -1, 2**53, 3])
    if kind == "str":
        return rng.choice(["", "local", "x", "mvu:instance-0", "stat_data", "a" * 300])
    if kind == "list":
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = [
        "id",
        "scope",
        "content",
        "expectedRevision",
        "operationId",
        "authority",
        "sessionId",
        "endEventId",
        "messageId",
        "stat_data",
        "mode",
        "x",
    ]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


async def test_arbitrary_inputs_never_crash_a_handler(mvu: Mvu) -> None:
    import random

    card = await mvu.card()
    session = await mvu.new_session(card)
    state = await mvu.state(session)
    rng = random.Random(7)
    for _ in range(150):
        body = _random_json(rng)
        if isinstance(body, dict) and rng.random() < 0.5:
            body.setdefault("id", state["id"])
            body.setdefault("scope", {"authority": "local", "sessionId": session})
        resp = await mvu.host.client.post(
            V1 + "/mvu/update", json=body, headers={"Origin": mvu.host.origin}
        )
        assert resp.status < 500, await resp.text()
        for path in (
            "/mvu/resources",
            "/mvu/resource",
            "/mvu/history",
            "/mvu/facts",
            "/mvu/snapshot",
        ):
            scope = _random_json(rng)
            query = _q(id=rng.choice([state["id"], "x"]), scope=json.dumps(scope))
            resp = await mvu.host.client.get(V1 + path + "?" + query)
            assert resp.status < 500, (path, scope, await resp.text())
    assert (await mvu.state(session))["revision"] >= 1


def _state_files(mvu: Mvu) -> dict[str, bytes]:
    root = mvu.service.root
    return {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}


async def test_reads_allocate_nothing_and_refuse_other_sites(mvu: Mvu) -> None:
    """Issue 19 item 11: a GET never allocates or saves an MVU instance; a real use does."""
    card = await mvu.card()
    session = await mvu.new_session(card)
    scope = {"authority": "local", "sessionId": session}
    before = _state_files(mvu)
    facts_before = len(mvu.service._facts)
    listed = (await mvu.get("/mvu/resources", scope=scope))["resources"]
    (summary,) = listed  # the instance a first use would allocate is shown ...
    record = (await mvu.get("/mvu/resource", id=summary["id"], scope=scope))["resource"]
    assert record["revision"] == 1 and record["content"]["stat_data"]
    assert summary["id"] not in mvu.service.document.ledger.states  # ... not allocated
    assert _state_files(mvu) == before
    assert len(mvu.service._facts) == facts_before
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        query = _q(scope=scope)
        resp = await mvu.host.client.get(V1 + "/mvu/resources?" + query, headers=headers)
        assert (resp.status, (await resp.json())["code"]) == (403, "ORIGIN_FORBIDDEN")
    assert _state_files(mvu) == before
    # The first real use (a turn) allocates it, with the id the reads showed.
    await mvu.turn(session, "_.set('hp', 7);")
    assert summary["id"] in mvu.service.document.ledger.states
    assert _state_files(mvu) != before


async def test_a_hostile_scope_query_is_400(mvu: Mvu) -> None:
    for raw in ("[" * 600 + "]" * 600, '{"sessionId": ' + "9" * 400 + "}", '{"a": "\\ud800"'):
        answer = await mvu.v1("GET", "/mvu/resources?" + urlencode({"scope": raw}), status=400)
        assert answer["code"] == "MVU_SCOPE_INVALID"
