"""``/mvu/snapshot`` in greeting and initial mode: membership, character and selection checks,
``viewIdentity`` tokens that die on any selection change or restart, the first pre-turn
checkpoint after the first send, and the first-message projection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opening_harness import CARD, base, card, select, send, snapshot, started
from play_harness import Play

from innkeeper_hostapi.testing import RunningHost


async def test_greeting_and_initial_modes_before_and_after_the_first_send(play: Play) -> None:
    ids = await started(play)
    greeting = await snapshot(play, base(ids, "greeting"))
    assert greeting["variables"]["stat_data"] == {"hp": 90, "place": "home"}
    identity = greeting["viewIdentity"]
    assert identity["greetingIndex"] == 0 and identity["selectionToken"]
    assert greeting["firstMessage"]["messageId"] == 0
    assert greeting["firstMessage"]["text"].startswith("Morning.")
    assert greeting["firstMessage"]["chatLength"] == 1
    initial = await snapshot(play, {**base(ids, "initial"), **identity})
    assert initial["variables"] == greeting["variables"]
    # The first send transfers this opening; a later reply never changes the greeting view.
    await send(play, ids, "_.set('hp', 10);")
    after = await snapshot(play, base(ids, "greeting"))
    assert after["variables"]["stat_data"] == {"hp": 90, "place": "home"}
    assert after["currentRevision"] > after["revision"]
    closed = await snapshot(play, base(ids, "initial"), 409)
    assert closed["code"] == "MVU_INITIAL_CLOSED"


async def test_old_selection_tokens_are_refused_after_a_b_a(play: Play) -> None:
    ids = await started(play)
    first = (await snapshot(play, base(ids, "greeting")))["viewIdentity"]
    await select(play, ids, 1)
    b = await snapshot(play, base(ids, "greeting"))
    assert b["viewIdentity"]["greetingIndex"] == 1
    assert b["variables"]["stat_data"]["hp"] == 40
    stale = await snapshot(play, {**base(ids, "greeting"), **first}, 409)
    assert stale["code"] == "MVU_SELECTION_STALE"
    await select(play, ids, 0)
    # Back on A: the old view of A is still refused; a fresh read gets a new token.
    for mode in ("greeting", "initial"):
        stale = await snapshot(play, {**base(ids, mode), **first}, 409)
        assert stale["code"] == "MVU_SELECTION_STALE"
    again = await snapshot(play, base(ids, "greeting"))
    assert again["viewIdentity"]["greetingIndex"] == 0
    assert again["viewIdentity"]["selectionToken"] != first["selectionToken"]
    await snapshot(play, {**base(ids, "greeting"), **again["viewIdentity"]})
    wrong = await snapshot(play, {**base(ids, "greeting"), "greetingIndex": 1}, 409)
    assert wrong["code"] == "MVU_SELECTION_STALE"


async def test_tokens_do_not_survive_a_restart(start_play: Any, tmp_path: Path) -> None:
    host, play = await start_play(tmp_path / "data")
    ids = await started(play)
    identity = (await snapshot(play, base(ids, "greeting")))["viewIdentity"]
    await host.close()
    _, play = await start_play(tmp_path / "data")
    await play.bind()
    stale = await snapshot(play, {**base(ids, "greeting"), **identity}, 409)
    assert stale["code"] == "MVU_SELECTION_STALE"
    fresh = await snapshot(play, base(ids, "greeting"))
    assert fresh["viewIdentity"]["greetingIndex"] == 0


async def test_bad_scopes_get_stable_codes(play: Play, innkeeper_host: RunningHost) -> None:
    ids = await started(play)
    stranger = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({**base(ids, "greeting"), "nodeId": "n1"}, 400, "MVU_SCOPE_INVALID"),
        ({**base(ids, "initial"), "endEventId": 3}, 400, "MVU_SCOPE_INVALID"),
        ({**base(ids, "greeting"), "playthroughId": ""}, 400, "MVU_SCOPE_INVALID"),
        ({**base(ids, "greeting"), "greetingIndex": -1}, 400, "MVU_SCOPE_INVALID"),
        ({**base(ids, "greeting"), "mode": "other"}, 400, "MVU_SCOPE_UNSUPPORTED"),
        (
            {**base(ids, "greeting"), "sessionFormatVersion": 2},
            409,
            "MVU_COORDINATES_MIGRATION_REQUIRED",
        ),
        ({**base(ids, "greeting"), "characterId": "someone"}, 409, "MVU_CHARACTER_MISMATCH"),
        ({**base(ids, "greeting"), "sessionId": stranger}, 403, "MVU_MEMBERSHIP_DENIED"),
        ({**base(ids, "greeting"), "playthroughId": "nope"}, 404, "PLAY_PLAYTHROUGH_NOT_FOUND"),
        # Message scopes never carry selection identity.
        (
            {"sessionId": ids["sessionId"], "endEventId": 1, "greetingIndex": 0},
            400,
            "MVU_SCOPE_INVALID",
        ),
        (
            {"sessionId": ids["sessionId"], "endEventId": 1, "selectionToken": "x"},
            400,
            "MVU_SCOPE_INVALID",
        ),
    ]
    for scope, status, code in cases:
        answer = await snapshot(play, scope, status)
        assert answer["code"] == code, (scope, answer)
    assert CARD["data"]["name"] == "Ada"


async def test_draft_mode_reads_the_unstarted_opening(play: Play) -> None:
    await play.bind()
    cid = await card(play)
    created = await play.v2("POST", "/drafts", {"characterId": cid}, 201)
    draft = created["draft"]
    scope = {
        "mode": "draft",
        "playthroughId": draft["playthroughId"],
        "characterId": cid,
        "greetingIndex": 0,
    }
    view = await snapshot(play, scope)
    assert view["variables"]["stat_data"] == {"hp": 90, "place": "home"}
    assert view["firstMessage"] == {
        "messageId": 0,
        "text": CARD["data"]["first_mes"],
        "chatLength": 1,
    }
    token = view["viewIdentity"]["selectionToken"]
    await snapshot(play, {**scope, "selectionToken": token})
    await play.v2(
        "PUT", f"/drafts/{draft['id']}", {"expectedRevision": 1, "selection": {"greetingIndex": 1}}
    )
    await play.v2(
        "PUT", f"/drafts/{draft['id']}", {"expectedRevision": 2, "selection": {"greetingIndex": 0}}
    )
    stale = await snapshot(play, {**scope, "selectionToken": token}, 409)
    assert stale["code"] == "MVU_SELECTION_STALE"
    for bad, status, code in [
        ({**scope, "sessionId": "s"}, 400, "MVU_SCOPE_INVALID"),
        ({**scope, "greetingIndex": None}, 400, "MVU_SCOPE_INVALID"),
        ({**scope, "greetingIndex": 1}, 409, "MVU_SELECTION_STALE"),
        ({**scope, "characterId": "other"}, 409, "MVU_CHARACTER_MISMATCH"),
    ]:
        assert (await snapshot(play, bad, status))["code"] == code
