"""The group routes: create, list, get, update with revision, delete, and their 4xx."""

from __future__ import annotations

import json

from innkeeper_tavern.pure.groups.model import MAX_MEMBERS

from .conftest import Groups


async def test_create_list_get_update_delete(groups: Groups) -> None:
    alice, bob, cara = [await groups.card(n) for n in ("Alice", "Bob", "Cara")]
    created = await groups.call(
        "POST",
        "/groups",
        {
            "name": "  Party ",
            "members": [{"characterId": alice}, {"characterId": bob, "muted": True}],
            "activationStrategy": "list",
            "generationMode": "join",
            "joinPrefix": "[<FIELDNAME> of {{char}}]",
        },
        201,
    )
    group = created["group"]
    assert group["name"] == "Party"
    assert group["revision"] == 1
    assert group["members"] == [
        {"characterId": alice, "muted": False, "name": "Alice", "missing": False},
        {"characterId": bob, "muted": True, "name": "Bob", "missing": False},
    ]
    assert (group["activationStrategy"], group["generationMode"]) == ("list", "join")
    assert group["autoModeDelay"] == 5 and group["allowSelfResponses"] is False
    gid = group["id"]

    listed = await groups.call("GET", "/groups")
    assert [g["id"] for g in listed["groups"]] == [gid]
    assert (await groups.call("GET", f"/groups/{gid}"))["group"] == group

    # Reorder, unmute, add a member: one PATCH from revision 1.
    members = [{"characterId": cara}, {"characterId": bob}, {"characterId": alice}]
    updated = await groups.call(
        "PATCH", f"/groups/{gid}", {"revision": 1, "members": members, "autoMode": True}
    )
    assert updated["group"]["revision"] == 2
    assert [m["name"] for m in updated["group"]["members"]] == ["Cara", "Bob", "Alice"]
    assert updated["group"]["autoMode"] is True

    # The store survives a restart: the file holds what the routes answered.
    stored = json.loads((groups.root / "groups.json").read_text())
    assert stored["schemaVersion"] == 1
    assert [m["characterId"] for m in stored["groups"][0]["members"]] == [cara, bob, alice]

    await groups.call("DELETE", f"/groups/{gid}?revision=2")
    missing = await groups.call("GET", f"/groups/{gid}", status=404)
    assert missing["code"] == "GROUP_NOT_FOUND"


async def test_a_stale_revision_is_a_conflict_and_changes_nothing(groups: Groups) -> None:
    alice = await groups.card("Alice")
    gid = (await groups.call("POST", "/groups", {"name": "G", "members": []}, 201))["group"]["id"]
    await groups.call("PATCH", f"/groups/{gid}", {"revision": 1, "name": "First"})
    stale = await groups.call(
        "PATCH",
        f"/groups/{gid}",
        {"revision": 1, "members": [{"characterId": alice}]},
        409,
    )
    assert stale["code"] == "GROUP_REVISION_CONFLICT"
    assert stale["error"]["details"] == {"currentRevision": 2}
    current = (await groups.call("GET", f"/groups/{gid}"))["group"]
    assert current["name"] == "First" and current["members"] == []
    assert (await groups.call("DELETE", f"/groups/{gid}?revision=1", status=409))[
        "code"
    ] == "GROUP_REVISION_CONFLICT"
    assert (await groups.call("DELETE", f"/groups/{gid}", status=400))["code"] == "GROUP_INVALID"
    no_revision = await groups.call("PATCH", f"/groups/{gid}", {"name": "x"}, 400)
    assert no_revision["code"] == "GROUP_INVALID"
    assert (await groups.call("GET", f"/groups/{gid}"))["group"]["revision"] == 2


async def test_bad_bodies_are_400_with_a_stable_code(groups: Groups) -> None:
    alice = await groups.card("Alice")
    cases = [
        ({"members": []}, "GROUP_INVALID"),  # no name
        ({"name": ""}, "GROUP_INVALID"),
        ({"name": "x" * 201}, "GROUP_INVALID"),
        ({"name": "G", "colour": "red"}, "GROUP_INVALID"),
        ({"name": "G", "activationStrategy": "random"}, "GROUP_INVALID"),
        ({"name": "G", "generationMode": 1}, "GROUP_INVALID"),
        ({"name": "G", "autoModeDelay": 0}, "GROUP_INVALID"),
        ({"name": "G", "autoModeDelay": True}, "GROUP_INVALID"),
        ({"name": "G", "allowSelfResponses": "yes"}, "GROUP_INVALID"),
        ({"name": "G", "avatar": "http://example.invalid/a.png"}, "GROUP_INVALID"),
        ({"name": "G", "members": [{"characterId": alice}] * 2}, "GROUP_INVALID"),
        ({"name": "G", "members": [{"id": alice}]}, "GROUP_INVALID"),
        ({"name": "G", "members": [{"characterId": "nobody"}]}, "GROUP_MEMBER_UNKNOWN"),
        ({"name": "G", "joinSuffix": "s" * 10_001}, "GROUP_INVALID"),
        (
            {"name": "G", "members": [{"characterId": f"c{i}"} for i in range(MAX_MEMBERS + 1)]},
            "GROUP_INVALID",
        ),
        ([1, 2], "GROUP_INVALID"),
    ]
    for body, code in cases:
        answer = await groups.call("POST", "/groups", body, 400)
        assert answer["code"] == code, body
    assert (await groups.call("GET", "/groups"))["groups"] == []
    assert not (groups.root / "groups.json").exists()


async def test_a_deleted_card_stays_a_missing_member(groups: Groups) -> None:
    alice, bob = await groups.card("Alice"), await groups.card("Bob")
    body = {"name": "G", "members": [{"characterId": alice}, {"characterId": bob}]}
    gid = (await groups.call("POST", "/groups", body, 201))["group"]["id"]
    await groups.call("DELETE", f"/characters/{bob}")
    members = (await groups.call("GET", f"/groups/{gid}"))["group"]["members"]
    assert members[1] == {"characterId": bob, "muted": False, "name": None, "missing": True}
    # Sending the members back (a reorder) keeps the missing one; it cannot be added anew.
    reordered = [{"characterId": bob, "muted": True}, {"characterId": alice}]
    answer = await groups.call("PATCH", f"/groups/{gid}", {"revision": 1, "members": reordered})
    assert [m["characterId"] for m in answer["group"]["members"]] == [bob, alice]
    other = await groups.call(
        "POST", "/groups", {"name": "H", "members": [{"characterId": bob}]}, 400
    )
    assert other["code"] == "GROUP_MEMBER_UNKNOWN"


async def test_an_unknown_id_is_404(groups: Groups) -> None:
    for path in ("/groups/nope", "/groups/..%2Fx"):
        assert (await groups.call("GET", path, status=404))["code"] == "GROUP_NOT_FOUND"
    answer = await groups.call("PATCH", "/groups/nope", {"revision": 1, "name": "x"}, 404)
    assert answer["code"] == "GROUP_NOT_FOUND"
