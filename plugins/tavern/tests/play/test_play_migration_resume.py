"""A folder import killed between a chat's session and its catalog row leaves no empty session:
the re-run adopts the session recorded in the ledger and finishes the playthrough on it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from play_harness import Play
from st_folder import build, chat_lines, many_cards

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import import_main
from innkeeper_tavern.features.migration.ledger import Ledger

#: Runs the import in a child process that SIGKILLs itself at the N-th call of one method:
#: ``PlayImporter.prepare_chat`` (a chat's session exists and is recorded, nothing is bound to it
#: yet) or ``Ledger.created_session`` (the server created the session, the ledger does not know).
KILLED_RUN = """
import os, signal, sys
from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import import_main
from innkeeper_tavern.features.migration import ledger, play_import
st, origin, data, where, nth = sys.argv[1:6]
owner = play_import.PlayImporter if where == "prepare_chat" else ledger.Ledger
real = getattr(owner, where)
seen = []
def dying(*args, **kw):
    seen.append(1)
    if len(seen) == int(nth):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kw)
setattr(owner, where, dying)
sys.exit(import_main([st, "--server", origin], CommandEnvironment(data_dir=data, base_url=origin)))
"""


def report(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize(("where", "nth"), [("prepare_chat", 2), ("created_session", 1)])
async def test_a_chat_killed_after_its_session_is_finished_on_that_session(
    play: Play, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, nth: int
) -> None:
    st = build(tmp_path / "st", big_chat=40)
    data = tmp_path / "cli-data"
    argv = [sys.executable, "-c", KILLED_RUN, str(st), play.host.origin, str(data), where, str(nth)]
    killed = await asyncio.to_thread(subprocess.run, argv, capture_output=True)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    ledger = Ledger(data / "plugins" / "tavern")
    pending = {p.key: ledger.session(p.key) for p in ledger.pending() if p.kind == "chat"}
    ledger.close()
    # Chats run a few at once: the sessions the server created are those the ledger recorded
    # plus, when the kill came between the server's answer and the ledger line, unrecorded ones.
    created = {sid for sid in pending.values() if sid}
    before = {s["header"]["id"] for s in (await play.call("GET", "/host/api/sessions"))["sessions"]}
    assert created <= before and len(before) >= nth and pending
    assert not (await play.read("catalog.json", status=404))["ok"]  # no row written yet
    env = CommandEnvironment(data_dir=str(data), base_url=play.host.origin)
    code = await asyncio.to_thread(
        import_main, [str(st), "--server", play.host.origin, "--json"], env
    )
    doc = report(capsys)
    assert code == 0, [i for i in doc["items"] if i["status"] == "refused"]
    assert doc["summary"]["chat"]["imported"] == 3
    adopted = [i for i in doc["items"] if "interrupted run" in i["detail"]]
    assert len(adopted) == len(before)
    catalog = json.loads((await play.read("catalog.json"))["content"])
    every = {r["ext"]["pmpDshTavern"]["rootSessionId"] for r in catalog["playthroughs"]}
    roots = {
        r["ext"]["pmpDshTavern"]["rootSessionId"]
        for r in catalog["playthroughs"]
        if "groupId" not in r["ext"]["pmpDshTavern"]  # the group chat's playthrough
    }
    after = {s["header"]["id"] for s in (await play.call("GET", "/host/api/sessions"))["sessions"]}
    # Every session is a playthrough's root: none was left empty, none made twice.
    assert len(roots) == 3 and len(every) == 4 and after == every
    assert before <= roots
    for sid in roots:
        card = await play.v1("GET", f"/character-selection?sessionId={sid}")
        assert card["character"] is not None
        bound = await play.v2("GET", f"/sessions/{sid}/import-context")
        assert bound["binding"]["state"] == "pending"
    ledger = Ledger(data / "plugins" / "tavern")
    assert ledger.pending() == []
    ledger.close()


async def test_full_import_context_bindings_stop_starting_chats(
    play: Play, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bindings' limit no chat can be bound: the import stops creating sessions
    for the rest and says why, instead of leaving one empty session per remaining chat."""
    from innkeeper_tavern.features.migration.run import CHAT_CONCURRENCY
    from innkeeper_tavern.features.play import import_context

    monkeypatch.setattr(import_context, "MAX_BINDINGS", 3)
    st = many_cards(tmp_path / "st", 12)
    for i in range(12):
        (st / "chats" / f"card{i:04d}").mkdir(parents=True)
        lines = "\n".join(chat_lines(f"Card {i}", 1)) + "\n"
        (st / "chats" / f"card{i:04d}" / "chat.jsonl").write_text(lines)
    env = CommandEnvironment(data_dir=str(tmp_path / "cli"), base_url=play.host.origin)
    argv = [str(st), "--server", play.host.origin, "--json"]
    assert await asyncio.to_thread(import_main, argv, env) == 1
    doc = report(capsys)
    chats = [i for i in doc["items"] if i["kind"] == "chat"]
    imported = [i for i in chats if i["status"] == "imported"]
    refused = [i for i in chats if i["status"] == "refused"]
    assert len(imported) + len(refused) == 12 and 1 <= len(imported) <= 4
    assert all("bindings are full" in i["detail"] for i in refused)
    unstarted = [i for i in refused if i["detail"].endswith("not started")]
    assert len(unstarted) >= 12 - len(imported) - CHAT_CONCURRENCY
    sessions = (await play.call("GET", "/host/api/sessions"))["sessions"]
    assert len(sessions) == 12 - len(unstarted)  # only the chats already under way have one
