"""The group chat routes: store, list, read back byte for byte, replace, delete, and their 4xx."""

from __future__ import annotations

import urllib.parse

from .conftest import V1, Groups

CHAT = (
    '{"name":"A","is_user":false,"mes":"hi","original_avatar":"A.png","swipes":["x","hi"]}\n'
    '{"name":"Me","is_user":true,"mes":"ok"}'
)


async def _put(
    groups: Groups, path: str, data: bytes, ctype: str = "application/x-ndjson"
) -> tuple[int, dict]:
    resp = await groups.host.client.put(
        V1 + path, data=data, headers={"Origin": groups.host.origin, "Content-Type": ctype}
    )
    return resp.status, await resp.json()


async def test_group_chats_round_trip_and_refusals(groups: Groups) -> None:
    gid = (await groups.call("POST", "/groups", {"name": "G"}, 201))["group"]["id"]
    name = urllib.parse.quote("Tea @ 5 - 中文", safe="")
    status, body = await _put(groups, f"/groups/{gid}/chats/{name}", CHAT.encode())
    assert status == 201, body
    assert body["chat"]["messageCount"] == 2 and body["chat"]["swipeCount"] == 2
    status, body = await _put(groups, f"/groups/{gid}/chats/{name}", CHAT.encode())
    assert status == 200
    listed = (await groups.call("GET", f"/groups/{gid}/chats"))["chats"]
    assert [c["name"] for c in listed] == ["Tea @ 5 - 中文"]
    resp = await groups.host.client.get(f"{V1}/groups/{gid}/chats/{name}")
    assert resp.status == 200 and await resp.read() == CHAT.encode()
    assert "attachment" in resp.headers["Content-Disposition"]

    status, body = await _put(groups, f"/groups/{gid}/chats/x", b"\xff\xfe")
    assert (status, body["code"]) == (400, "GROUP_INVALID")
    status, body = await _put(groups, f"/groups/{gid}/chats/{'n' * 201}", b"{}")
    assert (status, body["code"]) == (400, "GROUP_INVALID")
    status, body = await _put(groups, f"/groups/{gid}/chats/.hidden", b"{}")
    assert (status, body["code"]) == (400, "GROUP_INVALID")
    status, body = await _put(groups, "/groups/nope/chats/x", b"{}")
    assert (status, body["code"]) == (404, "GROUP_NOT_FOUND")
    status, _ = await _put(groups, f"/groups/{gid}/chats/x", b"{}", "image/png")
    assert status == 415
    missing = await groups.call("GET", f"/groups/{gid}/chats/none", status=404)
    assert missing["code"] == "GROUP_CHAT_NOT_FOUND"

    await groups.call("DELETE", f"/groups/{gid}/chats/{name}")
    assert (await groups.call("GET", f"/groups/{gid}/chats"))["chats"] == []
    # Deleting the group deletes its chats.
    await _put(groups, f"/groups/{gid}/chats/again", CHAT.encode())
    await groups.call("DELETE", f"/groups/{gid}?revision=1")
    assert not (groups.root / "group-chats" / gid).exists()


async def test_import_route_reports_missing_members(groups: Groups) -> None:
    alice = await groups.card("Alice")
    doc = {"name": "P", "members": ["Alice.png", "Nobody.png"], "disabled_members": ["Alice.png"]}
    answer = await groups.call(
        "POST", "/groups/import", {"group": doc, "members": {"Alice.png": alice}}, 201
    )
    assert answer["missingMembers"] == ["Nobody.png"]
    assert answer["group"]["members"][0]["muted"] is True
    exported = await groups.call("GET", f"/groups/{answer['group']['id']}/export")
    assert exported["group"]["members"] == ["Alice.png", "Nobody.png"]
    assert exported["memberCharacterIds"] == [alice, None]
    bad = await groups.call("POST", "/groups/import", {"group": [], "members": {}}, 400)
    assert bad["code"] == "GROUP_INVALID"
    unknown = await groups.call(
        "POST", "/groups/import", {"group": doc, "members": {"Alice.png": "ghost-id"}}, 400
    )
    assert unknown["code"] == "GROUP_MEMBER_UNKNOWN"
