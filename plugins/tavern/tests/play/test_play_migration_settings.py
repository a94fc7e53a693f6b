"""SillyTavern settings a folder import carries beyond the resources themselves: the allow-lists
of scoped regex scripts and a chat's own lorebook."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from play_harness import Play
from st_folder import REPO, chat_lines

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import import_main

V1 = "/pmp-dsh-tavern/api/v1"


def _script(sid: str, *, disabled: bool = False) -> dict[str, Any]:
    return {
        "id": sid,
        "scriptName": sid,
        "findRegex": f"/{sid}/g",
        "replaceString": "",
        "placement": [2],
        "disabled": disabled,
    }


def _card(name: str, scripts: list[dict[str, Any]]) -> str:
    data = {"name": name, "first_mes": "Hi.", "extensions": {"regex_scripts": scripts}}
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data})


def _folder(root: Path) -> Path:
    (root / "worlds").mkdir(parents=True)
    shutil.copy(REPO / "tag-1.0.0" / "Toaru.json", root / "worlds")
    (root / "characters").mkdir()
    (root / "characters" / "allowed.json").write_text(_card("Allowed", [_script("a1")]))
    denied = [_script("d1"), _script("d2", disabled=True)]
    (root / "characters" / "denied.json").write_text(_card("Denied", denied))
    (root / "OpenAI Settings").mkdir()
    preset = json.loads((REPO / "tag-1.9.7" / "OpenAI_Default.settings.json").read_text())
    for name in ("Open", "Closed"):
        preset["extensions"] = {"regex_scripts": [_script(f"{name.lower()}-own")]}
        (root / "OpenAI Settings" / f"{name}.json").write_text(json.dumps(preset))
    ext = {
        "regex": [_script("global")],
        "character_allowed_regex": ["allowed.json"],
        "preset_allowed_regex": {"openai": ["Open"], "textgenerationwebui": ["Closed"]},
    }
    (root / "settings.json").write_text(json.dumps({"extension_settings": ext}))
    for owner, world in (("denied", "Toaru"), ("allowed", "Nowhere")):
        lines = chat_lines(owner, 2)
        header = json.loads(lines[0])
        header["chat_metadata"]["world_info"] = world
        lines[0] = json.dumps(header)
        (root / "chats" / owner).mkdir(parents=True)
        (root / "chats" / owner / f"{owner} chat.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _states(doc: dict[str, Any]) -> dict[str, bool]:
    return {s["id"]: s.get("disabled") is True for s in doc["regexScripts"]}


async def test_allow_lists_and_chat_lorebooks_come_over(
    play: Play, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = _folder(tmp_path / "st")
    env = CommandEnvironment(data_dir=str(tmp_path / "cli"), base_url=play.host.origin)
    argv = [str(st), "--server", play.host.origin, "--json"]
    # The chat lorebook that is not in worlds/ is refused (so the exit status is 1).
    assert await asyncio.to_thread(import_main, argv, env) == 1
    doc = json.loads(capsys.readouterr().out)
    items = doc["items"]
    refused = [i for i in items if i["status"] == "refused"]
    assert [(i["kind"], i["source"]) for i in refused] == [
        ("world-book", "chats/allowed/allowed chat.jsonl")
    ]
    assert "'Nowhere'" in refused[0]["detail"]
    ids = {i["source"]: i["id"] for i in items if i["status"] == "imported" and i["id"]}
    allowed, denied = ids["characters/allowed.json"], ids["characters/denied.json"]
    # The card SillyTavern did not allow has its scoped scripts disabled; the other is as it was.
    assert _states(await play.v1("GET", f"/characters/{allowed}/regex-scripts")) == {"a1": False}
    assert _states(await play.v1("GET", f"/characters/{denied}/regex-scripts")) == {
        "d1": True,
        "d2": True,
    }
    notes = [i["detail"] for i in items if i["source"].endswith(": scoped regex")]
    assert len(notes) == 2 and any("'denied.json'" in n for n in notes)
    assert any("'Closed'" in n and "preset_allowed_regex.openai" in n for n in notes)
    # Presets: the global script (first, enabled) joins after the allow-list was applied.
    closed = ids["OpenAI Settings/Closed.json"]
    opened = ids["OpenAI Settings/Open.json"]
    closed_doc = await play.v1("GET", f"/presets/{closed}/regex-scripts")
    assert [s["id"] for s in closed_doc["regexScripts"]] == ["global", "closed-own"]
    assert _states(closed_doc) == {"global": False, "closed-own": True}
    opened_doc = await play.v1("GET", f"/presets/{opened}/regex-scripts")
    assert _states(opened_doc) == {"global": False, "open-own": False}
    # The chat's own lorebook is its session's world book.
    catalog = json.loads((await play.read("catalog.json"))["content"])
    rows = {r["title"]: r["ext"]["pmpDshTavern"]["rootSessionId"] for r in catalog["playthroughs"]}
    toaru = ids["worlds/Toaru.json"]
    books = await play.v1("GET", f"/world-book-selection?sessionId={rows['denied chat']}")
    assert books["selection"]["worldBookIds"] == [toaru]
    other = await play.v1("GET", f"/world-book-selection?sessionId={rows['allowed chat']}")
    assert other["selection"]["worldBookIds"] == []
    # A script enabled again in Innkeeper stays enabled when the import runs again.
    scripts = (await play.v1("GET", f"/characters/{denied}/regex-scripts"))["regexScripts"]
    scripts[0]["disabled"] = False
    await play.v1("PUT", f"/characters/{denied}/regex-scripts", {"regexScripts": scripts})
    assert await asyncio.to_thread(import_main, argv, env) == 0  # the chats are duplicates now
    again = json.loads(capsys.readouterr().out)["summary"]
    assert again["character"]["imported"] == 0 and again["chat"]["imported"] == 0
    assert _states(await play.v1("GET", f"/characters/{denied}/regex-scripts"))["d1"] is False
