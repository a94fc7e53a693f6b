"""Rendering write grants, card bindings and card writes: identity recomputed, at most 64 live
grants, a binding only for a verified empty-session opening, CAS with operationId replay."""

from __future__ import annotations

import asyncio
import io
import json
import urllib.parse
from typing import Any

from opening_harness import V1, base, grant_body, post, select, snapshot, started, write
from play_harness import Play

from innkeeper_hostapi.agents import SESSIONS


async def bound(play: Play) -> tuple[dict[str, Any], dict[str, Any]]:
    ids = await started(play)
    grant = await post(play, "/rendering-write-grants", grant_body('{"bundle":"é"}'))
    binding = await post(
        play,
        "/mvu/card-binding",
        {
            "scope": base(ids, "initial"),
            "grantId": grant["grantId"],
            "sourceIdentity": grant["sourceIdentity"],
            "bindingId": "b-1",
        },
    )
    return ids, binding


async def test_grants_recompute_identity_and_hold_at_most_64(play: Play) -> None:
    body = grant_body("bundle")
    wrong = {**body, "sourceIdentity": {**body["sourceIdentity"], "sha256": "0" * 64}}
    answer = await post(play, "/rendering-write-grants", wrong, 400)
    assert answer["code"] == "RENDERING_IDENTITY_MISMATCH"
    for bad in ({**body, "downloaded": False}, {**body, "x": 1}, {**body, "source": ""}):
        assert (await post(play, "/rendering-write-grants", bad, 400))["code"] == (
            "RENDERING_GRANT_INVALID"
        )
    first = await post(play, "/rendering-write-grants", body)
    assert await post(play, "/rendering-write-grants", body) == first  # identical replay
    other = grant_body("another bundle")
    conflict = await post(play, "/rendering-write-grants", other, 409)
    assert conflict["code"] == "RENDERING_EXECUTION_CONFLICT"
    for i in range(63):
        await post(play, "/rendering-write-grants", grant_body(f"b{i}", f"e{i}"))
    full = await post(play, "/rendering-write-grants", grant_body("x", "e-65"), 409)
    assert full["code"] == "RENDERING_GRANTS_FULL"
    url = f"{V1}/rendering-write-grants/{first['grantId']}"
    assert (await play.call_raw("DELETE", url))[1] == {"ok": True, "removed": True}
    assert (await play.call_raw("DELETE", url))[1] == {"ok": True, "removed": False}
    await post(play, "/rendering-write-grants", grant_body("x", "e-65"))


async def test_twenty_concurrent_writers_commit_exactly_once(play: Play) -> None:
    ids, binding = await bound(play)
    view = await snapshot(play, base(ids, "initial"))
    revision = view["currentRevision"]
    results = await asyncio.gather(
        *(
            play.call_raw("POST", V1 + "/mvu/card-write", write(binding, f"op-{i}", revision, i))
            for i in range(20)
        )
    )
    ok = [answer for status, answer in results if status == 200]
    assert len(ok) == 1, results
    conflicts = [answer["code"] for status, answer in results if status != 200]
    assert set(conflicts) == {"MVU_REVISION_CONFLICT"}
    winner = ok[0]["receipt"]
    after = await snapshot(play, base(ids, "initial"))
    assert after["currentRevision"] == revision + 1
    hp = after["variables"]["stat_data"]["hp"]
    # Replaying the winner's operationId answers the same receipt; reusing it differently fails.
    op = next(f"op-{i}" for i in range(20) if i == hp)
    replay = await post(play, "/mvu/card-write", write(binding, op, revision, hp))
    assert replay["receipt"] == winner and replay["replayed"] is True
    reuse = await post(play, "/mvu/card-write", write(binding, op, revision, hp + 1), 409)
    assert reuse["code"] == "CARD_OPERATION_CONFLICT"
    assert (await snapshot(play, base(ids, "initial")))["currentRevision"] == revision + 1
    # One ledger entry marked as an initial card write, and one card_variable_update fact.
    local = urllib.parse.quote(json.dumps({"authority": "local", "sessionId": ids["sessionId"]}))
    rid = urllib.parse.quote(binding["resourceId"])
    history = (await play.v1("GET", f"/mvu/history?id={rid}&scope={local}"))["history"]
    marked = [row for row in history if (row.get("source") or {}).get("initial") is True]
    assert len(marked) == 1 and marked[0]["source"]["cause"] == "user-interaction"
    facts = (await play.v1("GET", f"/mvu/facts?id={rid}&scope={local}"))["facts"]
    card_facts = [f for f in facts if f.get("turnKind") == "card_variable_update"]
    assert len(card_facts) == 1 and card_facts[0]["detail"] == "state-committed"
    assert card_facts[0]["configRevision"] is None


async def test_bindings_die_with_the_selection_or_the_first_turn(play: Play) -> None:
    ids, binding = await bound(play)
    again = await post(
        play,
        "/mvu/card-binding",
        {"scope": base(ids, "greeting"), "grantId": "g", "sourceIdentity": {}},
        400,
    )
    assert again["code"] == "CARD_BINDING_INVALID"
    await select(play, ids, 1)
    await select(play, ids, 0)
    view = await snapshot(play, base(ids, "initial"))
    stale = await post(
        play, "/mvu/card-write", write(binding, "late", view["currentRevision"], 1), 409
    )
    assert stale["code"] == "CARD_BINDING_STALE"
    gone = await post(
        play, "/mvu/card-write", write(binding, "later", view["currentRevision"], 1), 404
    )
    assert gone["code"] == "CARD_BINDING_NOT_FOUND"
    bad = await post(play, "/mvu/card-write", {**write(binding, "x", 1, 1), "cause": "x"}, 400)
    assert bad["code"] == "CARD_WRITE_INVALID"
    revoked = await post(play, "/mvu/card-binding/revoke", {"bindingId": binding["bindingId"]})
    assert revoked == {"ok": True, "revoked": False}
    assert json.dumps(view)  # the opening itself is untouched by refused writes
    assert view["variables"]["stat_data"] == {"hp": 90, "place": "home"}


async def test_oversized_bodies_are_413_and_change_nothing(play: Play) -> None:
    ids = await started(play)
    huge = "x" * (17 << 20)
    cases = [
        (V1 + "/rendering-write-grants", grant_body(huge)),
        ("/pmp-dsh-tavern/api/v2/drafts", {"characterId": ids["characterId"], "source": huge}),
        (V1 + "/mvu/card-binding", {"scope": base(ids, "initial"), "grantId": huge}),
    ]
    for path, body in cases:
        headers = {"Origin": play.host.origin, "Content-Type": "application/json"}
        data = io.BytesIO(json.dumps(body).encode())
        resp = await play.host.client.request("POST", path, data=data, headers=headers)
        status, answer = resp.status, await resp.json()
        assert status == 413 and answer["code"], (path, answer)
    catalog = json.loads((play.root / "catalog.json").read_text())
    assert len(catalog["playthroughs"]) == 1
    assert (await snapshot(play, base(ids, "initial")))["currentRevision"] >= 1


async def test_a_title_changed_and_back_never_revives_a_binding(play: Play) -> None:
    ids, binding = await bound(play)
    controller = play.host.get(SESSIONS)
    await controller.rename(ids["sessionId"], "Other")
    await controller.rename(ids["sessionId"], "Ada")
    view = await snapshot(play, base(ids, "initial"))
    stale = await post(
        play, "/mvu/card-write", write(binding, "t", view["currentRevision"], 1), 409
    )
    assert stale["code"] == "CARD_BINDING_STALE"
    assert (await snapshot(play, base(ids, "initial")))["currentRevision"] == view[
        "currentRevision"
    ]
