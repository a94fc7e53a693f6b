"""The bundled client's playthrough lifecycle, composed only from public routes over real HTTP:
bind, create a playthrough, three turns with timeline reconcile, a reply swipe, a branch into a
new playthrough, continue-from-here, detach, archive and restore, restart, focus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from play_harness import Play
from tavern_harness import HostStarter

TIMELINE_1 = "ada/playthrough-1/timeline.json"
TIMELINE_2 = "ada/playthrough-2/timeline.json"


async def update(play: Play, path: str, mutate: Any, tries: int = 5) -> dict[str, Any]:
    """The client's managed-document update: reread and replay the intent on a conflict."""
    for _ in range(tries):
        status, current = await play.raw("GET", f"/workspace/files?path={path}")
        doc = json.loads(current["content"]) if status == 200 else None
        expected = current["revision"] if status == 200 else None
        new = mutate(doc)
        status, body = await play.raw(
            "PUT",
            f"/workspace/files?path={path}",
            {"content": json.dumps(new, indent=2), "expectedRevision": expected},
        )
        if status == 200:
            return new  # type: ignore[no-any-return]
        assert body["code"] == "PLAY_FILE_REVISION_CONFLICT", body
    raise AssertionError("intent did not land")


async def last_qa(play: Play, session_id: str) -> tuple[int, int, str]:
    """(user seq, reply seq, user text) of the session's last completed QA."""
    data = await play.v2("GET", f"/sessions/{session_id}/messages")
    messages = data["messages"]
    user = max(i for i, m in enumerate(messages) if m["origin"]["kind"] == "user")
    reply = next(m for m in messages[user:] if m["role"] == "assistant")
    assert not reply["incompleteTurn"]
    return messages[user]["seq"], reply["seq"], messages[user]["text"]


async def send(play: Play, session_id: str, text: str) -> None:
    await play.v2("POST", f"/sessions/{session_id}/user-message", {"text": text}, 202)
    await play.idle(session_id)


async def reconcile(play: Play, path: str, session_id: str, node_id: str) -> None:
    """Append the session's last QA as a node whose parent is the current head."""
    start, end, _ = await last_qa(play, session_id)

    def add(doc: dict[str, Any]) -> dict[str, Any]:
        head = doc.get("head")
        variant = f"{node_id}-v1"
        doc["nodes"].append(
            {
                "id": node_id,
                "kind": "qa",
                "parentVariantId": head["variantId"] if head else None,
                "adoptedVariantId": variant,
                "variants": [
                    {
                        "id": variant,
                        "sessionId": session_id,
                        "startEventId": start,
                        "endEventId": end,
                    }
                ],
            }
        )
        doc["head"] = {"sessionId": session_id, "nodeId": node_id, "variantId": variant}
        return doc

    await update(play, path, add)


def row(number: int, card: str, root: str) -> dict[str, Any]:
    return {
        "id": f"playthrough-{number}",
        "path": f"ada/playthrough-{number}/timeline.json",
        "title": f"Playthrough {number}",
        "ext": {
            "pmpDshTavern": {
                "characterId": card,
                "characterName": "Ada",
                "rootSessionId": root,
                "playthroughNumber": number,
            },
            "thirdParty": {"kept": [1, 2, 3]},
        },
    }


async def focus(play: Play, playthrough: str) -> dict[str, Any]:
    data: dict[str, Any] = await play.v2("GET", f"/playthroughs/{playthrough}/focus")
    return data


async def test_bundled_client_lifecycle(start_play: HostStarter, tmp_path: Path) -> None:
    host, play = await start_play(tmp_path / "data")
    await play.bind()
    card = await play.character("Ada")

    # -- create the character's playthrough: session, card, directory, timeline, catalog, reread
    root = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": root, "characterCardId": card})
    await play.v2("POST", "/workspace/dirs", {"path": "ada/playthrough-1"}, 201)
    await play.write(TIMELINE_1, '{"nodes": []}\n', expectedRevision=None)
    await update(play, "catalog.json", lambda doc: {"playthroughs": [row(1, card, root)]})
    assert (await focus(play, "playthrough-1"))["sessionId"] == root  # empty → rootSessionId

    # -- three turns, each reconciled into the timeline
    for i in range(1, 4):
        await send(play, root, f"turn {i}")
        await reconcile(play, TIMELINE_1, root, f"n{i}")
    f = await focus(play, "playthrough-1")
    assert (f["sessionId"], f["nodeId"], f["variantId"]) == (root, "n3", "n3-v1")
    timeline = json.loads((await play.read(TIMELINE_1))["content"])
    n2_end = timeline["nodes"][1]["variants"][0]["endEventId"]
    n1_end = timeline["nodes"][0]["variants"][0]["endEventId"]
    n3 = timeline["nodes"][2]["variants"][0]

    # -- reply swipe of n3: branch before its request, resend the same text, add a variant
    swipe = (
        await play.v2(
            "POST",
            f"/sessions/{root}/branch",
            {
                "atEventId": n2_end,
                "sessionFormatVersion": 4,
                "stateSource": {"sessionId": root, "beforeReplyEventId": n3["endEventId"]},
            },
            201,
        )
    )["sessionId"]
    await send(play, swipe, "turn 3")
    start, end, text = await last_qa(play, swipe)
    assert text == "turn 3"

    def add_swipe(doc: dict[str, Any]) -> dict[str, Any]:
        node = doc["nodes"][2]
        node["variants"].append(
            {"id": "n3-v2", "sessionId": swipe, "startEventId": start, "endEventId": end}
        )
        node["adoptedVariantId"] = "n3-v2"
        doc["head"] = {"sessionId": swipe, "nodeId": "n3", "variantId": "n3-v2"}
        return doc

    await update(play, TIMELINE_1, add_swipe)
    assert (await focus(play, "playthrough-1"))["sessionId"] == swipe

    # -- branch into a new playthrough at n2's adopted reply
    child = (await play.v2("POST", f"/sessions/{root}/branch", {"atEventId": n2_end}, 201))[
        "sessionId"
    ]
    inherited = await play.v2("GET", f"/sessions/{child}/messages")
    assert [m["text"] for m in inherited["messages"] if m["origin"]["kind"] == "user"] == [
        "turn 1",
        "turn 2",
    ]
    await play.v2("POST", "/workspace/dirs", {"path": "ada/playthrough-2"}, 201)
    copy = json.loads((await play.read(TIMELINE_1))["content"])
    copy["nodes"] = copy["nodes"][:2]
    copy["nodes"][1]["variants"][0]["sessionId"] = child
    copy["head"] = {"sessionId": child, "nodeId": "n2", "variantId": "n2-v1"}
    await play.write(TIMELINE_2, json.dumps(copy), expectedRevision=None)
    await update(
        play,
        "catalog.json",
        lambda doc: {**doc, "playthroughs": [*doc["playthroughs"], row(2, card, root)]},
    )
    assert (await focus(play, "playthrough-2"))["sessionId"] == child
    source = json.loads((await play.read(TIMELINE_1))["content"])
    assert source["nodes"][1]["variants"][0]["sessionId"] == root  # the source is unchanged

    # -- continue from here (n1) in the same playthrough, then one more turn on that path
    cont = (await play.v2("POST", f"/sessions/{root}/branch", {"atEventId": n1_end}, 201))[
        "sessionId"
    ]

    def move_head(doc: dict[str, Any]) -> dict[str, Any]:
        doc["head"] = {"sessionId": cont, "nodeId": "n1", "variantId": "n1-v1"}
        return doc

    await update(play, TIMELINE_1, move_head)
    assert (await focus(play, "playthrough-1"))["sessionId"] == cont
    await send(play, cont, "turn 2b")
    await reconcile(play, TIMELINE_1, cont, "n4")
    after = json.loads((await play.read(TIMELINE_1))["content"])
    assert after["nodes"][3]["parentVariantId"] == "n1-v1"
    assert (await focus(play, "playthrough-1"))["variantId"] == "n4-v1"

    # -- character selection refuses to rebind a playthrough session to another card
    other = await play.character("Bob")
    status, body = await play.call_raw(
        "POST",
        "/pmp-dsh-tavern/api/v1/character-selection",
        {"sessionId": swipe, "characterCardId": other},
    )
    assert (status, body["code"]) == (409, "CHARACTER_PLAYTHROUGH_DETACH_REQUIRED")
    conflict = body["error"]["details"]["conflicts"][0]
    assert conflict["playthroughId"] == "playthrough-1" and conflict["expectedCharacterId"] == card

    # -- detach the swipe session: its variant goes, siblings and the DSH session stay
    detached = await play.v2(
        "POST", "/playthroughs/playthrough-1/detach-session", {"sessionId": swipe}
    )
    assert detached["removedVariantIds"] == ["n3-v2"]
    after = json.loads((await play.read(TIMELINE_1))["content"])
    assert [v["id"] for v in after["nodes"][2]["variants"]] == ["n3-v1"]
    assert after["nodes"][2]["adoptedVariantId"] == "n3-v1"
    assert (await play.v2("GET", f"/sessions/{swipe}/coordinates"))["ok"] is True
    await play.v1("POST", "/character-selection", {"sessionId": swipe, "characterCardId": other})

    # -- archive and restore playthrough-2 with catalog CAS
    def archive(doc: dict[str, Any]) -> dict[str, Any]:
        for r in doc["playthroughs"]:
            if r["id"] == "playthrough-2":
                r["ext"]["pmpDshTavern"]["archivedAt"] = "2026-01-02T03:04:05.678Z"
        return doc

    await update(play, "catalog.json", archive)
    avail = await play.v2("GET", "/playthroughs/playthrough-2/availability")
    assert avail["status"] == "protected"
    assert (await focus(play, "playthrough-2"))["sessionId"] == child  # archive is visibility only

    def restore(doc: dict[str, Any]) -> dict[str, Any]:
        for r in doc["playthroughs"]:
            r["ext"]["pmpDshTavern"].pop("archivedAt", None)
        return doc

    await update(play, "catalog.json", restore)
    avail = await play.v2("GET", "/playthroughs/playthrough-2/availability")
    assert avail["status"] == "available" and child in avail["sessionIds"]
    catalog = json.loads((await play.read("catalog.json"))["content"])
    assert catalog["playthroughs"][1]["ext"]["thirdParty"] == {"kept": [1, 2, 3]}

    # -- restart: the binding, the files and focus survive
    await host.close()
    host, play = await start_play(tmp_path / "data")
    assert (await play.v2("GET", "/workspace"))["rootPath"] == str(play.root)
    assert (await focus(play, "playthrough-1"))["sessionId"] == cont
    assert (await focus(play, "playthrough-2"))["sessionId"] == child
    legacy = await play.v2("GET", f"/focus?path={TIMELINE_2}")
    assert legacy["sessionId"] == child
    status, body = await play.raw("GET", "/focus")
    assert (status, body["code"]) == (400, "PLAY_FOCUS_PATH_REQUIRED")
    status, body = await play.raw("GET", "/playthroughs/playthrough-9/focus")
    assert (status, body["code"]) == (404, "PLAY_PLAYTHROUGH_NOT_FOUND")
    status, body = await play.raw("POST", "/focus", {})
    assert (status, body["code"]) == (405, "PLAY_METHOD_NOT_ALLOWED")
