"""Cleanup of invalid playthroughs: preview, clean into .tavern-trash, restore, the CLI and the
optional agent tool."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from play_harness import Play

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.playthroughs import playthroughs_main


def row(pid: str, path: str, root: str | None = None) -> dict[str, Any]:
    ext: dict[str, Any] = {"pmpDshTavern": {"playthroughNumber": 1}}
    if root:
        ext["pmpDshTavern"]["rootSessionId"] = root
    return {"id": pid, "path": path, "title": pid.title(), "ext": ext}


async def setup(play: Play) -> str:
    await play.bind()
    live = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    rows = [
        row("playthrough-gone", "ada/playthrough-gone/timeline.json", "s-missing-1"),
        row("playthrough-live", "ada/playthrough-live/timeline.json", live),
        row("shared-run", "ada/shared/timeline.json", "s-missing-2"),
    ]
    for r in rows:
        await play.write(r["path"], '{"nodes": []}', expectedRevision=None)
    await play.write("ada/playthrough-gone/notes.txt", "keep me")
    await play.write("catalog.json", json.dumps({"playthroughs": rows}), expectedRevision=None)
    return live


async def test_preview_clean_restore(play: Play) -> None:
    await setup(play)
    preview = await play.v2("GET", "/playthrough-cleanup")
    items = {i["id"]: i for i in preview["items"]}
    assert items["playthrough-gone"]["cleanable"] is True
    assert items["playthrough-live"]["cleanable"] is False
    assert (items["shared-run"]["cleanable"], items["shared-run"]["reason"]) == (
        False,
        "shared-directory",
    )
    scope = preview["workspaceScope"]
    for body, code in (
        ({"action": "clean", "ids": [], "workspaceScope": scope}, "PLAY_CLEANUP_INVALID"),
        ({"action": "clean", "ids": ["x"] * 2, "workspaceScope": scope}, "PLAY_CLEANUP_INVALID"),
        ({"action": "clean", "ids": ["playthrough-gone"]}, "PLAY_CLEANUP_INVALID"),
        (
            {"action": "clean", "ids": ["playthrough-gone"], "workspaceScope": '["x","y"]'},
            "PLAY_CLEANUP_CONFLICT",
        ),
        ({"action": "nuke"}, "PLAY_CLEANUP_INVALID"),
    ):
        status, answer = await play.raw("POST", "/playthrough-cleanup", body)
        assert answer["code"] == code, body
        assert status in (400, 409)
    done = await play.v2(
        "POST",
        "/playthrough-cleanup",
        {
            "action": "clean",
            "ids": ["playthrough-gone", "playthrough-live"],
            "workspaceScope": scope,
        },
    )
    results = {r["id"]: r for r in done["results"]}
    assert results["playthrough-gone"]["status"] == "cleaned"
    assert results["playthrough-live"]["status"] == "preserved"
    backup = results["playthrough-gone"]["backupId"]
    trash = play.root / ".tavern-trash" / backup
    assert (trash / "files" / "notes.txt").read_text() == "keep me"
    assert json.loads((trash / "record.json").read_text())["state"] == "cleaned"
    assert not (play.root / "ada" / "playthrough-gone").exists()
    catalog = json.loads((play.root / "catalog.json").read_text())
    assert [r["id"] for r in catalog["playthroughs"]] == ["playthrough-live", "shared-run"]
    again = await play.v2("GET", "/playthrough-cleanup")
    assert [b["backupId"] for b in again["backups"]] == [backup]
    restored = await play.v2(
        "POST",
        "/playthrough-cleanup",
        {"action": "restore", "ids": [backup], "workspaceScope": scope},
    )
    assert restored["results"][0]["status"] == "restored"
    assert (play.root / "ada" / "playthrough-gone" / "notes.txt").read_text() == "keep me"
    catalog = json.loads((play.root / "catalog.json").read_text())
    back = next(r for r in catalog["playthroughs"] if r["id"] == "playthrough-gone")
    assert back == row("playthrough-gone", "ada/playthrough-gone/timeline.json", "s-missing-1")
    # Restoring again does not overwrite the directory that is back in place.
    twice = await play.v2(
        "POST",
        "/playthrough-cleanup",
        {"action": "restore", "ids": [backup], "workspaceScope": scope},
    )
    assert twice["results"][0]["status"] == "restored"  # nothing left to move; the row matches


async def test_the_cli_talks_to_the_running_server(play: Play, tmp_path: Path, capsys: Any) -> None:
    await setup(play)
    url = str(play.host.client.make_url("")).rstrip("/")
    env = CommandEnvironment(data_dir=str(tmp_path / "unused"), base_url=url)
    code = await asyncio.to_thread(playthroughs_main, ["cleanup", "--server", url], env)
    out = capsys.readouterr().out
    assert code == 0 and "CLEANABLE  playthrough-gone" in out
    scope = out.splitlines()[0].removeprefix("workspaceScope: ")
    code = await asyncio.to_thread(
        playthroughs_main,
        ["cleanup", "clean", "playthrough-gone", "--scope", scope, "--server", url],
        env,
    )
    assert code == 0 and "cleaned" in capsys.readouterr().out
    code = await asyncio.to_thread(
        playthroughs_main, ["cleanup", "clean", "playthrough-gone", "--server", url], env
    )
    assert code == 2
    code = await asyncio.to_thread(
        playthroughs_main,
        ["cleanup", "clean", "playthrough-live", "--scope", scope, "--server", url],
        env,
    )
    assert code == 1  # preserved


async def test_the_agent_tool_needs_maintenance_tools(start_play: Any, tmp_path: Path) -> None:
    host, play = await start_play(tmp_path / "off")
    tools = await play.call("GET", "/host/api/tools")
    assert "tavern_cleanup_invalid_playthroughs" not in [t["name"] for t in tools["tools"]]
    await host.close()
    host, play = await start_play(tmp_path / "on", plugins={"tavern": {"maintenanceTools": True}})
    tools = await play.call("GET", "/host/api/tools")
    tool = next(t for t in tools["tools"] if t["name"] == "tavern_cleanup_invalid_playthroughs")
    assert tool["owner"] == "tavern" and tool["risk"] == "workspace-write"
    await play.host.unload("tavern")
    tools = await play.call("GET", "/host/api/tools")
    assert "tavern_cleanup_invalid_playthroughs" not in [t["name"] for t in tools["tools"]]
