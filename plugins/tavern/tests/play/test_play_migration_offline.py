"""``innkeeper import <SillyTavern folder>`` with no server running: chats become playthroughs
through a host the command starts in its own process (not listening), and a server started on
the same data directory afterwards serves them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from st_folder import build
from tavern_harness import HostStarter

from innkeeper_core.cli import command_environment
from innkeeper_core.config import HostConfig
from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.cli import import_main
from innkeeper_tavern.resources.lock import DataDirLock


def cli_env(data_dir: Path) -> CommandEnvironment:
    """The environment ``innkeeper import`` gets from the CLI (it can start the host)."""
    return command_environment(HostConfig(data_dir=str(data_dir), port=9))


def report(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


async def test_offline_chats_import_then_a_server_serves_them(
    start_play: HostStarter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = build(tmp_path / "st", big_chat=40)
    data = tmp_path / "data"
    env = cli_env(data)
    code = await asyncio.to_thread(import_main, [str(st), "--json"], env)
    doc = report(capsys)
    assert code == 0, [i for i in doc["items"] if i["status"] == "refused"]
    assert doc["target"].startswith(f"data directory {data}")
    s = doc["summary"]
    assert s["chat"]["imported"] == 3 and s["character"]["imported"] == 2
    # The in-process host stopped with the command: the writer lock is free again.
    assert not DataDirLock(data / "plugins" / "tavern").held_elsewhere()
    # A second offline run imports nothing new.
    assert await asyncio.to_thread(import_main, [str(st), "--json"], env) == 0
    again = report(capsys)["summary"]
    assert all(v["imported"] == 0 for v in again.values()), again
    # A server on the same data directory serves the playthroughs.
    _, play = await start_play(data)
    catalog = json.loads((await play.read("catalog.json"))["content"])
    assert len(catalog["playthroughs"]) == 3
    row = next(r for r in catalog["playthroughs"] if r["title"].startswith("Seraphina - "))
    ext = row["ext"]["pmpDshTavern"]
    context = json.loads((await play.read(ext["importContextPath"]))["content"])
    assert context["schemaVersion"] == 1 and len(context["qa"]) == 3
    sid = ext["rootSessionId"]
    card = await play.v1("GET", f"/character-selection?sessionId={sid}")
    assert card["character"]["name"] == "Seraphina"
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "hello again"}, 202)
    await play.idle(sid)
    messages = (await play.v2("GET", f"/sessions/{sid}/messages"))["messages"]
    systems = [m["text"] for m in messages if m["role"] == "system"]
    assert any("<imported-playthrough-context" in t and "answer 2" in t for t in systems)
    assert [m["text"] for m in messages if m["role"] == "user"] == ["hello again"]
