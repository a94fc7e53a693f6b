"""``innkeeper export sillytavern`` writes every group playthrough as a SillyTavern group chat:
an imported group chat played on (new replies, a swipe made here) comes back with every
message, speaker and swipe, and a fresh library reads the export back, idempotently
(docs/migration.md "Going back: export a SillyTavern folder")."""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from st_folder import CORPUS, GROUP_CAST, REPO, group_chat_lines, group_file

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import export_main, import_main

from .conftest import Groups

NO_SERVER = "http://127.0.0.1:9"
V2 = "/pmp-dsh-tavern/api/v2"
CHAT = "Tea - 2024-05-01"


def _folder(root: Path) -> Path:
    (root / "characters").mkdir(parents=True)
    shutil.copy(REPO / "staging-1ac6780" / "default_Seraphina.png", root / "characters")
    shutil.copy(CORPUS / "sillytavern-content" / "default_CodingSensei.png", root / "characters")
    (root / "groups").mkdir()
    avatars = tuple(a for a, _ in GROUP_CAST)
    (root / "groups" / "1712345678901.json").write_text(
        group_file("1712345678901", avatars, [CHAT], activation_strategy=1)
    )
    (root / "group chats").mkdir()
    (root / "group chats" / f"{CHAT}.jsonl").write_text("\n".join(group_chat_lines(GROUP_CAST, 20)))
    return root


def _import(src: Path, data: Path, origin: str, capsys: pytest.CaptureFixture[str]) -> Any:
    env = CommandEnvironment(data_dir=str(data), base_url=NO_SERVER)
    import_main([str(src), "--server", origin, "--json"], env)
    return json.loads(capsys.readouterr().out)


def _export(out: Path, origin: str, capsys: pytest.CaptureFixture[str]) -> None:
    env = CommandEnvironment(data_dir=str(out.parent), base_url=NO_SERVER)
    assert export_main(["sillytavern", "--out", str(out), "--server", origin], env) == 0
    capsys.readouterr()


def _messages(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


class Player:
    """Plays a group session the way the web page does: the host's turns, the timeline."""

    def __init__(self, groups: Groups, row: dict[str, Any]) -> None:
        self.groups, self.row = groups, row
        self.client, self.origin = groups.host.client, {"Origin": groups.host.origin}

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        headers = self.origin if method != "GET" else {}
        resp = await self.client.request(method, V2 + path, json=body, headers=headers)
        doc = await resp.json()
        assert resp.status < 300, doc
        return doc

    async def idle(self, sid: str) -> None:
        from innkeeper_hostapi.agents import AGENTS

        agents = self.groups.host.get(AGENTS)
        for _ in range(20):  # a round's next speaker is asked for after each turn ends
            await agents.wait_idle(sid)
            state = await self.call("GET", f"/sessions/{sid}/group")
            if not state["queued"] and not state["waiting"] and not agents.is_running(sid):
                return
            await asyncio.sleep(0.05)

    async def turn_start(self, sid: str, turn: int) -> int:
        resp = await self.client.get(f"/host/api/sessions/{sid}/history?limit=1000")
        events = (await resp.json())["events"]
        return next(
            int(e["seq"])
            for e in events
            if e["data"]["type"] == "turn/start" and e["data"]["turn"] == turn
        )

    async def messages(self, sid: str) -> list[dict[str, Any]]:
        doc = await self.call("GET", f"/sessions/{sid}/messages?bodies=display")
        return list(doc["messages"])

    async def timeline(self) -> tuple[dict[str, Any], Any]:
        query = urllib.parse.urlencode({"path": self.row["path"]})
        doc = await self.call("GET", f"/workspace/files?{query}")
        return json.loads(doc["content"]), doc["revision"]

    async def save(self, timeline: dict[str, Any], revision: Any) -> None:
        query = urllib.parse.urlencode({"path": self.row["path"]})
        body = {"content": json.dumps(timeline), "expectedRevision": revision}
        await self.call("PUT", f"/workspace/files?{query}", body)


async def _imported(
    groups: Groups, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[str, Path, Any]:
    """The ST folder imported; the host's origin, the folder and its synthetic provider."""
    from innkeeper_core.providers.synthetic import SyntheticProvider
    from innkeeper_hostapi.agents import PROVIDER

    st = _folder(tmp_path / "st")
    await asyncio.to_thread(_import, st, tmp_path / "cli", groups.host.origin, capsys)
    provider = groups.host.get(PROVIDER)
    assert isinstance(provider, SyntheticProvider)
    return groups.host.origin, st, provider


def _replies(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "assistant" and m["origin"]["kind"] == "assistant"]


async def test_a_played_group_chat_round_trips_with_every_message_speaker_and_swipe(
    groups: Groups, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin, st, provider = await _imported(groups, tmp_path, capsys)
    listed = await groups.host.client.get(f"{V2}/workspace/files?path=catalog.json")
    (row,) = json.loads((await listed.json())["content"])["playthroughs"]
    player = Player(groups, row)
    sid = row["ext"]["pmpDshTavern"]["rootSessionId"]

    # A round in list order: both members answer the player's message.
    provider.enqueue("Seraphina: welcome back.")
    provider.enqueue("Sensei: indeed.")
    await player.call("POST", f"/sessions/{sid}/user-message", {"text": "Where were we?"})
    await player.idle(sid)
    first, second = _replies(await player.messages(sid))
    assert (first["speaker"]["name"], second["speaker"]["name"]) == ("Seraphina", "Coding Sensei")

    # Swipe the second reply (a turn without the player's message): a branch before its turn
    # that names the replaced reply, then a reply there — the same member speaks again.
    history = await player.call("GET", f"/sessions/{sid}/messages?bodies=display")
    start = await player.turn_start(sid, second["turn"])
    branched = await player.call(
        "POST",
        f"/sessions/{sid}/branch",
        {
            "atEventId": start - 1,
            "stateSource": {"sessionId": sid, "beforeReplyEventId": second["seq"]},
        },
    )
    child = branched["sessionId"]
    provider.enqueue("Sensei, again: a better answer.")
    await player.call("POST", f"/sessions/{child}/group/reply", {})
    await player.idle(child)
    swiped = _replies(await player.messages(child))[-1]
    assert swiped["speaker"]["name"] == "Coding Sensei"
    assert swiped["text"] == "Sensei, again: a better answer."

    # The timeline as the page records it: a node per turn, the swipe a second variant of the
    # last one, shown (the head is on the branch).
    user = next(
        m for m in history["messages"] if m["role"] == "user" and m["turn"] == first["turn"]
    )
    timeline, revision = await player.timeline()
    v1 = {"id": "v1", "sessionId": sid, "startEventId": user["seq"], "endEventId": first["seq"]}
    v2 = {"id": "v2", "sessionId": sid, "startEventId": second["seq"], "endEventId": second["seq"]}
    v3 = {
        "id": "v3",
        "sessionId": child,
        "startEventId": swiped["seq"],
        "endEventId": swiped["seq"],
    }
    timeline["nodes"] = [
        {
            "id": "n1",
            "kind": "qa",
            "parentVariantId": None,
            "adoptedVariantId": "v1",
            "variants": [v1],
        },
        {
            "id": "n2",
            "kind": "qa",
            "parentVariantId": "v1",
            "adoptedVariantId": "v3",
            "variants": [v2, v3],
        },
    ]
    timeline["head"] = {"sessionId": child, "nodeId": "n2", "variantId": "v3"}
    await player.save(timeline, revision)

    out = tmp_path / "export" / "st"
    await asyncio.to_thread(_export, out, origin, capsys)
    group = json.loads((out / "groups" / "1712345678901.json").read_text())
    assert group["chats"] == [CHAT] and group["chat_id"] == CHAT
    before = _messages(st / "group chats" / f"{CHAT}.jsonl")
    after = _messages(out / "group chats" / f"{CHAT}.jsonl")
    assert len(after) == len(before) + 3
    renamed = {
        "default_Seraphina.png": "Seraphina.png",
        "default_CodingSensei.png": "Coding Sensei.png",
    }
    for old, new in zip(before, after, strict=False):
        if "original_avatar" in old:
            assert new["original_avatar"] == renamed[old["original_avatar"]]
        for key in ("original_avatar", "force_avatar"):
            old.pop(key, None), new.pop(key, None)
        assert new == old  # the imported chat: every field kept
    asked, welcome, sensei = after[-3:]
    assert asked["is_user"] and asked["mes"] == "Where were we?"
    assert (welcome["name"], welcome["original_avatar"]) == ("Seraphina", "Seraphina.png")
    assert welcome["force_avatar"] == "/thumbnail?type=avatar&file=Seraphina.png"
    assert welcome["swipes"] == ["Seraphina: welcome back."] and welcome["swipe_id"] == 0
    assert (sensei["name"], sensei["original_avatar"]) == ("Coding Sensei", "Coding Sensei.png")
    assert sensei["mes"] == "Sensei, again: a better answer."
    assert sensei["swipes"] == ["Sensei: indeed.", "Sensei, again: a better answer."]
    assert sensei["swipe_id"] == 1 and len(sensei["swipe_info"]) == 2
    text = (out / "group chats" / f"{CHAT}.jsonl").read_text()
    assert not text.endswith("\n")  # as SillyTavern writes a group chat

    # A fresh library reads the export: the same chat, every message, speaker and swipe.
    shutil.rmtree(tmp_path / "cli")
    await _empty_library(groups)
    fresh = await asyncio.to_thread(_import, out, tmp_path / "cli", origin, capsys)
    assert fresh["summary"]["group-chat"]["imported"] == 1
    (back,) = (await groups.call("GET", "/groups"))["groups"]
    (chat,) = (await groups.call("GET", f"/groups/{back['id']}/chats"))["chats"]
    assert chat["messageCount"] == len(after)
    assert chat["swipeCount"] == sum(
        len(m.get("swipes", [])) for m in _messages(out / "group chats" / f"{CHAT}.jsonl")
    )
    assert chat["speakers"] == ["Coding Sensei.png", "Seraphina.png"]
    again = await asyncio.to_thread(_import, out, tmp_path / "cli", origin, capsys)
    assert again["summary"]["group"]["duplicate"] == 1
    assert again["summary"]["group-chat"] == {
        "imported": 0,
        "duplicate": 1,
        "refused": 0,
        "unsupported": 0,
    }
    # ... and exports it again unchanged.
    out2 = tmp_path / "export2" / "st"
    await asyncio.to_thread(_export, out2, origin, capsys)
    assert (out2 / "group chats" / f"{CHAT}.jsonl").read_text() == text


async def _empty_library(groups: Groups) -> None:
    for group in (await groups.call("GET", "/groups"))["groups"]:
        await groups.call("DELETE", f"/groups/{group['id']}?revision={group['revision']}")
    for card in (await groups.call("GET", "/characters"))["characters"]:
        await groups.call("DELETE", f"/characters/{card['id']}")


async def test_a_new_group_playthrough_is_a_new_chat_of_its_group(
    groups: Groups, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin, _, provider = await _imported(groups, tmp_path, capsys)
    (group,) = (await groups.call("GET", "/groups"))["groups"]
    player = Player(groups, {})
    made = await player.call("POST", f"/groups/{group['id']}/playthroughs", {"title": CHAT})
    sid = made["sessionId"]
    provider.enqueue("Hello from Seraphina.")
    provider.enqueue("Hello from Sensei.")
    await player.call("POST", f"/sessions/{sid}/user-message", {"text": "Hi all"})
    await player.idle(sid)
    out = tmp_path / "export" / "st"
    await asyncio.to_thread(_export, out, origin, capsys)
    doc = json.loads((out / "groups" / "1712345678901.json").read_text())
    # The title is taken by the imported chat: the new one is named apart, and is current.
    assert doc["chats"] == [CHAT, f"{CHAT} (2)"]
    new = doc["chat_id"]
    assert new == f"{CHAT} (2)"
    lines = _messages(out / "group chats" / f"{new}.jsonl")
    names = [(m["name"], m["is_user"], m["mes"]) for m in lines]
    # The members' greetings open it, as its prompt did; then the round.
    assert names[:2] == [
        ("Seraphina", False, lines[0]["mes"]),
        ("Coding Sensei", False, lines[1]["mes"]),
    ]
    assert names[2:] == [
        ("User", True, "Hi all"),
        ("Seraphina", False, "Hello from Seraphina."),
        ("Coding Sensei", False, "Hello from Sensei."),
    ]
