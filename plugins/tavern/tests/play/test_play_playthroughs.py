"""Playthrough relink, detach of the root, availability and the v1 relink completions."""

from __future__ import annotations

import json
from typing import Any

from play_harness import Play


async def setup_playthrough(play: Play, card: str) -> tuple[str, str]:
    """A bound workspace with playthrough-1 (root session + one QA in a forked session)."""
    await play.bind()
    root = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": root, "characterCardId": card})
    await play.v2("POST", f"/sessions/{root}/user-message", {"text": "hi"}, 202)
    await play.idle(root)
    msgs = (await play.v2("GET", f"/sessions/{root}/messages"))["messages"]
    user = next(m for m in msgs if m["role"] == "user")["seq"]
    reply = next(m for m in msgs if m["role"] == "assistant")["seq"]
    branch = (await play.v2("POST", f"/sessions/{root}/branch", {"atEventId": reply}, 201))[
        "sessionId"
    ]
    timeline = {
        "nodes": [
            {
                "id": "n1",
                "kind": "qa",
                "parentVariantId": None,
                "adoptedVariantId": "v1",
                "variants": [
                    {"id": "v1", "sessionId": root, "startEventId": user, "endEventId": reply}
                ],
            }
        ],
        "head": {"sessionId": branch, "nodeId": "n1", "variantId": "v1"},
        "ext": {"pmpDshTavern": {"importContextPath": "ada/p1/import-context.json"}},
    }
    await play.write("ada/p1/timeline.json", json.dumps(timeline), expectedRevision=None)
    catalog = {
        "playthroughs": [
            {
                "id": "playthrough-1",
                "path": "ada/p1/timeline.json",
                "ext": {"pmpDshTavern": {"characterId": card, "rootSessionId": root}},
            }
        ]
    }
    await play.write("catalog.json", json.dumps(catalog), expectedRevision=None)
    return root, branch


def doc(play: Play, path: str) -> Any:
    return json.loads((play.root / path).read_text())


async def test_relink_character_moves_the_playthrough_and_its_sessions(play: Play) -> None:
    ada = await play.character("Ada")
    bob = await play.character("Bob")
    root, branch = await setup_playthrough(play, ada)
    moved = await play.v2(
        "POST", "/playthroughs/playthrough-1/relink-character", {"characterId": bob}
    )
    assert moved["relinkedSessionCount"] == 2
    row = doc(play, "catalog.json")["playthroughs"][0]
    assert row["ext"]["pmpDshTavern"]["characterId"] == bob
    assert row["ext"]["pmpDshTavern"]["characterName"] == "Bob"
    for sid in (root, branch):
        selected = await play.v1("GET", f"/character-selection?sessionId={sid}")
        assert selected["character"]["id"] == bob
    status, body = await play.raw(
        "POST", "/playthroughs/playthrough-1/relink-character", {"characterId": "nope"}
    )
    assert (status, body["code"]) == (404, "PLAY_CHARACTER_NOT_FOUND")


async def test_relink_refuses_a_third_card_binding(play: Play) -> None:
    ada = await play.character("Ada")
    bob = await play.character("Bob")
    cyd = await play.character("Cyd")
    _, branch = await setup_playthrough(play, ada)
    await play.v2("POST", "/playthroughs/playthrough-1/detach-session", {"sessionId": branch})
    # Put the branch back into the tree by hand, bound to a third card.
    await play.v1("POST", "/character-selection", {"sessionId": branch, "characterCardId": cyd})
    t = doc(play, "ada/p1/timeline.json")
    t["head"]["sessionId"] = branch
    rev = (await play.read("ada/p1/timeline.json"))["revision"]
    await play.write("ada/p1/timeline.json", json.dumps(t), expectedRevision=rev)
    before = (play.root / "catalog.json").read_text()
    status, body = await play.raw(
        "POST", "/playthroughs/playthrough-1/relink-character", {"characterId": bob}
    )
    assert (status, body["code"]) == (409, "PLAY_RELINK_CONFLICT")
    assert (play.root / "catalog.json").read_text() == before


async def test_detach_the_root_keeps_the_row(play: Play) -> None:
    card = await play.character("Ada")
    root, _ = await setup_playthrough(play, card)
    result = await play.v2(
        "POST", "/playthroughs/playthrough-1/detach-session", {"sessionId": root}
    )
    assert result["removedVariantIds"] == ["v1"]
    t = doc(play, "ada/p1/timeline.json")
    assert t["nodes"] == [] and "head" not in t
    assert "importContextPath" not in t["ext"]["pmpDshTavern"]
    row = doc(play, "catalog.json")["playthroughs"][0]
    assert row["id"] == "playthrough-1" and "rootSessionId" not in row["ext"]["pmpDshTavern"]
    status, body = await play.raw(
        "POST", "/playthroughs/playthrough-1/detach-session", {"sessionId": root}
    )
    assert (status, body["code"]) == (404, "PLAY_DETACH_NOT_FOUND")
    assert (await play.v2("GET", f"/sessions/{root}/coordinates"))["ok"]  # never deleted
    avail = await play.v2("GET", "/playthroughs/playthrough-1/availability")
    assert avail["status"] == "empty"


async def test_availability_invalid_only_when_every_session_is_missing(play: Play) -> None:
    await play.bind()
    catalog = {
        "playthroughs": [
            {
                "id": "p-gone",
                "path": "a/p-gone/timeline.json",
                "ext": {"pmpDshTavern": {"rootSessionId": "s-gone"}},
            },
            {"id": "p-broken", "path": "a/p-broken/timeline.json"},
        ]
    }
    await play.write("catalog.json", json.dumps(catalog), expectedRevision=None)
    await play.write("a/p-gone/timeline.json", '{"nodes": []}', expectedRevision=None)
    avail = await play.v2("GET", "/playthroughs/p-gone/availability")
    assert (avail["status"], avail["sessionIds"]) == ("invalid", ["s-gone"])
    avail = await play.v2("GET", "/playthroughs/p-broken/availability")
    assert avail["status"] == "unavailable"
    status, body = await play.raw("GET", "/playthroughs/p-broken/focus")
    assert (status, body["code"]) == (409, "PLAY_FOCUS_UNAVAILABLE")
    (play.root / "catalog.json").write_text("{")
    status, body = await play.raw("GET", "/playthroughs/p-gone/focus")
    assert (status, body["code"]) == (400, "PLAY_CATALOG_INVALID")
    (play.root / "catalog.json").unlink()
    status, body = await play.raw("GET", "/playthroughs/p-gone/focus")
    assert (status, body["code"]) == (409, "PLAY_CATALOG_UNAVAILABLE")


async def test_v1_relink_moves_every_playthrough_of_the_missing_card(play: Play) -> None:
    ada = await play.character("Ada")
    root, branch = await setup_playthrough(play, ada)
    await play.v1("DELETE", f"/characters/{ada}")
    new = await play.character("Ada 2")
    moved = await play.v1(
        "POST", "/characters/relink", {"previousCharacterId": ada, "characterId": new}
    )
    assert (moved["relinkedPlaythroughCount"], moved["relinkedSessionCount"]) == (1, 2)
    row = doc(play, "catalog.json")["playthroughs"][0]
    assert row["ext"]["pmpDshTavern"]["characterId"] == new
    listing = await play.v1("GET", "/characters")
    assert listing["missingCharacters"] == []
    for sid in (root, branch):
        selected = await play.v1("GET", f"/character-selection?sessionId={sid}")
        assert selected["character"]["id"] == new


async def test_v1_relink_is_deferred_without_a_workspace(play: Play) -> None:
    ada = await play.character("Ada")
    await play.v1("DELETE", f"/characters/{ada}")
    new = await play.character("Bob")
    status, body = await play.call_raw(
        "POST",
        "/pmp-dsh-tavern/api/v1/characters/relink",
        {"previousCharacterId": ada, "characterId": new},
    )
    assert (status, body["code"]) == (409, "CHARACTER_RELINK_DEFERRED")
    listing = await play.v1("GET", "/characters")
    assert [t["id"] for t in listing["missingCharacters"]] == [ada]


async def test_reimport_relinks_automatically(play: Play) -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Ada"}}
    data = json.dumps(card).encode()
    first = (await play.resources.import_character(data, "ada.json")).record.id
    _, branch = await setup_playthrough(play, first)
    await play.v1("DELETE", f"/characters/{first}")
    again = await play.resources.import_character(data, "ada.json")
    assert again.match is not None and again.relinked is True
    row = doc(play, "catalog.json")["playthroughs"][0]
    assert row["ext"]["pmpDshTavern"]["characterId"] == again.record.id
    assert (await play.v1("GET", "/characters"))["missingCharacters"] == []
    selected = await play.v1("GET", f"/character-selection?sessionId={branch}")
    assert selected["character"]["id"] == again.record.id


async def test_applying_a_template_of_another_card_to_a_playthrough_session_is_refused(
    play: Play,
) -> None:
    ada = await play.character("Ada")
    bob = await play.character("Bob")
    root, branch = await setup_playthrough(play, ada)
    of_bob = (
        await play.v1(
            "POST",
            "/session-templates",
            {"name": "Bob's", "selection": {"characterCardId": bob}},
            201,
        )
    )["template"]["id"]
    of_ada = (
        await play.v1(
            "POST",
            "/session-templates",
            {"name": "Ada's", "selection": {"characterCardId": ada}},
            201,
        )
    )["template"]["id"]
    blank = (await play.v1("POST", "/session-templates", {"name": "Blank"}, 201))["template"]["id"]
    for session, template, requested in ((root, of_bob, bob), (branch, blank, None)):
        selected = await play.v1("GET", f"/character-selection?sessionId={session}")
        status, body = await play.call_raw(
            "POST",
            "/pmp-dsh-tavern/api/v1/session-configurations/apply",
            {"targetSessionId": session, "source": {"mode": "template", "templateId": template}},
        )
        assert (status, body["code"]) == (409, "CHARACTER_PLAYTHROUGH_DETACH_REQUIRED")
        [conflict] = body["error"]["details"]["conflicts"]
        assert conflict["playthroughId"] == "playthrough-1"
        assert conflict["sessionId"] == session
        assert (conflict["expectedCharacterId"], conflict["requestedCharacterId"]) == (
            ada,
            requested,
        )
        # Nothing was applied.
        assert await play.v1("GET", f"/character-selection?sessionId={session}") == selected
    # Another card's configuration copied from a session is refused the same way.
    loose = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": loose, "characterCardId": bob})
    status, body = await play.call_raw(
        "POST",
        "/pmp-dsh-tavern/api/v1/session-configurations/apply",
        {"targetSessionId": root, "source": {"mode": "current", "sessionId": loose}},
    )
    assert (status, body["code"]) == (409, "CHARACTER_PLAYTHROUGH_DETACH_REQUIRED")
    # The playthrough's own card applies; so does any template to a session outside it.
    await play.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": root, "source": {"mode": "template", "templateId": of_ada}},
    )
    applied = await play.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": loose, "source": {"mode": "template", "templateId": blank}},
    )
    assert applied["selection"]["characterCardId"] is None
