"""``innkeeper import`` / ``innkeeper export sillytavern`` with groups and group chats: members
matched to the imported cards, a missing member reported by name, idempotent, and a round trip
that keeps every message, speaker and swipe of a 300-message group chat."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from st_folder import CORPUS, GROUP_CAST, REPO, group_chat_lines, group_file

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import export_main, import_main

from .conftest import Groups

GHOST = "Ghost.png"
NO_SERVER = "http://127.0.0.1:9"


def _folder(root: Path) -> Path:
    (root / "characters").mkdir(parents=True)
    shutil.copy(REPO / "staging-1ac6780" / "default_Seraphina.png", root / "characters")
    shutil.copy(CORPUS / "sillytavern-content" / "default_CodingSensei.png", root / "characters")
    avatars = (*(a for a, _ in GROUP_CAST), GHOST)
    (root / "groups").mkdir()
    (root / "groups" / "1712345678901.json").write_text(
        group_file(
            "1712345678901",
            avatars,
            ["Tea - 2024-05-01", "never saved"],
            activation_strategy=1,
            generation_mode=2,
            generation_mode_join_prefix="### <FIELDNAME> of {{char}}",
            disabled_members=[GROUP_CAST[1][0], GHOST],
            allow_self_responses=True,
            auto_mode_delay=9,
            custom_extension_field={"kept": [1, 2, 3]},
        )
    )
    (root / "group chats").mkdir()
    text = "\n".join(group_chat_lines(GROUP_CAST, 300))
    (root / "group chats" / "Tea - 2024-05-01.jsonl").write_text(text)
    (root / "group chats" / "orphan.jsonl").write_text(text)
    return root


def _run(argv: list[str], data: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = import_main(
        [*argv, "--json"], CommandEnvironment(data_dir=str(data), base_url=NO_SERVER)
    )
    return code, json.loads(capsys.readouterr().out)


def _messages(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_import_and_export_groups_and_group_chats(
    groups: Groups, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = _folder(tmp_path / "st")
    server = ["--server", groups.host.origin]
    code, doc = await asyncio.to_thread(_run, [str(st), *server], tmp_path / "cli", capsys)
    items = doc["items"]
    s = doc["summary"]
    assert s["character"]["imported"] == 2 and s["group"]["imported"] == 1
    assert s["group-chat"] == {"imported": 1, "duplicate": 0, "refused": 1, "unsupported": 0}
    (missing,) = [i for i in items if i["kind"] == "group-member"]
    assert missing["status"] == "refused" and "'Ghost' (Ghost.png)" in missing["detail"]
    orphan = next(i for i in items if i["source"] == "group chats/orphan.jsonl")
    assert "no group in groups/ lists this chat" in orphan["detail"]
    assert code == 1  # the missing member and the orphan chat are reported as refused

    (group,) = (await groups.call("GET", "/groups"))["groups"]
    assert [(m["name"], m["muted"]) for m in group["members"]] == [
        ("Seraphina", False),
        ("Coding Sensei", True),
    ]
    assert group["activationStrategy"] == "list"
    assert group["generationMode"] == "join-with-muted"
    assert group["joinPrefix"] == "### <FIELDNAME> of {{char}}"
    assert (group["allowSelfResponses"], group["autoModeDelay"]) == (True, 9)
    (chat,) = (await groups.call("GET", f"/groups/{group['id']}/chats"))["chats"]
    assert chat["name"] == "Tea - 2024-05-01" and chat["messageCount"] == 300
    assert chat["speakers"] == sorted(a for a, _ in GROUP_CAST)

    # A second run imports nothing new.
    _, again = await asyncio.to_thread(_run, [str(st), *server], tmp_path / "cli", capsys)
    assert again["summary"]["group"]["duplicate"] == 1
    assert again["summary"]["group-chat"]["duplicate"] == 1
    assert len((await groups.call("GET", "/groups"))["groups"]) == 1

    # Export: the group file names the exported card files; the chat keeps every message.
    out = tmp_path / "out"
    argv = ["sillytavern", "--out", str(out), *server]
    env = CommandEnvironment(data_dir=str(tmp_path), base_url=NO_SERVER)
    assert await asyncio.to_thread(export_main, argv, env) == 0
    capsys.readouterr()
    cards = sorted(p.name for p in (out / "characters").iterdir())
    assert cards == ["Coding Sensei.png", "Seraphina.png"]
    exported = json.loads((out / "groups" / "1712345678901.json").read_text())
    assert exported["members"] == ["Seraphina.png", "Coding Sensei.png", GHOST]
    assert sorted(exported["disabled_members"]) == ["Coding Sensei.png", GHOST]
    assert exported["activation_strategy"] == 1 and exported["generation_mode"] == 2
    assert exported["custom_extension_field"] == {"kept": [1, 2, 3]}
    assert exported["chat_metadata"] == {"note_prompt": "keep it short", "note_depth": 4}
    assert exported["chats"] == ["Tea - 2024-05-01"] and exported["chat_id"] == "Tea - 2024-05-01"
    assert not any(k.startswith("innkeeper:") for k in exported)
    before = _messages(st / "group chats" / "Tea - 2024-05-01.jsonl")
    after = _messages(out / "group chats" / "Tea - 2024-05-01.jsonl")
    assert len(after) == 300
    renamed = {
        "default_Seraphina.png": "Seraphina.png",
        "default_CodingSensei.png": "Coding Sensei.png",
    }
    for old, new in zip(before, after, strict=True):
        if "original_avatar" in old:
            assert new["original_avatar"] == renamed[old["original_avatar"]]
            assert new["force_avatar"].endswith("file=" + new["original_avatar"])
        old.pop("original_avatar", None), new.pop("original_avatar", None)
        old.pop("force_avatar", None), new.pop("force_avatar", None)
        assert new == old  # text, speaker name, swipes, swipe_id, extra: all kept

    # ... and SillyTavern's folder, imported into a fresh library, gives the same group back.
    shutil.rmtree(tmp_path / "cli")
    await groups.call("DELETE", f"/groups/{group['id']}?revision={group['revision']}")
    for card in (await groups.call("GET", "/characters"))["characters"]:
        await groups.call("DELETE", f"/characters/{card['id']}")
    code, third = await asyncio.to_thread(_run, [str(out), *server], tmp_path / "cli", capsys)
    assert third["summary"]["group"]["imported"] == 1
    assert third["summary"]["group-chat"]["imported"] == 1
    (back,) = (await groups.call("GET", "/groups"))["groups"]
    assert [(m["name"], m["muted"]) for m in back["members"]] == [
        ("Seraphina", False),
        ("Coding Sensei", True),
    ]
    (chat,) = (await groups.call("GET", f"/groups/{back['id']}/chats"))["chats"]
    assert chat["messageCount"] == 300
    assert chat["swipeCount"] == sum(len(m.get("swipes", [])) for m in before)
    assert chat["speakers"] == ["Coding Sensei.png", "Seraphina.png"]


async def test_an_imported_group_chat_plays_on(
    groups: Groups, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from innkeeper_core.providers.synthetic import SyntheticProvider
    from innkeeper_hostapi.agents import AGENTS, PROVIDER

    st = _folder(tmp_path / "st")
    server = ["--server", groups.host.origin]
    await asyncio.to_thread(_run, [str(st), *server], tmp_path / "cli", capsys)
    client, origin = groups.host.client, {"Origin": groups.host.origin}
    v2 = "/pmp-dsh-tavern/api/v2"
    listed = await (await client.get(f"{v2}/workspace/files?path=catalog.json")).json()
    (row,) = [
        r
        for r in json.loads(listed["content"])["playthroughs"]
        if "groupId" in r["ext"]["pmpDshTavern"]
    ]
    assert row["title"] == "Tea - 2024-05-01"
    sid = row["ext"]["pmpDshTavern"]["rootSessionId"]
    provider = groups.host.get(PROVIDER)
    assert isinstance(provider, SyntheticProvider)
    provider.enqueue("Seraphina carries on.")
    resp = await client.post(
        f"{v2}/sessions/{sid}/user-message", json={"text": "Where were we?"}, headers=origin
    )
    assert resp.status == 202
    await groups.host.get(AGENTS).wait_idle(sid)
    sent = "\n".join(m.content for m in provider.requests[-1].messages)
    bound = await (await client.get(f"{v2}/sessions/{sid}/import-context")).json()
    assert bound["binding"]["state"] == "consumed", bound
    # The old chat is in the first turn's context, each reply under its speaker.
    assert (
        "Seraphina: Seraphina says 296" in sent and "Coding Sensei: Coding Sensei says 299" in sent
    )
    assert "player line 298" in sent
    doc = await (await client.get(f"{v2}/sessions/{sid}/messages?bodies=display")).json()
    (reply,) = [m for m in doc["messages"] if m["role"] == "assistant"]
    # List order with Coding Sensei muted (the imported group): Seraphina answers.
    assert reply["speaker"]["name"] == "Seraphina" and reply["text"] == "Seraphina carries on."
    # A second import run changes nothing: no second playthrough.
    _, again = await asyncio.to_thread(_run, [str(st), *server], tmp_path / "cli", capsys)
    assert again["summary"]["group-chat"]["duplicate"] == 1
    listed = await (await client.get(f"{v2}/workspace/files?path=catalog.json")).json()
    rows = json.loads(listed["content"])["playthroughs"]
    assert sum(1 for r in rows if "groupId" in r["ext"]["pmpDshTavern"]) == 1
