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
from innkeeper_tavern.face.cli.import_export import export_main, import_main
from innkeeper_tavern.state.resources.lock import DataDirLock


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
    groups = [r for r in catalog["playthroughs"] if "groupId" in r["ext"]["pmpDshTavern"]]
    assert len(catalog["playthroughs"]) == 4 and len(groups) == 1  # 3 chats, 1 group chat
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


async def test_export_writes_playthroughs_as_chats_that_import_back(
    start_play: HostStarter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = build(tmp_path / "st", big_chat=40)
    first = tmp_path / "first"
    assert await asyncio.to_thread(import_main, [str(st), "--json"], cli_env(first)) == 0
    capsys.readouterr()
    # Play on the imported Seraphina chat: two real turns, kept as one node with two variants
    # (the second variant is the reply of the second turn: a swipe of the first).
    host, play = await start_play(first)
    catalog = json.loads((await play.read("catalog.json"))["content"])
    row = next(r for r in catalog["playthroughs"] if r["title"].startswith("Seraphina - "))
    sid = row["ext"]["pmpDshTavern"]["rootSessionId"]
    for text in ("hello again", "hello once more"):
        await play.v2("POST", f"/sessions/{sid}/user-message", {"text": text}, 202)
        await play.idle(sid)
    messages = (await play.v2("GET", f"/sessions/{sid}/messages"))["messages"]
    users = [m for m in messages if m["role"] == "user"]
    replies = [m for m in messages if m["role"] == "assistant"]
    variants = [
        {"id": f"v{i}", "sessionId": sid, "startEventId": u["seq"], "endEventId": r["seq"]}
        for i, (u, r) in enumerate(zip(users, replies, strict=True))
    ]
    node = {"id": "n1", "kind": "qa", "adoptedVariantId": "v0", "variants": variants}
    timeline = await play.read(row["path"])
    await play.write(
        row["path"], json.dumps({"nodes": [node]}), expectedRevision=timeline["revision"]
    )
    await host.close()
    # Export with no server running: the host starts inside the command for the playthroughs.
    out = tmp_path / "out"
    code = await asyncio.to_thread(export_main, ["sillytavern", "--out", str(out)], cli_env(first))
    assert code == 0, capsys.readouterr().out
    capsys.readouterr()
    folders = sorted(p.name for p in (out / "chats").iterdir())
    cards = sorted(p.stem for p in (out / "characters").iterdir())
    assert folders == cards  # ST finds a card's chats by its file name
    exported = out / "chats" / "Seraphina" / f"{row['title']}.jsonl"
    original = st / "chats" / "default_Seraphina" / f"{row['title']}.jsonl"
    text = exported.read_text()
    assert text.startswith(original.read_text())  # the imported chat, verbatim
    user_line, reply_line = (json.loads(line) for line in text.splitlines()[-2:])
    assert user_line["is_user"] is True and user_line["mes"] == "hello again"
    assert reply_line["swipes"] == [replies[0]["text"], replies[1]["text"]]
    assert reply_line["swipe_id"] == 0 and reply_line["mes"] == replies[0]["text"]
    untouched = out / "chats" / "Seraphina" / "CJK 中文.jsonl"
    assert (
        untouched.read_text() == (st / "chats" / "default_Seraphina" / "CJK 中文.jsonl").read_text()
    )
    # The persona backup keeps Mira's lorebook, by the name of its file in worlds/.
    backup = json.loads((out / "personas.json").read_text())
    lorebooks = {d.get("lorebook") for d in backup["persona_descriptions"].values()}
    assert "Toaru" in lorebooks and (out / "worlds" / "Toaru.json").exists()
    # Into a fresh data directory: the chats come back with their messages and swipes.
    second = tmp_path / "second"
    assert await asyncio.to_thread(import_main, [str(out), "--json"], cli_env(second)) == 0
    summary = report(capsys)["summary"]
    assert summary["chat"]["imported"] == 3 and summary["persona"]["imported"] == 2
    _, again = await start_play(second)
    rows = json.loads((await again.read("catalog.json"))["content"])["playthroughs"]
    back = next(r for r in rows if r["title"] == row["title"])
    ctx = json.loads(
        (await again.read(back["ext"]["pmpDshTavern"]["importContextPath"]))["content"]
    )
    assert [q["user"] for q in ctx["qa"]][-2:] == ["question 2", "hello again"]
    assert ctx["qa"][-1]["assistant"] == replies[0]["text"]
    assert ctx["qa"][-1]["swipes"] == [replies[1]["text"]]
